#include "python/gil.h"

namespace peakline::python {

#ifdef Py_GIL_DISABLED
PyObject* CoreLockObject() {
  // Made by the first call, which the module's import makes (one thread, the import lock
  // held); an object no Python code ever sees, so no other code ever locks it.
  static PyObject* const object = PyDict_New();
  return object;
}
#endif

}  // namespace peakline::python
