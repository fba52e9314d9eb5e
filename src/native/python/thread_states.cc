#include "python/thread_states.h"

#include <dlfcn.h>

#include "cpu/native_thread_ids.h"
#include "python/frame_layout.h"

namespace peakline::python {

namespace {

#ifdef Py_GIL_DISABLED
// The runtime's interpreter-list mutex (HEAD_LOCK), or nullptr if it cannot be located.
// _PyRuntimeState's `interpreters` is { PyMutex mutex; PyInterpreterState* head; ... } in
// 3.14 and 3.15: the one-byte mutex is padded to the pointer's alignment before `head`.
PyMutex* InterpreterListMutex() {
  static PyMutex* const mutex = []() -> PyMutex* {
    auto* runtime = static_cast<char*>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
    if (runtime == nullptr) return nullptr;
    const auto* d = reinterpret_cast<const cpython::DebugOffsets*>(runtime);
    const uint64_t head = d->runtime_state.interpreters_head;
    if (head < sizeof(PyInterpreterState*) || head >= d->runtime_state.size) return nullptr;
    return reinterpret_cast<PyMutex*>(runtime + head - sizeof(PyInterpreterState*));
  }();
  return mutex;
}
#endif

}  // namespace

std::vector<std::pair<pid_t, PyThreadState*>> ListThreadStates() {
  std::vector<std::pair<pid_t, PyThreadState*>> out;
  out.reserve(16);
#ifdef Py_GIL_DISABLED
  PyMutex* mutex = InterpreterListMutex();
  if (mutex == nullptr) return out;  // SelfCheckFrameLayout has refused such an interpreter
  PyMutex_Lock(mutex);
#endif
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(PyInterpreterState_Main()); ts != nullptr;
       ts = PyThreadState_Next(ts)) {
    out.emplace_back(cpu::NativeThreadId(ts), ts);
  }
#ifdef Py_GIL_DISABLED
  PyMutex_Unlock(mutex);
#endif
  return out;
}

}  // namespace peakline::python
