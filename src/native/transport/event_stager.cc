#include "transport/event_stager.h"

#include "session/own_threads.h"

namespace peakline::transport {

using session::BlockSignalsForNewThreads;
using session::NameThisThread;
using session::NameThread;

EventStager::EventStager(size_t max_record, size_t buffer_bytes)
    : max_record_(max_record), bufs_{Buffer(buffer_bytes), Buffer(buffer_bytes)} {}

EventStager::~EventStager() { Stop(); }

void EventStager::Start(MpscRing* ring, void (*on_thread_start)()) {
  if (thread_.joinable() || ring == nullptr) return;
  ring_ = ring;
  stop_.store(false, std::memory_order_relaxed);
  // A quarter: the ring still has three quarters left for the records written while the
  // thread wakes up, and an ordinary program (drained every tick) never reaches it.
  ring->SetDoorbellWatermark(ring->capacity() / 4);
  BlockSignalsForNewThreads no_signals;
  thread_ = std::thread([this, on_thread_start] { Run(on_thread_start); });
  NameThread(thread_.native_handle(), "peakline-stage");
}

void EventStager::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  ring_->RingDoorbell();
  thread_.join();
}

void EventStager::Run(void (*on_thread_start)()) {
  NameThisThread("peakline-stage");
  if (on_thread_start != nullptr) on_thread_start();
  for (;;) {
    ring_->WaitDoorbell(kIdleWaitNs);
    if (stop_.load(std::memory_order_acquire)) return;
    MutexLock lock(&mu_);
    const size_t moved = StageLocked(ring_);
    if (moved > 0) {
      passes_.fetch_add(1, std::memory_order_relaxed);
      staged_.fetch_add(moved, std::memory_order_relaxed);
    }
  }
}

size_t EventStager::StageLocked(MpscRing* ring) {
  Buffer& b = bufs_[active_];
  size_t moved = 0;
  for (;;) {
    const size_t len = ring->NextLength();
    if (len == 0) break;  // empty, or the next record is still being written
    const bool too_long = len > max_record_;
    const size_t need = 8 + (too_long ? 0 : (len + 7) & ~size_t{7});
    if (b.capacity - b.used < need) break;  // full: the rest waits in the ring
    uint8_t* at = b.bytes() + b.used;
    const uint64_t header = too_long ? UINT64_MAX : len;
    std::memcpy(at, &header, sizeof(header));
    // Too long: Read() with no room skips the record (and reports SIZE_MAX).
    ring->Read(at + 8, too_long ? 0 : len);
    b.used += need;
    ++moved;
  }
  return moved;
}

}  // namespace peakline::transport
