// CodeResolver: (code object, instruction offset) -> interned frame (file, function, line).
//
// Guarded by the GIL: every call, and the code-object deallocation hook, runs with the GIL
// held, which serialises them.
//
// Why a deallocation hook: samples hold raw code-object pointers (the signal handler cannot
// take references). A code object can die between a sample and its resolution (exec() of
// fresh code in a loop), and its address can then be reused. Interposing
// PyCode_Type.tp_dealloc lets the profiler resolve every pending sample *before* a code
// object is freed and forget the object's cache entry, so a pointer in the cache or in a
// ring always names a live code object (SamplingSession::BeforeCodeFreed / EndOperation).
#ifndef PEAKLINE_PYTHON_CODE_RESOLVER_H_
#define PEAKLINE_PYTHON_CODE_RESOLVER_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "aggregate/stack_table.h"

namespace peakline::python {

class CodeResolver {
 public:
  explicit CodeResolver(aggregate::StackTable* table) : table_(table) {}

  // Frame id of (code, lasti). code must be a live code object (GIL held).
  uint32_t Resolve(PyObject* code, int32_t lasti);
  // Forget everything about code, which is about to be deallocated, and count its address as
  // dead until Revive(): a sample captured *during* the deallocation (a CPU signal, or an
  // allocation, while the dying frame is still the thread's current one) names it and must
  // not be resolved.
  void Forget(const void* code) {
    codes_.erase(code);
    dying_.erase(code);
    dead_.insert(code);
  }
  // code's reference count reached zero (the dealloc hook keeps it until Forget()): its
  // fields are intact, but it must not be handed to Python code any more.
  void MarkDying(const void* code) { dying_.insert(code); }
  // After the deallocation, once those samples are drained: the address may now belong to a
  // new code object, whose samples must resolve.
  void Revive(const void* code) { dead_.erase(code); }
  bool IsDead(const void* code) const { return !dead_.empty() && dead_.count(code) != 0; }

 private:
  struct CodeInfo {
    uint32_t file_id;
    uint32_t function_id;
    int32_t first_lineno;
    std::unordered_map<int32_t, uint32_t> frame_by_lasti;
  };
  aggregate::StackTable* table_;
  std::unordered_map<const void*, CodeInfo> codes_;
  std::unordered_set<const void*> dead_;
  std::unordered_set<const void*> dying_;
};

// Code objects built at run time by cloudpickle (how joblib/loky and Dask ship a function
// defined in __main__ or pickled by value) have co_filename "<dynamic-code>": the real file
// is not in the code object, only in the globals of the function rebuilt around it
// (`__file__`). locator: callable(code | None, qualname, first_lineno, n_code_units) ->
// str | None, asked once per such code object (None while the object is being freed: then
// only what it learnt before can answer); its answer replaces the file name. Set by the
// session (peakline/_dynamic_code.py); nullptr clears it. GIL held.
inline constexpr std::string_view kDynamicCodeFile = "<dynamic-code>";
void SetDynamicCodeLocator(PyObject* locator);

// Installs `before_free` to run (GIL held) just before any code object is deallocated.
// before_free returns true to keep the object for now: its reference count is zero and
// nothing can reach it (code objects are not tracked by the garbage collector; a weak
// reference to an object whose count is zero reads as dead), but its memory stays intact and
// readable until the caller passes it to FinishCodeDealloc(), which runs the deallocation
// the interpreter asked for. Not thread safe: call with the GIL held. Uninstall restores the
// original slot if it is still ours.
void InstallCodeDeallocHook(bool (*before_free)(PyObject* code));
void FinishCodeDealloc(PyObject* code);
void UninstallCodeDeallocHook();

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_CODE_RESOLVER_H_
