// The per-thread state every allocation hook shares, and the inline fast paths of the
// Python-domain wrappers (hooks/pymem_hooks.cc), which run on every Python object allocation
// and free. Everything else about the hooks lives in allocation_hooks.cc.
//
// The state is initial-exec TLS (`__thread`: a plain %fs-relative load, no lazy TLS
// initialiser can run inside malloc) and zero-initialised POD. On the fast path a Python
// allocation costs a counting check and a countdown subtraction; a free costs one byte of the
// sampled-pointer table's counting filter. Everything rarer goes to the out-of-line slow paths.
#ifndef PEAKLINE_HOOKS_HOOK_THREAD_STATE_H_
#define PEAKLINE_HOOKS_HOOK_THREAD_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "memory/byte_sampler.h"
#include "memory/sampled_pointer_table.h"

// GCC 12's UBSan reports member accesses of this extern initial-exec TLS object, once inlined
// into a PIE executable, as "member access within null pointer" although the address is the
// valid thread-local one (checked in gdb; the access itself works and every assertion of the
// ASan+UBSan native tests passes). no_sanitize("null") does not silence it, so the five tiny
// inline functions below opt out of UBSan; ASan still checks them, and UBSan checks the
// out-of-line slow paths and everything else.
#if defined(__GNUC__) && !defined(__clang__)
#define PEAKLINE_TLS_ACCESS __attribute__((no_sanitize_undefined))
#else
#define PEAKLINE_TLS_ACCESS
#endif

namespace peakline::hooks {

struct HookThreadState {
  int32_t busy;          // inside a hook's own bookkeeping: nested calls pass straight through
  int32_t python_depth;  // inside a PyMem/PyObject call: underlying malloc/mmap not sampled
  bool internal;         // a peakline thread: nothing counted
  int32_t tid;           // cached kernel thread id (0 = unknown)
  uint32_t session;      // the session whose samplers and delta this state holds
  bool exit_flush;       // a thread-exit destructor will flush `delta`
  int64_t delta;         // unflushed live-bytes change
  int64_t pending_peak;  // a new peak reached inside a Python-domain call, not yet announced
  int64_t pending_peak_time_ns;
  memory::ByteSampler alloc;
  memory::ByteSampler copy;
};

namespace internal {

extern __thread HookThreadState t_state __attribute__((tls_model("initial-exec")));
extern std::atomic<bool> g_counting;     // a session is counting
extern std::atomic<uint32_t> g_session;  // incremented by every StartMemoryHooks
extern memory::SampledPointerTable* g_sampled;

PEAKLINE_TLS_ACCESS inline bool Counting(const HookThreadState& s) {
  return g_counting.load(std::memory_order_relaxed) && s.busy == 0 && !s.internal;
}

// Out of line: a sampling point, a new session for this thread, a pending peak.
void PythonAllocSlow(HookThreadState& s, void* ptr, size_t size);
// Out of line: the counting filter says the block may be a sampled one.
void PythonFreeSlow(HookThreadState& s, void* ptr);

}  // namespace internal

// For hooks/pymem_hooks.cc: around the wrapped allocator's own call, so that the malloc and
// mmap it makes underneath are counted but not sampled a second time.
PEAKLINE_TLS_ACCESS inline void EnterPythonDomain() { ++internal::t_state.python_depth; }
PEAKLINE_TLS_ACCESS inline void LeavePythonDomain() { --internal::t_state.python_depth; }

// After a Python-domain allocation of `size` bytes returned `ptr`.
PEAKLINE_TLS_ACCESS inline void OnPythonAlloc(void* ptr, size_t size) {
  HookThreadState& s = internal::t_state;
  if (ptr == nullptr || !internal::Counting(s)) return;
  if (__builtin_expect(s.pending_peak == 0 &&
                           s.session == internal::g_session.load(std::memory_order_relaxed) &&
                           s.alloc.SkipIfNoPoint(static_cast<int64_t>(size)),
                       1)) {
    return;
  }
  internal::PythonAllocSlow(s, ptr, size);
}

// Before a Python-domain free of `ptr`.
PEAKLINE_TLS_ACCESS inline void OnPythonFree(void* ptr) {
  HookThreadState& s = internal::t_state;
  if (ptr == nullptr || !internal::Counting(s)) return;
  if (__builtin_expect(!internal::g_sampled->MayContain(reinterpret_cast<uintptr_t>(ptr)), 1)) {
    return;
  }
  internal::PythonFreeSlow(s, ptr);
}

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_HOOK_THREAD_STATE_H_
