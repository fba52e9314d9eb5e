// Burning a known amount of CPU on the calling thread, by its own CPU clock: the tests of the
// per-thread CPU machinery (thread_cpu_timer_test.cc, thread_exit_tail_test.cc).
#ifndef PEAKLINE_TESTS_NATIVE_CPU_BURN_H_
#define PEAKLINE_TESTS_NATIVE_CPU_BURN_H_

#include <time.h>

#include <cstdint>

#include "cpu/clock.h"

namespace peakline::testing_support {

// The calling thread's CPU time, in ns.
inline int64_t OwnCpuNs() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return cpu::TimespecNs(ts);
}

// Burns CPU on the calling thread until its own CPU clock advanced by ns.
inline void BurnCpuNs(int64_t ns) {
  const int64_t end = OwnCpuNs() + ns;
  volatile uint64_t sink = 0;
  while (OwnCpuNs() < end) {
    for (int i = 0; i < 2000; ++i) sink = sink * 6364136223846793005ULL + 1;
  }
}

}  // namespace peakline::testing_support

#endif  // PEAKLINE_TESTS_NATIVE_CPU_BURN_H_
