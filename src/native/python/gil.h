// The GIL as a capability of Clang's thread-safety analysis (sync/thread_annotations.h).
//
// State that only code holding the GIL may touch is PEAKLINE_GUARDED_BY(gil); a function that
// must be called with it held is PEAKLINE_REQUIRES(gil). The analysis sees the GIL taken in
// three ways: TakeGil (a thread of peakline's own, PyEval_RestoreThread), a caller that
// REQUIRES it, or AssumeGilHeld at the top of a function that CPython or nanobind calls with
// it held. Py_BEGIN_ALLOW_THREADS is invisible to the analysis: code between it and
// Py_END_ALLOW_THREADS must not touch guarded state (none does).
//
// `gil` is a name for the analysis only: it holds no state and costs nothing.
//
// A free-threaded build (3.14t, 3.15t) has no GIL: there the same rule is kept by a critical
// section (PyCriticalSection) on one object of the core's own, held wherever the GIL is
// assumed: every entry from Python (CoreSection), the code-object deallocation hook, the tick
// thread between TakeGil and DropGil. For this purpose it behaves as the GIL does: exclusive
// while its holder runs, let go whenever the holder's thread state detaches (a blocking call,
// Py_BEGIN_ALLOW_THREADS) or waits for another critical section, and taken again before the
// holder goes on — the same hand-off points a Python call already has with the GIL, which the
// core allows for. It never blocks a thread that holds nothing (a waiter detaches, so a
// stop-the-world pause never waits on it). On a GIL build CoreSection is empty.
#ifndef PEAKLINE_PYTHON_GIL_H_
#define PEAKLINE_PYTHON_GIL_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "sync/thread_annotations.h"

namespace peakline::python {

struct PEAKLINE_CAPABILITY("GIL") Gil {};
inline Gil gil;

// CPython or nanobind called the current function with the GIL held.
inline void AssumeGilHeld() PEAKLINE_ASSERT_CAPABILITY(gil) {}

#ifdef Py_GIL_DISABLED
// The object whose critical section stands for the GIL (made once, at the module's import;
// never freed).
PyObject* CoreLockObject();
#endif

// The GIL's stand-in on a free-threaded build, for the scope of the object; nothing otherwise.
// For a function that CPython or nanobind calls with the thread attached (so with the GIL, on
// a GIL build): the first statement of every entry into the session's state.
class CoreSection {
 public:
#ifdef Py_GIL_DISABLED
  CoreSection() { PyCriticalSection_Begin(&section_, CoreLockObject()); }
  ~CoreSection() { PyCriticalSection_End(&section_); }
#else
  CoreSection() {}  // user-provided: a scope object, not an unused variable
#endif
  CoreSection(const CoreSection&) = delete;
  CoreSection& operator=(const CoreSection&) = delete;

 private:
#ifdef Py_GIL_DISABLED
  PyCriticalSection section_;
#endif
};

#ifdef Py_GIL_DISABLED
// The tick thread's section between TakeGil and DropGil (one thread: its own).
inline thread_local PyCriticalSection tick_section;
#endif

// PyEval_RestoreThread(ts) / PyEval_SaveThread(), as the analysis sees them (on a
// free-threaded build also the core's critical section: above).
inline void TakeGil(PyThreadState* ts) PEAKLINE_ACQUIRE(gil) PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
  PyEval_RestoreThread(ts);
#ifdef Py_GIL_DISABLED
  PyCriticalSection_Begin(&tick_section, CoreLockObject());
#endif
}
inline PyThreadState* DropGil() PEAKLINE_RELEASE(gil) PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
#ifdef Py_GIL_DISABLED
  PyCriticalSection_End(&tick_section);
#endif
  return PyEval_SaveThread();
}

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_GIL_H_
