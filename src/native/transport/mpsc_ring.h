// MpscRing: a fixed-capacity, lock-free multi-producer / single-consumer ring of
// variable-length records, in reservation order.
//
// Producers are the allocation hooks of any thread (never a signal handler). A producer
// reserves space with a CAS on head_, writes its bytes, then publishes the record by storing
// its length with the commit bit (release). The consumer reads records at tail_ while they
// are committed, zeroes each record after reading and advances tail_. A record reserved but
// not yet committed stops the consumer until its next pass. When there is no room the
// producer drops the record and returns false ("not sampled").
//
// Record layout: [uint32 length | kCommitBit][payload, padded to 8 bytes], wrapping modulo
// the capacity. Headers are 8-byte aligned, so a header never straddles the end; the header
// word is accessed as an atomic in place (std::atomic_ref). The buffer is zero pages from the
// kernel (transport/zeroed_pages.h): only the part the program's events reach becomes resident.
//
// Doorbell: with a watermark set, a producer whose record leaves more than that many bytes
// queued wakes the consumer thread blocked in WaitDoorbell (one futex wake, then nothing more
// until the consumer re-arms it) — so a consumer can sleep until the ring fills, instead of
// polling it. The producer side costs one compare when the ring is below the watermark.
#ifndef PEAKLINE_TRANSPORT_MPSC_RING_H_
#define PEAKLINE_TRANSPORT_MPSC_RING_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cpu/clock.h"
#include "transport/ring_bytes.h"
#include "transport/zeroed_pages.h"

namespace peakline::transport {

class MpscRing {
 public:
  static constexpr uint32_t kCommitBit = 0x80000000u;

  // capacity_bytes: a power of two, at least 4 KiB. Allocates here, never on the hot path.
  explicit MpscRing(size_t capacity_bytes)
      : capacity_(capacity_bytes), mask_(capacity_bytes - 1), buf_(capacity_bytes / 8) {}

  // Producer (any thread, lock-free). Writes header part a and body part b as one record.
  bool TryWrite(const void* a, uint32_t len_a, const void* b, uint32_t len_b) {
    const uint32_t len = len_a + len_b;
    const uint64_t total = 8 + ((static_cast<uint64_t>(len) + 7) & ~uint64_t{7});
    uint64_t head = head_.load(std::memory_order_relaxed);
    uint64_t tail;
    for (;;) {
      tail = tail_.load(std::memory_order_acquire);
      if (total > capacity_ - (head - tail)) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      if (head_.compare_exchange_weak(head, head + total, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
        break;
      }
    }
    uint64_t pos = head + 8;
    pos = CopyIn(pos, a, len_a);
    CopyIn(pos, b, len_b);
    HeaderWord(head).store(len | kCommitBit, std::memory_order_release);
    // tail may be stale (older, smaller): then the fill is overestimated, and the worst case
    // is one early wake.
    if (head + total - tail > watermark_.load(std::memory_order_relaxed)) RingDoorbell();
    return true;
  }

  // Length of the next committed record, 0 if none is ready (consumer only).
  size_t NextLength() {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return 0;
    const uint32_t word = HeaderWord(tail).load(std::memory_order_acquire);
    return (word & kCommitBit) == 0 ? 0 : word & ~kCommitBit;
  }

  // 0 rings on every record; the default (UINT64_MAX) never rings.
  void SetDoorbellWatermark(uint64_t bytes) { watermark_.store(bytes, std::memory_order_relaxed); }

  // Any thread, async-signal-safe: wakes the waiting consumer unless already rung.
  void RingDoorbell() {
    if (bell_.load(std::memory_order_relaxed) != 0) return;
    if (bell_.exchange(1, std::memory_order_acq_rel) != 0) return;
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell_), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }

  // The consumer thread: blocks until the doorbell rings or timeout_ns passes, then re-arms
  // it. Returns true when it rang. Records written after the re-arm ring it again.
  bool WaitDoorbell(int64_t timeout_ns) {
    struct timespec timeout = cpu::ToTimespec(timeout_ns);
    if (bell_.load(std::memory_order_acquire) == 0) {
      // Returns at once if a producer rang between the load and the wait (value no longer 0).
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell_), FUTEX_WAIT_PRIVATE, 0, &timeout,
              nullptr, 0);
    }
    return bell_.exchange(0, std::memory_order_acq_rel) != 0;
  }

  // Consumer (one thread at a time). Copies the next committed record into out; returns its
  // length, 0 if none is ready.
  size_t Read(void* out, size_t out_cap) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return 0;
    const uint32_t word = HeaderWord(tail).load(std::memory_order_acquire);
    if ((word & kCommitBit) == 0) return 0;  // reserved, still being written
    const uint32_t len = word & ~kCommitBit;
    const uint64_t total = 8 + ((static_cast<uint64_t>(len) + 7) & ~uint64_t{7});
    const size_t n = len <= out_cap ? len : 0;
    CopyOut(tail + 8, out, n);
    // Free space stays all zero, so the header position of a record that is reserved but not
    // yet committed reads 0 whatever bytes lay there before ("not ready").
    HeaderWord(tail).store(0, std::memory_order_relaxed);
    for (uint64_t pos = tail + 8; pos < tail + total; pos += 8) buf_[(pos & mask_) / 8] = 0;
    tail_.store(tail + total, std::memory_order_release);
    return len <= out_cap ? len : SIZE_MAX;
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  size_t capacity() const { return capacity_; }

 private:
  std::atomic_ref<uint32_t> HeaderWord(uint64_t pos) {
    return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(&buf_[(pos & mask_) / 8]));
  }
  uint8_t* Bytes() { return reinterpret_cast<uint8_t*>(buf_.get()); }
  uint64_t CopyIn(uint64_t pos, const void* src, size_t n) {
    return RingCopyIn(Bytes(), mask_, pos, src, n);
  }
  uint64_t CopyOut(uint64_t pos, void* dst, size_t n) {
    return RingCopyOut(Bytes(), mask_, pos, dst, n);
  }

  const uint64_t capacity_;
  const uint64_t mask_;
  ZeroedPages<uint64_t> buf_;  // 8-byte words: record headers are aligned for atomic_ref
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> watermark_{UINT64_MAX};
  alignas(64) std::atomic<uint32_t> bell_{0};
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word");
};

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_MPSC_RING_H_
