// SampledPointerTable: the set of addresses of sampled allocations that are still live.
//
// Every native free() probes it (a Python object's free does not: hooks/python_domain.h), so
// lookups of absent keys must be cheap: open addressing with linear probing inside a bounded
// window (kWindow slots from the hash position). Lock-free:
// Insert claims an empty or deleted slot with a CAS; Remove swaps the key for kDeleted.
// Slots never return to empty, so a long run slowly fills the table with deleted markers; a
// lookup then scans the whole window (kWindow * 8 bytes, a few cache lines). When no slot
// in the window is free, Insert fails and the caller counts the sample as "not tracked".
//
// Every free() of an unsampled block must be answered fast, and over a long run the table
// fills with deleted markers that lengthen probes. So a counting filter sits in front: one
// byte per hash bucket (8 KiB, so it stays in L1), incremented when a key is inserted and
// decremented when it is removed. A zero byte proves the key absent, so most frees cost one
// byte load. A counter that reaches 255 sticks there (it then only ever says "maybe").
// (Measured on benchmarks/workloads/object_churn.py: the probe was 11% of the run's cycles.)
//
// Thread safety: all operations may run concurrently from any thread; none allocates.
#ifndef PEAKLINE_MEMORY_SAMPLED_POINTER_TABLE_H_
#define PEAKLINE_MEMORY_SAMPLED_POINTER_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/zeroed_pages.h"

namespace peakline::memory {

class SampledPointerTable {
 public:
  static constexpr uintptr_t kEmpty = 0;
  static constexpr uintptr_t kDeleted = 1;
  static constexpr size_t kWindow = 32;

  static constexpr unsigned kFilterBits = 13;

  explicit SampledPointerTable(size_t log2_slots)
      : mask_((size_t{1} << log2_slots) - 1), shift_(64 - log2_slots),
        slots_((size_t{1} << log2_slots) + kWindow), filter_(size_t{1} << kFilterBits) {}

  // Returns false if the key is already present or the window is full.
  bool Insert(uintptr_t key) {
    if (key <= kDeleted || Contains(key)) return false;
    const size_t start = Hash(key);
    for (size_t i = 0; i < kWindow; ++i) {
      std::atomic<uintptr_t>& slot = slots_[start + i];
      uintptr_t v = slot.load(std::memory_order_relaxed);
      while (v == kEmpty || v == kDeleted) {
        if (slot.compare_exchange_weak(v, key, std::memory_order_release, std::memory_order_relaxed)) {
          // Counted after the key is visible: a free of this block cannot race with its own
          // allocation (the caller has not returned the pointer yet).
          std::atomic<uint8_t>& count = filter_[FilterIndex(key)];
          uint8_t c = count.load(std::memory_order_relaxed);
          while (c != 255 && !count.compare_exchange_weak(c, c + 1, std::memory_order_release,
                                                          std::memory_order_relaxed)) {}
          return true;
        }
      }
    }
    return false;
  }

  // False proves the key absent (one byte load); true means "probe with Remove".
  bool MayContain(uintptr_t key) const {
    return filter_[FilterIndex(key)].load(std::memory_order_acquire) != 0;
  }
  // Hot path (every free): returns true if the key was present and is now removed.
  bool Remove(uintptr_t key) {
    std::atomic<uint8_t>& count = filter_[FilterIndex(key)];
    if (__builtin_expect(count.load(std::memory_order_acquire) == 0, 1)) return false;
    const size_t start = Hash(key);
    for (size_t i = 0; i < kWindow; ++i) {
      std::atomic<uintptr_t>& slot = slots_[start + i];
      uintptr_t v = slot.load(std::memory_order_acquire);
      if (v == kEmpty) return false;
      if (v == key) {
        if (!slot.compare_exchange_strong(v, kDeleted, std::memory_order_acq_rel)) return false;
        uint8_t c = count.load(std::memory_order_relaxed);
        while (c != 255 && c != 0 && !count.compare_exchange_weak(c, c - 1, std::memory_order_relaxed)) {}
        return true;
      }
    }
    return false;
  }

  bool Contains(uintptr_t key) const {
    const size_t start = Hash(key);
    for (size_t i = 0; i < kWindow; ++i) {
      const uintptr_t v = slots_[start + i].load(std::memory_order_acquire);
      if (v == kEmpty) return false;
      if (v == key) return true;
    }
    return false;
  }

  // Not thread safe: only while no hook runs (between profiling sessions). Gives the pages
  // back: only those the next session's samples hash to become resident again.
  void Clear() {
    slots_.Reset();
    filter_.Reset();
  }

 private:
  size_t Hash(uintptr_t key) const {
    // Allocations are at least 16-byte aligned: drop the low bits, then Fibonacci hashing.
    return static_cast<size_t>(((key >> 4) * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
  }

  static size_t FilterIndex(uintptr_t key) {
    return static_cast<size_t>(((key >> 4) * 0xD6E8FEB86659FD93ULL) >> (64 - kFilterBits));
  }

  const size_t mask_;
  const unsigned shift_;
  // Zero pages (transport/zeroed_pages.h): kEmpty is 0, so a fresh or reset table is empty.
  transport::ZeroedPages<std::atomic<uintptr_t>> slots_;  // mask_+1+kWindow: the window never wraps
  transport::ZeroedPages<std::atomic<uint8_t>> filter_;
};

}  // namespace peakline::memory

#endif  // PEAKLINE_MEMORY_SAMPLED_POINTER_TABLE_H_
