// TimeBuckets: CPU per interval and the main thread's line, bounded by coarsening.
#include "aggregate/time_buckets.h"

#include <gtest/gtest.h>

namespace peakline::aggregate {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(TimeBucketsTest, CpuAndMainLineLandInTheirIntervals) {
  TimeBuckets b(1000 * kMs, 20 * kMs);
  b.AddCpu(1005 * kMs, 7 * kMs);
  b.AddCpu(1045 * kMs, 3 * kMs);
  b.AddCpu(999 * kMs, 100 * kMs);  // before the start: ignored
  b.NoteMainFrame(1010 * kMs, 5);
  b.NoteMainFrame(1050 * kMs, 9);
  const auto used = b.Used();
  ASSERT_EQ(used.size(), 3u);
  EXPECT_EQ(used[0].cpu_ns, 7 * kMs);
  EXPECT_EQ(used[0].frame, 5u);
  EXPECT_EQ(used[1].cpu_ns, 0);
  EXPECT_EQ(used[1].votes, 0);
  EXPECT_EQ(used[2].cpu_ns, 3 * kMs);
  EXPECT_EQ(used[2].frame, 9u);
}

TEST(TimeBucketsTest, RunningPastTheEndDoublesTheWidthAndKeepsTotalsAndTheMajorityLine) {
  TimeBuckets b(0, 10);
  int64_t total = 0;
  for (int64_t t = 0; t < 10 * TimeBuckets::kBuckets * 3; t += 5) {
    b.AddCpu(t, 2);
    total += 2;
    b.NoteMainFrame(t, t % 20 == 0 ? 1 : 2);  // frame 2 has 3 of every 4 ticks
  }
  EXPECT_EQ(b.width_ns(), 40);  // 3x past the end: doubled twice
  int64_t sum = 0;
  for (const auto& bucket : b.Used()) {
    sum += bucket.cpu_ns;
    EXPECT_EQ(bucket.frame, 2u);  // per 40 ns: 2 ticks on frame 1, 6 on frame 2
  }
  EXPECT_EQ(sum, total);
  EXPECT_LE(b.Used().size(), static_cast<size_t>(TimeBuckets::kBuckets));
}

}  // namespace
}  // namespace peakline::aggregate
