// Byte copies into and out of a power-of-two ring buffer, wrapping at the end. Shared by
// SpscRing and MpscRing. Plain loops on purpose: async-signal-safe, and never a call to
// memcpy (which peakline's copy hooks interpose).
#ifndef PEAKLINE_TRANSPORT_RING_BYTES_H_
#define PEAKLINE_TRANSPORT_RING_BYTES_H_

#include <cstddef>
#include <cstdint>

namespace peakline::transport {

// Copies n bytes from src into buf at logical position pos; returns pos + n.
inline uint64_t RingCopyIn(uint8_t* buf, uint64_t mask, uint64_t pos, const void* src, size_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) buf[(pos + i) & mask] = s[i];
  return pos + n;
}

// Copies n bytes at logical position pos out of buf into dst; returns pos + n.
inline uint64_t RingCopyOut(const uint8_t* buf, uint64_t mask, uint64_t pos, void* dst, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = buf[(pos + i) & mask];
  return pos + n;
}

}  // namespace peakline::transport

#endif  // PEAKLINE_TRANSPORT_RING_BYTES_H_
