// Allocation and copy hooks: the replacements that the SymbolPatcher installs in every loaded
// object's GOT (malloc family, mmap/munmap, memcpy family), plus the entry points that the
// Python-domain allocator wrappers (hooks/pymem_hooks.h) call. dlopen and dlsym, which make
// libraries loaded later and pointers looked up at run time go through these hooks too, are
// in hooks/process_hooks.h.
//
// What a hook does, in order (hot path: no locks, no allocation, no exceptions):
//   1. call the real function;
//   2. if this thread is not inside peakline itself: feed its byte sampler and, at a sampling
//      point, capture the Python stack and push a MemoryEvent (alloc / free / copy);
//   3. update the thread's exact live-bytes delta and flush it to HeapCounters every 64 KiB,
//      pushing a kPeak event when the flush sets a new high-water mark.
// Step 2 comes before step 3 so a peak event always follows the sample that made the peak.
//
// Python vs native: allocations made through PyMem_* / PyObject_* are sampled once, at the
// Python level (domain "python"); the malloc/mmap calls that the Python allocator makes
// underneath are counted in the exact totals but not sampled again. Everything else is
// "native". The profiler's own threads are marked internal and not counted at all.
#ifndef PEAKLINE_HOOKS_ALLOCATION_HOOKS_H_
#define PEAKLINE_HOOKS_ALLOCATION_HOOKS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "hooks/hook_thread_state.h"
#include "memory/heap_counters.h"
#include "status/status.h"
#include "transport/mpsc_ring.h"
#include "transport/sample_record.h"

namespace peakline::hooks {

// Fills frames (leaf first) for the calling thread and returns how many (0 when there are
// none to read: a native worker thread before the main thread's stack is known). Must not
// allocate.
using MemoryStackCapture = int (*)(transport::RawFrame* frames, int max_frames);

struct MemoryConfig {
  int64_t alloc_mean_bytes = 512 * 1024;
  int64_t copy_mean_bytes = 2 * 1024 * 1024;
  bool track_copies = true;
  // Drained every tick (20 ms), and by the stager thread (transport/event_stager.h) whenever a
  // quarter of it is queued: 256 KiB holds about 250 events of the deepest stacks, ~1600 of
  // typical ones. A ring cycles, so all of it becomes resident in a long run: small on
  // purpose. Full: "dropped_events".
  size_t event_ring_bytes = 256 * 1024;
};

struct MemoryHookStats {
  uint64_t alloc_samples;
  uint64_t free_samples;
  uint64_t copy_samples;
  uint64_t dropped_events;   // ring full
  uint64_t untracked;        // sampled pointer table window full
  int64_t blas_buffer_bytes;  // most bytes OpenBLAS work buffers held at once (not sampled)
  int64_t blas_buffer_maps;   // OpenBLAS work buffers mapped
};

// Setup and teardown: GIL held, never from a hook. self_addr: any address inside peakline's
// own extension (that object is never patched, so peakline's own allocations are invisible).
Status StartMemoryHooks(const MemoryConfig& config, MemoryStackCapture capture,
                        const void* self_addr);
void StopMemoryHooks();
// Fork child only, after StopMemoryHooks: a thread that is gone may have left a half-written
// record in the event ring; the next StartMemoryHooks allocates a fresh ring (old one leaked).
void ForgetEventRingAfterFork();

transport::MpscRing* MemoryEventRing();
memory::HeapCounters& Heap();
MemoryHookStats HookStats();

// The calling thread is part of peakline (the tick thread, the stager): its allocations are
// not counted.
void MarkCurrentThreadInternal();

// While one lives, the calling thread runs peakline's own work on the program's behalf: the core
// calling into Python on whatever thread needs the answer (the file filter, the dynamic-code
// locator), a program's thread among them -- a code object freed on the main thread asks the
// filter about its file. Its allocations and copies are not sampled (a sampling point in
// their bytes is dropped), so nothing of it lands on the program's line; they still count in
// the exact totals, and their frees are seen as any.
class OwnWorkScope {
 public:
  OwnWorkScope();
  ~OwnWorkScope();
  OwnWorkScope(const OwnWorkScope&) = delete;
  OwnWorkScope& operator=(const OwnWorkScope&) = delete;
};

class SymbolPatcher;
// After a dlopen (hooks/process_hooks.cc): patches newly loaded objects for `other` and for
// the allocation hooks, as peakline (the patchers' own allocations are not counted).
void PatchObjectsLoadedSince(SymbolPatcher* other);

// While the hooks count: the hook that forwards to `real` if `real` is one of their originals
// (what dlsym should hand out for it), else `real`. The hook stays safe to call after the
// session: it forwards for ever and counts only while a session counts.
void* AllocationReplacementFor(void* real);

// The Python-domain wrappers (hooks/pymem_hooks.cc) run the inline code of
// hooks/python_domain.h, on the state in hooks/hook_thread_state.h.

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_ALLOCATION_HOOKS_H_
