// MappingTable: the program's anonymous mappings (address -> length), so that munmap subtracts
// from the heap counters what mmap added (file mappings are not heap). The allocation hooks'
// mmap/munmap wrappers are its only users.
//
// Lock-free, the same windowed open addressing as SampledPointerTable: Insert claims an empty
// or deleted slot (key 0 or 1) with a CAS; Take swaps the key for 1 (deleted).
//
// Thread safety: Insert and Take may run concurrently from any thread; none allocates.
// Clear() only between sessions.
#ifndef PEAKLINE_MEMORY_MAPPING_TABLE_H_
#define PEAKLINE_MEMORY_MAPPING_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/zeroed_pages.h"

namespace peakline::memory {

class MappingTable {
 public:
  static constexpr size_t kSlots = 1 << 14;
  static constexpr size_t kWindow = 32;
  // Returns false when the window is full (the mapping is then not tracked at all).
  bool Insert(uintptr_t addr, size_t len) {
    const size_t start = Hash(addr);
    for (size_t i = 0; i < kWindow; ++i) {
      uintptr_t v = keys_[start + i].load(std::memory_order_relaxed);
      while (v == 0 || v == 1) {
        if (keys_[start + i].compare_exchange_weak(v, 1, std::memory_order_acquire)) {
          lens_[start + i].store(len, std::memory_order_relaxed);
          keys_[start + i].store(addr, std::memory_order_release);
          return true;
        }
      }
    }
    return false;
  }
  // Removes addr and returns its length, or 0 if unknown.
  size_t Take(uintptr_t addr) {
    const size_t start = Hash(addr);
    for (size_t i = 0; i < kWindow; ++i) {
      uintptr_t v = keys_[start + i].load(std::memory_order_acquire);
      if (v == 0) return 0;
      if (v == addr && keys_[start + i].compare_exchange_strong(v, 1, std::memory_order_acq_rel)) {
        return lens_[start + i].load(std::memory_order_relaxed);
      }
    }
    return 0;
  }
  void Clear() { keys_.Reset(); }  // between sessions only; gives the pages back

 private:
  static size_t Hash(uintptr_t a) { return static_cast<size_t>(((a >> 12) * 0x9E3779B97F4A7C15ULL) >> 50); }
  // Zero pages: resident only where mappings hash to (256 KiB if all were touched).
  transport::ZeroedPages<std::atomic<uintptr_t>> keys_{kSlots + kWindow};
  transport::ZeroedPages<std::atomic<size_t>> lens_{kSlots + kWindow};
};

}  // namespace peakline::memory

#endif  // PEAKLINE_MEMORY_MAPPING_TABLE_H_
