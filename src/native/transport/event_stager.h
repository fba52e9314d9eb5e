// EventStager: keeps the memory event ring from overflowing while the GIL is held elsewhere.
//
// The memory events (transport/mpsc_ring.h, written by the allocation hooks) are resolved under
// the GIL — a record names code objects, which only stay valid while the GIL orders their
// deallocation against the resolver — so the session drains them on its 20 ms tick, when
// it gets the GIL. A C call that holds the GIL for seconds while it allocates (json.loads of a
// big document, sorted() of millions of strings) would fill the ring meanwhile, and every
// record that did not fit was lost: an unattributed allocation, or a free never charged back,
// which leaves its block "live" on its line.
//
// The stager is a native thread that needs no GIL: it sleeps on the ring's doorbell (rung by
// a producer when a quarter of the ring is queued) and moves the raw records, unresolved, into
// a staging buffer. The GIL-holding consumer takes what is staged first, then what is still in
// the ring, in one order: a record's place in the sequence never changes. Resolution stays
// under the GIL, so the code-object lifetime argument is unchanged: the code-dealloc hook's
// drain goes through the staging buffers as well (MemoryAggregator::Drain).
//
// Two staging buffers: the consumer takes the filled one and processes it without holding
// the lock, while the thread stages into the other. Each is a reserved zero-page mapping
// (transport/zeroed_pages.h): only the pages a storm fills become resident, and a buffer that
// grew past kKeepBytes gives its pages back once processed. The thread fills one buffer while
// the consumer is away (16 MiB: ~100,000 events, i.e. ~50 GB allocated at the default mean);
// when it is full the rest stays in the ring, and what does not fit there is dropped and
// counted by the ring, as before.
//
// Thread safety: one consumer at a time (the GIL serialises them); the stager thread; the
// mutex orders the two around the ring's consumer side and the active buffer. Nothing here
// calls malloc on the thread (std::thread's own start-up aside, done by the creator).
#ifndef PEAKLINE_TRANSPORT_EVENT_STAGER_H_
#define PEAKLINE_TRANSPORT_EVENT_STAGER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>

#include "sync/mutex.h"
#include "sync/thread_annotations.h"
#include "transport/mpsc_ring.h"
#include "transport/zeroed_pages.h"

namespace peakline::transport {

class EventStager {
 public:
  // Bytes per staging buffer; a record takes 8 + its length rounded up to 8.
  static constexpr size_t kDefaultBufferBytes = 16u << 20;
  // A processed buffer that used more than this gives its pages back.
  static constexpr size_t kKeepBytes = 64u << 10;
  // The thread re-checks the ring this often even if the doorbell never rang.
  static constexpr int64_t kIdleWaitNs = 200'000'000;

  // max_record: the longest record the consumer accepts; longer ones reach it as invalid.
  explicit EventStager(size_t max_record, size_t buffer_bytes = kDefaultBufferBytes);
  ~EventStager();
  EventStager(const EventStager&) = delete;
  EventStager& operator=(const EventStager&) = delete;

  // Sets the ring's doorbell at a quarter of its capacity and starts the thread (signals
  // blocked, named "peakline-stage"). on_thread_start runs first on the new thread.
  void Start(MpscRing* ring, void (*on_thread_start)());
  // Joins the thread. Staged records stay until the next Drain.
  void Stop();

  // The consumer: calls fn(const uint8_t* record, size_t length) for every record, staged or
  // still in the ring (nullptr: none), in order. length is SIZE_MAX for a record longer than
  // max_record. fn may run Python (it is not called under the lock).
  template <typename Fn>
  void Drain(MpscRing* ring, Fn&& fn) PEAKLINE_EXCLUDES(mu_);

  // Records the thread moved (not counting the consumer's own), and its passes that moved any.
  uint64_t staged_records() const { return staged_.load(std::memory_order_relaxed); }
  uint64_t stage_passes() const { return passes_.load(std::memory_order_relaxed); }

 private:
  struct Buffer {
    explicit Buffer(size_t bytes) : words(bytes / 8), capacity(bytes) {}
    ZeroedPages<uint64_t> words;
    size_t capacity;
    size_t used = 0;  // bytes
    uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words.get()); }
  };

  void Run(void (*on_thread_start)()) PEAKLINE_EXCLUDES(mu_);
  // Moves committed records from the ring into the active buffer while they fit. Returns how
  // many were moved.
  size_t StageLocked(MpscRing* ring) PEAKLINE_REQUIRES(mu_);

  const size_t max_record_;
  // The active one is the thread's (under mu_); the other is the consumer's while it is taken.
  Buffer bufs_[2];
  int active_ PEAKLINE_GUARDED_BY(mu_) = 0;  // the buffer being filled
  Mutex mu_;
  MpscRing* ring_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> staged_{0};
  std::atomic<uint64_t> passes_{0};
};

template <typename Fn>
void EventStager::Drain(MpscRing* ring, Fn&& fn) {
  // Buffers are taken in fill order: the one the thread filled, then (after the swap) the
  // rest of the ring staged into the other. Looping covers a storm larger than one buffer.
  for (int round = 0; round < 64; ++round) {
    Buffer* taken;
    {
      MutexLock lock(&mu_);
      if (ring != nullptr) StageLocked(ring);
      taken = &bufs_[active_];
      if (taken->used == 0) break;
      active_ ^= 1;  // the thread stages into the other one meanwhile (it is empty)
    }
    const uint8_t* p = taken->bytes();
    const uint8_t* end = p + taken->used;
    while (p < end) {
      uint64_t len;
      std::memcpy(&len, p, sizeof(len));
      p += 8;
      if (len == UINT64_MAX) {  // a record too long for the consumer: skipped by the stager
        fn(p, SIZE_MAX);
        continue;
      }
      fn(p, static_cast<size_t>(len));
      p += (len + 7) & ~uint64_t{7};
    }
    if (taken->used > kKeepBytes) taken->words.Reset();
    // Only the consumer reads or writes a taken buffer's contents; its used count is reset
    // under the lock so the thread sees an empty buffer when it becomes active again.
    MutexLock lock(&mu_);
    taken->used = 0;
  }
}

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_EVENT_STAGER_H_
