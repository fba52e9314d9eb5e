// The GIL as a capability of Clang's thread-safety analysis (base/thread_annotations.h).
//
// State that only code holding the GIL may touch is PEAKLINE_GUARDED_BY(gil); a function that
// must be called with it held is PEAKLINE_REQUIRES(gil). The analysis sees the GIL taken in
// three ways: TakeGil (a thread of peakline's own, PyEval_RestoreThread), a caller that
// REQUIRES it, or AssumeGilHeld at the top of a function that CPython or nanobind calls with
// it held. Py_BEGIN_ALLOW_THREADS is invisible to the analysis: code between it and
// Py_END_ALLOW_THREADS must not touch guarded state (none does).
//
// `gil` is a name for the analysis only: it holds no state and costs nothing.
#ifndef PEAKLINE_PYTHON_GIL_H_
#define PEAKLINE_PYTHON_GIL_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "base/thread_annotations.h"

namespace peakline::python {

struct PEAKLINE_CAPABILITY("GIL") Gil {};
inline Gil gil;

// CPython or nanobind called the current function with the GIL held.
inline void AssumeGilHeld() PEAKLINE_ASSERT_CAPABILITY(gil) {}

// PyEval_RestoreThread(ts) / PyEval_SaveThread(), as the analysis sees them.
inline void TakeGil(PyThreadState* ts) PEAKLINE_ACQUIRE(gil) PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
  PyEval_RestoreThread(ts);
}
inline PyThreadState* DropGil() PEAKLINE_RELEASE(gil) PEAKLINE_NO_THREAD_SAFETY_ANALYSIS {
  return PyEval_SaveThread();
}

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_GIL_H_
