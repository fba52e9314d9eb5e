// Memory events: what the allocation and copy hooks hand to the sampling session through the
// process-wide MpscRing. Layout (little endian, 8-byte aligned):
//
//   offset  size  field
//   0       1     type       MemoryEventType
//   1       1     domain     kDomainPython | kDomainNative (allocations only)
//   2       2     nframes    RawFrame entries following the header (alloc and copy events)
//   4       4     tid        kernel thread id of the thread that caused the event
//   8       8     address    block address (alloc, free), 0 otherwise
//   16      8     size       requested bytes (alloc), copied bytes (copy), live bytes (peak)
//   24      8     weight     estimated bytes this sample stands for (alloc, copy)
//   32      8     time_ns    CLOCK_MONOTONIC when it happened (peak, alloc, free), 0 (copy)
//   40      16*n  frames     leaf first (see transport/sample_record.h)
#ifndef PEAKLINE_TRANSPORT_MEMORY_EVENT_H_
#define PEAKLINE_TRANSPORT_MEMORY_EVENT_H_

#include <cstdint>

#include "transport/sample_record.h"

namespace peakline::transport {

enum class MemoryEventType : uint8_t {
  kAlloc = 1,  // a sampled allocation
  kFree = 2,   // a sampled allocation was freed
  kCopy = 3,   // a sampled memcpy/memmove
  kPeak = 4,   // the exact live-bytes counter reached a new high-water mark
};

inline constexpr uint8_t kDomainNative = 0;
inline constexpr uint8_t kDomainPython = 1;

struct MemoryEvent {
  MemoryEventType type;
  uint8_t domain;
  uint16_t nframes;
  int32_t tid;
  uint64_t address;
  int64_t size;
  int64_t weight;
  int64_t time_ns;
};
static_assert(sizeof(MemoryEvent) == 40);

// Stacks of memory events are cut at this depth (leaf kept): the innermost frames decide
// which line an allocation is charged to.
inline constexpr int kMaxMemoryFrames = 64;

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_MEMORY_EVENT_H_
