// SpscRing: a fixed-capacity single-producer / single-consumer byte ring.
//
// Purpose: carries variable-length sample records from a signal handler (the producer, always
// the sampled thread itself) to the session's tick thread (the consumer).
//
// Thread safety: exactly one producer and one consumer. The producer side (TryWrite) is
// async-signal-safe: no allocation, no locks, no libc calls beyond inlined copies. A signal
// handler never nests with itself on one thread (the signal is blocked while its handler runs),
// so "one producer" holds for a per-thread ring.
//
// Layout: each record is [uint32 length][length bytes], written contiguously modulo capacity
// (a record may wrap around the end). head_ is advanced with release order after the bytes
// are written; the consumer reads head_ with acquire order.
#ifndef PEAKLINE_TRANSPORT_SPSC_RING_H_
#define PEAKLINE_TRANSPORT_SPSC_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/ring_bytes.h"

namespace peakline::transport {

class SpscRing {
 public:
  // capacity_bytes must be a power of two; allocation happens here, never on the hot path.
  explicit SpscRing(size_t capacity_bytes)
      : capacity_(capacity_bytes), mask_(capacity_bytes - 1), buf_(new uint8_t[capacity_bytes]) {}

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer. Copies the record made of two parts (header, body) so callers need no staging
  // buffer. Returns false (record dropped) when there is not enough free space.
  bool TryWrite(const void* part1, uint32_t len1, const void* part2, uint32_t len2) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    const uint32_t len = len1 + len2;
    const uint64_t needed = sizeof(uint32_t) + static_cast<uint64_t>(len);
    if (needed > capacity_ - (head - tail)) return false;
    uint64_t pos = head;
    pos = CopyIn(pos, &len, sizeof(len));
    pos = CopyIn(pos, part1, len1);
    pos = CopyIn(pos, part2, len2);
    head_.store(pos, std::memory_order_release);
    return true;
  }

  // Consumer. Copies the next record into out (at most out_cap bytes). Returns the record's
  // length, 0 if the ring is empty. A record longer than out_cap is skipped and reported as
  // SIZE_MAX (cannot happen for callers that size out_cap to their largest record).
  size_t Read(void* out, size_t out_cap) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    if (head == tail) return 0;
    uint32_t len = 0;
    uint64_t pos = CopyOut(tail, &len, sizeof(len));
    size_t result = len;
    if (len <= out_cap) {
      pos = CopyOut(pos, out, len);
    } else {
      pos += len;
      result = SIZE_MAX;
    }
    tail_.store(pos, std::memory_order_release);
    return result;
  }

  // Only while neither side is active (e.g. reusing a slot whose thread has exited).
  void Reset() {
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }

  bool Empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  size_t capacity() const { return capacity_; }

 private:
  uint64_t CopyIn(uint64_t pos, const void* src, size_t n) {
    return RingCopyIn(buf_.get(), mask_, pos, src, n);
  }
  uint64_t CopyOut(uint64_t pos, void* dst, size_t n) const {
    return RingCopyOut(buf_.get(), mask_, pos, dst, n);
  }

  const uint64_t capacity_;
  const uint64_t mask_;
  std::unique_ptr<uint8_t[]> buf_;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer only
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer only
};

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_SPSC_RING_H_
