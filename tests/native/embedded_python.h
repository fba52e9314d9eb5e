// The interpreter of the native tests that run Python code: isolated (no environment, no
// user site), with the home of the interpreter the build was configured for (CMake defines
// PEAKLINE_PYTHON_HOME), so that the standard library imports.
#ifndef PEAKLINE_TESTS_NATIVE_EMBEDDED_PYTHON_H_
#define PEAKLINE_TESTS_NATIVE_EMBEDDED_PYTHON_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>

namespace peakline::testing_support {

// Initialises the interpreter; returns "" or why it failed. The calling thread then holds
// the GIL for good.
inline std::string StartEmbeddedPython() {
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);
#ifdef PEAKLINE_PYTHON_HOME
  PyConfig_SetBytesString(&config, &config.home, PEAKLINE_PYTHON_HOME);
#endif
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (!PyStatus_Exception(status)) return "";
  return status.err_msg != nullptr ? status.err_msg : "Py_InitializeFromConfig failed";
}

}  // namespace peakline::testing_support

#endif  // PEAKLINE_TESTS_NATIVE_EMBEDDED_PYTHON_H_
