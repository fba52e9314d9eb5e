// The per-thread state every allocation hook shares (the native hooks in allocation_hooks.cc
// and the Python-domain wrappers' inline fast paths in hooks/python_domain.h), and the few
// globals those fast paths read.
//
// The state is initial-exec TLS (`__thread`: a plain %fs-relative load, no lazy TLS
// initialiser can run inside malloc) and zero-initialised POD. Everything rarer than the fast
// paths goes to the out-of-line functions declared here.
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
  int32_t own_work;      // in a call the core makes into Python (OwnWorkScope): not sampled
  int32_t tid;           // cached kernel thread id (0 = unknown)
  uint32_t session;      // the session whose samplers and delta this state holds
  bool exit_flush;       // a thread-exit destructor will flush `delta`
  int64_t delta;         // unflushed live-bytes change
  int64_t pending_peak;  // a new peak reached inside a Python-domain call, not yet announced
  int64_t pending_peak_time_ns;
  void* native_block;    // the last block a native hook saw allocated inside a Python-domain call
  memory::ByteSampler alloc;
  memory::ByteSampler copy;
};

namespace internal {

extern __thread HookThreadState t_state __attribute__((tls_model("initial-exec")));
extern std::atomic<bool> g_counting;     // a session is counting
extern std::atomic<uint32_t> g_session;  // incremented by every StartMemoryHooks
extern memory::SampledPointerTable* g_sampled;
// Set, for the rest of the session, when a sampled Python-domain block could not be placed
// in a block of its own from malloc (hooks/python_domain.h): from then on every Python-domain
// free probes the sampled-pointer table itself.
extern std::atomic<bool> g_python_probe;

PEAKLINE_TLS_ACCESS inline bool Counting(const HookThreadState& s) {
  return g_counting.load(std::memory_order_relaxed) && s.busy == 0 && !s.internal;
}

// The Python-domain wrappers' out-of-line paths (hooks/python_domain.h calls them).
// The countdown did not settle it (a sampling point, or this thread's first allocation of
// the session): true if this allocation of `size` bytes is to be sampled.
bool PythonSamplingPoint(HookThreadState& s, size_t size);
// Records `ptr` (`size` bytes asked for) as a sampled Python-domain block, then announces a
// pending peak. in_native_block: its free is certain to reach the native free hook.
void TrackPythonSample(HookThreadState& s, void* ptr, size_t size, bool in_native_block);
// A peak found inside a Python-domain call, announced after it returned.
void AnnouncePendingPeak(HookThreadState& s);
// Probe mode only: a Python-domain free of `ptr`, which may be a sampled block.
void ProbePythonFree(HookThreadState& s, void* ptr);

}  // namespace internal

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_HOOK_THREAD_STATE_H_
