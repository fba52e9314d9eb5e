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
// ring always names a live code object.
#ifndef PEAKLINE_ENGINE_CODE_RESOLVER_H_
#define PEAKLINE_ENGINE_CODE_RESOLVER_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "profile/stack_table.h"

namespace peakline::engine {

class CodeResolver {
 public:
  explicit CodeResolver(profile::StackTable* table) : table_(table) {}

  // Frame id of (code, lasti). code must be a live code object (GIL held).
  uint32_t Resolve(PyObject* code, int32_t lasti);
  // Forget everything about code (called from the deallocation hook). Until the next
  // ClearDead(), the address counts as dead: a frame captured while the code object was
  // being torn down (an allocation inside its frame's cleanup) must not be resolved.
  void Forget(const void* code) {
    codes_.erase(code);
    dead_.insert(code);
  }
  bool IsDead(const void* code) const { return !dead_.empty() && dead_.count(code) != 0; }
  // Called after every drain: events captured before a death were resolved by the drain the
  // deallocation hook ran first; later ones are gone now.
  void ClearDead() { dead_.clear(); }

 private:
  struct CodeInfo {
    uint32_t file_id;
    uint32_t function_id;
    int32_t first_lineno;
    std::unordered_map<int32_t, uint32_t> frame_by_lasti;
  };
  profile::StackTable* table_;
  std::unordered_map<const void*, CodeInfo> codes_;
  std::unordered_set<const void*> dead_;
};

// Installs `before_free` to run (GIL held) just before any code object is deallocated.
// Not thread safe: call with the GIL held. Uninstall restores the original slot if it is
// still ours.
void InstallCodeDeallocHook(void (*before_free)(PyObject* code));
void UninstallCodeDeallocHook();

}  // namespace peakline::engine

#endif  // PEAKLINE_ENGINE_CODE_RESOLVER_H_
