// The kernel thread id of a Python thread state: what /proc, the per-thread CPU clocks and
// the sampling timers are keyed by.
//
// CPython 3.11+ stores it in the thread state (PyThreadState::native_thread_id). 3.10 stores
// only the pthread id (PyThreadState::thread_id, what threading.get_ident() returns), and
// glibc offers no call that maps a pthread id to a kernel id. So on 3.10 the mapping is
// told: by the thread itself (ThreadStarted, peakline's wrap of threading's thread bootstrap,
// runs on the new thread) and, for the threads alive when profiling starts, by the Python
// layer from threading.enumerate() (ident, native_id). A thread that threading never saw (a C
// extension's own thread calling into Python) has no known id on 3.10: it is not registered
// as a Python thread, and is sampled as a native thread when native threads are sampled.
//
// Thread safety: every function is called with the GIL held, which guards the table.
#ifndef PEAKLINE_CPU_NATIVE_THREAD_IDS_H_
#define PEAKLINE_CPU_NATIVE_THREAD_IDS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/types.h>

namespace peakline::cpu {

// ts's kernel thread id, or 0 if it is not known.
pid_t NativeThreadId(PyThreadState* ts);

// Records that the thread with pthread id ident has kernel thread id tid (a later call for
// the same ident replaces it: pthread ids are reused). A no-op on 3.11+.
void RememberNativeThreadId(unsigned long ident, pid_t tid);

}  // namespace peakline::cpu

#endif  // PEAKLINE_CPU_NATIVE_THREAD_IDS_H_
