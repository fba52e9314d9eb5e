// The main interpreter's Python thread states, walked safely on either kind of build.
//
// A GIL build keeps the thread list still while the GIL is held (a thread state is unlinked
// and freed by a thread holding it). A free-threaded build (3.14t+) unlinks and frees them
// while other threads run, under the list's own lock only (CPython's HEAD_LOCK: the mutex of
// _PyRuntime's `interpreters`, which sits just before `interpreters.head`, whose offset
// _Py_DebugOffsets publishes): the walk takes that lock there. It copies the list out and
// lets go before the caller does anything with it; a thread state in the copy may be freed
// afterwards, so later reads of another thread's state go through SafeRead
// (python_frames.h, ReadOtherThreadStack).
#ifndef PEAKLINE_PYTHON_THREAD_STATES_H_
#define PEAKLINE_PYTHON_THREAD_STATES_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sys/types.h>

#include <utility>
#include <vector>

namespace peakline::python {

// (kernel thread id, thread state) of every thread state of the main interpreter, in list
// order; a state whose thread id is not known yet has id 0. The thread is attached (the GIL
// held on a GIL build). On a free-threaded build it may detach while it waits for the list's
// lock (PyMutex_Lock): call it before reading state that another entry may change.
std::vector<std::pair<pid_t, PyThreadState*>> ListThreadStates();

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_THREAD_STATES_H_
