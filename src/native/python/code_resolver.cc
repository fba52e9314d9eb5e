#include "python/code_resolver.h"

#include <string>
#include <string_view>

#include "hooks/allocation_hooks.h"

namespace peakline::python {

namespace {

std::string_view Utf8(PyObject* s) {
  if (s == nullptr || !PyUnicode_Check(s)) return "<?>";
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s, &n);
  if (p == nullptr) {
    PyErr_Clear();
    return "<?>";
  }
  return std::string_view(p, static_cast<size_t>(n));
}

destructor g_original_dealloc = nullptr;
PyObject* g_dynamic_code_locator = nullptr;  // strong reference; GIL held

// The file of a "<dynamic-code>" code object as the locator names it, or "" when it cannot.
// A Python call: it may hand the GIL over; code stays valid (frees are deferred meanwhile).
std::string LocateDynamicCode(PyCodeObject* code, bool alive) {
  if (g_dynamic_code_locator == nullptr) return "";
  hooks::OwnWorkScope own;  // peakline's work, on whichever thread asks
  PyObject* locator = g_dynamic_code_locator;
  Py_INCREF(locator);
#if PY_VERSION_HEX >= 0x030B0000
  PyObject* name = code->co_qualname;
  const Py_ssize_t code_units = Py_SIZE(code);
#else  // 3.10: no qualified name; the instructions are the bytes object co_code
  PyObject* name = code->co_name;
  const Py_ssize_t code_units = PyBytes_GET_SIZE(code->co_code) / 2;
#endif
  PyObject* args[] = {alive ? reinterpret_cast<PyObject*>(code) : Py_None, name,
                      PyLong_FromLong(code->co_firstlineno), PyLong_FromSsize_t(code_units)};
  std::string file;
  if (args[2] != nullptr && args[3] != nullptr) {
    PyObject* result = PyObject_Vectorcall(locator, args, 4, nullptr);
    if (result != nullptr && PyUnicode_Check(result)) file = std::string(Utf8(result));
    Py_XDECREF(result);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(args[2]);
  Py_XDECREF(args[3]);
  Py_DECREF(locator);
  return file == "<?>" ? std::string() : file;
}
bool (*g_before_free)(PyObject*) = nullptr;

void HookedCodeDealloc(PyObject* code) {
  if (g_before_free != nullptr) {
    // The hook may run Python API calls; keep any pending exception of the caller intact.
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    const bool kept = g_before_free(code);
    PyErr_Restore(type, value, tb);
    if (kept) return;  // FinishCodeDealloc() frees it later
  }
  g_original_dealloc(code);
}

}  // namespace

uint32_t CodeResolver::Resolve(PyObject* code_obj, int32_t lasti) {
  auto* code = reinterpret_cast<PyCodeObject*>(code_obj);
  auto it = codes_.find(code_obj);
  if (it == codes_.end()) {
    CodeInfo info;
    const std::string_view file = Utf8(code->co_filename);
    std::string located;
    if (file == kDynamicCodeFile) located = LocateDynamicCode(code, dying_.count(code_obj) == 0);
    info.file_id = table_->InternString(located.empty() ? file : std::string_view(located));
#if PY_VERSION_HEX >= 0x030B0000
    info.function_id = table_->InternString(Utf8(code->co_qualname));
#else
    // 3.10's code objects carry no qualified name (co_qualname is new in 3.11): a method
    // shows as "fit", not "Model.fit".
    info.function_id = table_->InternString(Utf8(code->co_name));
#endif
    info.first_lineno = code->co_firstlineno;
    it = codes_.emplace(code_obj, std::move(info)).first;
  }
  CodeInfo& info = it->second;
  auto fit = info.frame_by_lasti.find(lasti);
  if (fit != info.frame_by_lasti.end()) return fit->second;
  int line = PyCode_Addr2Line(code, lasti < 0 ? -1 : lasti * 2);
  if (line < 0) line = info.first_lineno;
  const uint32_t id = table_->InternFrame(
      aggregate::FrameKey{info.file_id, info.function_id, info.first_lineno, line});
  info.frame_by_lasti.emplace(lasti, id);
  return id;
}

void SetDynamicCodeLocator(PyObject* locator) {
  Py_XINCREF(locator);
  PyObject* old = g_dynamic_code_locator;
  g_dynamic_code_locator = locator;
  Py_XDECREF(old);
}

void FinishCodeDealloc(PyObject* code) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  g_original_dealloc(code);
  PyErr_Restore(type, value, tb);
}

void InstallCodeDeallocHook(bool (*before_free)(PyObject* code)) {
  g_before_free = before_free;
  if (PyCode_Type.tp_dealloc != HookedCodeDealloc) {
    g_original_dealloc = PyCode_Type.tp_dealloc;
    PyCode_Type.tp_dealloc = HookedCodeDealloc;
  }
}

void UninstallCodeDeallocHook() {
  g_before_free = nullptr;
  if (PyCode_Type.tp_dealloc == HookedCodeDealloc) PyCode_Type.tp_dealloc = g_original_dealloc;
}

}  // namespace peakline::python
