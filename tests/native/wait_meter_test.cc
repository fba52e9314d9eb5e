// WaitMeter (engine/thread_slot.h): off-CPU time between observations of a thread.
#include <gtest/gtest.h>

#include "engine/thread_slot.h"

namespace peakline::engine {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(WaitMeterTest, OffCpuTimeIsWallMinusCpuBetweenObservations) {
  WaitMeter m;
  m.Reset(100 * kMs, 10 * kMs);
  // 20 ms of wall, 8 ms of CPU: it waited 12 ms (for a CPU, the GIL) before this sample.
  EXPECT_EQ(m.Observe(120 * kMs, 18 * kMs), 12 * kMs);
  // Ran the whole time: no wait.
  EXPECT_EQ(m.Observe(130 * kMs, 28 * kMs), 0);
  // Blocked 50 ms (a tick finds it asleep).
  EXPECT_EQ(m.Observe(180 * kMs, 28 * kMs), 50 * kMs);
}

TEST(WaitMeterTest, EachIntervalIsChargedOnce) {
  // Samples and ticks interleave: the sum of what is charged is the thread's whole off-CPU
  // time, however the observations split it.
  WaitMeter m;
  m.Reset(0, 0);
  int64_t total = 0;
  const int64_t obs[][2] = {{5, 2}, {9, 4}, {20, 4}, {21, 5}, {40, 15}};
  for (const auto& o : obs) total += m.Observe(o[0] * kMs, o[1] * kMs);
  EXPECT_EQ(total, (40 - 15) * kMs);
}

TEST(WaitMeterTest, AnObservationNotLaterThanTheLastIsIgnored) {
  // A sample taken while the tick measured, drained at the next tick.
  WaitMeter m;
  m.Reset(0, 0);
  EXPECT_EQ(m.Observe(50 * kMs, 10 * kMs), 40 * kMs);
  EXPECT_EQ(m.Observe(45 * kMs, 9 * kMs), -1);
  EXPECT_EQ(m.Observe(50 * kMs, 10 * kMs), -1);
  EXPECT_EQ(m.last_wall_ns, 50 * kMs);
  EXPECT_EQ(m.Observe(60 * kMs, 15 * kMs), 5 * kMs);
}

TEST(WaitMeterTest, CpuAheadOfWallIsNoWait) {
  // Clock granularity (the CPU clock read a little after the wall clock): never negative.
  WaitMeter m;
  m.Reset(0, 0);
  EXPECT_EQ(m.Observe(10 * kMs, 10 * kMs + 3), 0);
}

}  // namespace
}  // namespace peakline::engine
