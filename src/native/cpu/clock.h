// Time in nanoseconds: the one ns-per-second constant, the conversions from and to the
// kernel's time structures, and the clock every *_ns time of a session is read on
// (CLOCK_MONOTONIC: a sample's wall_ns, a memory event's time_ns, the ticks, the GPU
// readings, the session's start_monotonic_ns).
//
// All inline and async-signal-safe: the signal handler and the allocation hooks call them
// (clock_gettime is a vDSO call, about 20 ns).
#ifndef PEAKLINE_CPU_CLOCK_H_
#define PEAKLINE_CPU_CLOCK_H_

#include <sys/time.h>
#include <time.h>

#include <cstdint>

namespace peakline::cpu {

inline constexpr int64_t kNsPerSecond = 1'000'000'000;

inline int64_t TimespecNs(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec;
}

inline int64_t TimevalNs(const timeval& tv) {
  return static_cast<int64_t>(tv.tv_sec) * kNsPerSecond + static_cast<int64_t>(tv.tv_usec) * 1000;
}

// ns >= 0.
inline timespec ToTimespec(int64_t ns) {
  return timespec{static_cast<time_t>(ns / kNsPerSecond), static_cast<long>(ns % kNsPerSecond)};
}

// CLOCK_MONOTONIC now.
inline int64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimespecNs(ts);
}

}  // namespace peakline::cpu

#endif  // PEAKLINE_CPU_CLOCK_H_
