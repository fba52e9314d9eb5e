#include "engine/code_resolver.h"

#include <string_view>

namespace peakline::engine {

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
    info.file_id = table_->InternString(Utf8(code->co_filename));
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
      profile::FrameKey{info.file_id, info.function_id, info.first_lineno, line});
  info.frame_by_lasti.emplace(lasti, id);
  return id;
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

}  // namespace peakline::engine
