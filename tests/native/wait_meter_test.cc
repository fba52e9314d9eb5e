// WaitMeter (cpu/thread_slot.h): off-CPU time between observations of a thread.
#include <gtest/gtest.h>

#include "cpu/thread_slot.h"

namespace peakline::cpu {
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

// RunDelayMeter (cpu/thread_slot.h): the kernel's run delay taken out of the off-CPU
// charges since the last reading, in proportion, never more than was charged.
TEST(RunDelayMeterTest, RunDelayIsSplitOverTheChargesInProportion) {
  RunDelayMeter m;
  m.Reset(100 * kMs);
  m.Add(/*stack=*/1, 30 * kMs, true);
  m.Add(/*stack=*/2, 10 * kMs, true);
  m.Add(/*stack=*/2, 10 * kMs, true);  // merged with the previous charge of the same stack
  ASSERT_EQ(m.pending.size(), 2u);
  int64_t moved[3] = {0, 0, 0};
  // 25 ms of run delay over 50 ms charged: half of each charge.
  EXPECT_EQ(m.Split(125 * kMs, [&](uint32_t stack, int64_t ns) { moved[stack] += ns; }), 25 * kMs);
  EXPECT_EQ(moved[1], 15 * kMs);
  EXPECT_EQ(moved[2], 10 * kMs);
  EXPECT_TRUE(m.pending.empty());
  EXPECT_EQ(m.last_run_delay_ns, 125 * kMs);
}

TEST(RunDelayMeterTest, NeverMovesMoreThanWasCharged) {
  RunDelayMeter m;
  m.Reset(0);
  m.Add(7, 4 * kMs, true);
  int64_t moved = 0;
  EXPECT_EQ(m.Split(9 * kMs, [&](uint32_t, int64_t ns) { moved += ns; }), 4 * kMs);
  EXPECT_EQ(moved, 4 * kMs);
  // A sleeping thread: off-CPU charged, no new run delay: nothing moves.
  m.Add(7, 20 * kMs, false);
  EXPECT_EQ(m.Split(9 * kMs, [&](uint32_t, int64_t) { FAIL(); }), 0);
}

TEST(RunDelayMeterTest, AnUnreadableCounterMovesNothingAndKeepsTheLastReading) {
  RunDelayMeter m;
  m.Reset(-1);  // unknown at registration
  m.Add(1, 10 * kMs, false);
  EXPECT_EQ(m.Split(50 * kMs, [&](uint32_t, int64_t) { FAIL(); }), 0);  // no baseline yet
  EXPECT_EQ(m.last_run_delay_ns, 50 * kMs);
  m.Add(1, 10 * kMs, false);
  EXPECT_EQ(m.Split(-1, [&](uint32_t, int64_t) { FAIL(); }), 0);  // thread gone
  EXPECT_EQ(m.last_run_delay_ns, 50 * kMs);
  EXPECT_TRUE(m.pending.empty());
}

TEST(RunDelayMeterTest, ABlockedThreadIsReadEveryTenthTickUntilItRunsAgain) {
  RunDelayMeter m;
  m.Reset(0);
  m.Add(1, 20 * kMs, /*from_sample=*/false);  // asleep at the tick
  ASSERT_TRUE(m.DueForReading(false));
  EXPECT_EQ(m.Split(0, [](uint32_t, int64_t) {}), 0);  // no run delay: blocked
  int skipped = 0;
  for (;;) {
    m.Add(1, 20 * kMs, false);
    if (m.DueForReading(false)) break;
    ++skipped;
  }
  EXPECT_EQ(skipped, RunDelayMeter::kIdleReadingTicks - 1);
  EXPECT_EQ(m.Split(0, [](uint32_t, int64_t) {}), 0);
  // It ran (a sample charged it): read at the next tick, and forced readings always are.
  m.Add(2, 1 * kMs, /*from_sample=*/true);
  EXPECT_TRUE(m.DueForReading(false));
  EXPECT_EQ(m.Split(1 * kMs, [](uint32_t, int64_t) {}), 1 * kMs);
  m.Add(1, 20 * kMs, false);
  EXPECT_TRUE(m.DueForReading(false));  // the last reading moved something: every tick
  EXPECT_FALSE(RunDelayMeter().DueForReading(true));  // nothing charged: nothing to read
}

}  // namespace
}  // namespace peakline::cpu
