// HeapCounters: the exact live bytes and high-water mark, and the window extremes the
// timeline reads. Nothing here is stochastic: random deltas come from fixed seeds, and every
// assertion holds for any seed.
//
// What is exact under concurrency. Each Flush is one fetch_add on `live`, so the values the
// flushes report (*live_out) are exactly the successive values of `live` in its modification
// order: the running sums of the deltas in the order the fetch_adds took effect. Hence, after
// all threads are done: live == the sum of all deltas; peak == max(0, every reported value);
// window_max / window_min (never read meanwhile) == max(0, ...) / min(0, ...) of them; and the
// reported values chain up: {value before each flush} + {final} == {reported values} + {0}
// as multisets. kPeak announcements (Flush returning true) are made by a CAS on
// last_marked_peak, so the announced values are strictly increasing by at least the
// hysteresis step (1 MiB, or 1% above 100 MiB) and each was a new peak when it was reported.
#include "memory/heap_counters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "cpu/clock.h"

namespace peakline::memory {
namespace {

using cpu::MonotonicNowNs;

constexpr int64_t kMiB = 1 << 20;

// The hysteresis step above the last announced peak.
int64_t Step(int64_t marked) { return std::max<int64_t>(marked / 100, kMiB); }

// Upper bound on the number of announcements while live grows monotonically to `peak`: one
// per MiB up to 100 MiB, then one per 1% (the brief's "log(peak)/log(1.01) + peak/1 MiB" is
// looser).
double MaxPeakEvents(int64_t peak) {
  double n = 1 + std::min<double>(100, static_cast<double>(peak) / kMiB);
  if (peak > 100 * kMiB) n += std::log(static_cast<double>(peak) / (100.0 * kMiB)) / std::log(1.01);
  return n;
}

// A single-threaded reference model of Flush.
struct Model {
  int64_t live = 0, peak = 0, wmax = 0, wmin = 0, marked = 0;
  bool Flush(int64_t delta) {
    live += delta;
    wmax = std::max(wmax, live);
    wmin = std::min(wmin, live);
    if (live <= peak) return false;
    peak = live;
    if (live < marked + Step(marked)) return false;
    marked = live;
    return true;
  }
};

TEST(HeapCountersTest, StartsAtZeroAndResetClearsEverything) {
  HeapCounters h;
  int64_t live = -1, now = -1;
  EXPECT_TRUE(h.Flush(5 * kMiB, &live, &now));
  EXPECT_FALSE(h.Flush(-7 * kMiB, &live, &now));
  EXPECT_EQ(h.live.load(), -2 * kMiB);
  h.Reset();
  for (auto* a : {&h.live, &h.peak, &h.peak_time_ns, &h.window_max, &h.window_max_time_ns,
                  &h.window_min, &h.window_min_time_ns, &h.last_marked_peak}) {
    EXPECT_EQ(a->load(), 0);
  }
  // After a reset the first MiB is announced again.
  EXPECT_FALSE(h.Flush(kMiB - 1, &live, &now));
  EXPECT_TRUE(h.Flush(1, &live, &now));
  EXPECT_EQ(live, kMiB);
}

// Random deltas of both signs on one thread: every counter equals the reference model after
// every flush, and a flush returns true exactly when the model says it must.
TEST(HeapCountersTest, SingleThreadIsExact) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    // Mostly small steps with a drift that changes sign; now and then a large block.
    HeapCounters h;
    Model m;
    for (int i = 0; i < 200000; ++i) {
      const bool up_phase = (i / 20000) % 2 == 0;
      int64_t delta = static_cast<int64_t>(rng() % (256 * 1024)) - (up_phase ? 96 * 1024 : 160 * 1024);
      if (rng() % 1000 == 0) delta = static_cast<int64_t>(rng() % (64 * kMiB)) * (up_phase ? 1 : -1);
      const int64_t t_before = MonotonicNowNs();
      const int64_t peak_before = m.peak;
      int64_t live = 0, now = -1;
      const bool event = h.Flush(delta, &live, &now);
      const bool expected_event = m.Flush(delta);
      ASSERT_EQ(event, expected_event) << "flush " << i << " live " << m.live;
      ASSERT_EQ(live, m.live);
      ASSERT_EQ(h.live.load(), m.live);
      ASSERT_EQ(h.peak.load(), m.peak);
      ASSERT_EQ(h.window_max.load(), m.wmax);
      ASSERT_EQ(h.window_min.load(), m.wmin);
      ASSERT_EQ(h.last_marked_peak.load(), m.marked);
      if (m.peak > peak_before) {
        // A new peak carries the time of this flush.
        ASSERT_GE(now, t_before);
        ASSERT_LE(now, MonotonicNowNs());
        ASSERT_EQ(h.peak_time_ns.load(), now);
      }
    }
  }
}

// Monotonic growth to 4 GiB in uneven steps: announcements are rate-limited, each one is at
// least a hysteresis step above the previous, and none is skipped that the step allowed.
TEST(HeapCountersTest, PeakEventsAreRateLimitedForMonotonicGrowth) {
  std::mt19937_64 rng(7);
  HeapCounters h;
  int64_t marked = 0;
  int events = 0;
  int64_t live = 0, now = 0;
  std::uniform_real_distribution<double> log_step(0, std::log(256.0 * 1024));
  while (h.live.load() < (INT64_C(4) << 30)) {
    // Steps from 1 byte to 256 KiB, log-uniform (the hooks flush every 64 KiB or so).
    const int64_t delta = std::max<int64_t>(1, static_cast<int64_t>(std::exp(log_step(rng))));
    const bool event = h.Flush(delta, &live, &now);
    ASSERT_EQ(event, live >= marked + Step(marked)) << "live " << live << " marked " << marked;
    if (event) {
      ++events;
      marked = live;
    }
  }
  const int64_t peak = h.peak.load();
  EXPECT_EQ(peak, h.live.load());
  EXPECT_LE(events, MaxPeakEvents(peak));
  EXPECT_LE(events, std::log(static_cast<double>(peak)) / std::log(1.01) + peak / kMiB);
  // The bound is nearly reached with steps much smaller than 1%: not so loose as to be vacuous.
  EXPECT_GE(events, 0.8 * MaxPeakEvents(peak));

  // One huge flush is one announcement.
  HeapCounters big;
  EXPECT_TRUE(big.Flush(INT64_C(100) << 30, &live, &now));
  EXPECT_EQ(big.peak.load(), INT64_C(100) << 30);
}

// Going up and down below the high-water mark never announces anything.
TEST(HeapCountersTest, NoPeakEventsBelowTheHighWaterMark) {
  HeapCounters h;
  int64_t live = 0, now = 0;
  ASSERT_TRUE(h.Flush(500 * kMiB, &live, &now));
  ASSERT_FALSE(h.Flush(-400 * kMiB, &live, &now));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(h.Flush(399 * kMiB, &live, &now));
    ASSERT_FALSE(h.Flush(-399 * kMiB, &live, &now));
  }
  EXPECT_EQ(h.peak.load(), 500 * kMiB);
  // Just above the peak but within 1%: a new exact peak, no announcement.
  ASSERT_FALSE(h.Flush(400 * kMiB + 5 * kMiB - 1, &live, &now));
  EXPECT_EQ(h.peak.load(), 505 * kMiB - 1);
  EXPECT_EQ(h.last_marked_peak.load(), 500 * kMiB);
  ASSERT_TRUE(h.Flush(1, &live, &now));
  EXPECT_EQ(h.last_marked_peak.load(), 505 * kMiB);
}

struct FlushRecord {
  int64_t delta;
  int64_t live;  // *live_out
  bool event;
};

// N threads flush random deltas at once (rising, then falling, so that the peak moves while
// all of them run). Exact assertions: see the file comment.
TEST(HeapCountersTest, ConcurrentFlushesAreExact) {
  constexpr int kThreads = 8;
  constexpr int kFlushes = 20000;
  HeapCounters h;
  std::vector<std::vector<FlushRecord>> records(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<FlushRecord>& out = records[t];
      out.reserve(kFlushes);
      ready.fetch_add(1);
      while (ready.load() < kThreads) {}
      for (int i = 0; i < kFlushes; ++i) {
        const int64_t bias = i < kFlushes / 2 ? 40 * 1024 : -40 * 1024;
        const int64_t delta = static_cast<int64_t>(rng() % (256 * 1024)) - 128 * 1024 + bias;
        int64_t live = 0, now = 0;
        const bool event = h.Flush(delta, &live, &now);
        out.push_back({delta, live, event});
      }
    });
  }
  for (auto& th : threads) th.join();

  int64_t sum = 0, max_seen = 0, min_seen = 0;
  std::map<int64_t, int64_t> balance;  // +1 per "after" value, -1 per "before" value
  std::vector<int64_t> announced;
  for (const auto& out : records) {
    for (const FlushRecord& r : out) {
      sum += r.delta;
      max_seen = std::max(max_seen, r.live);
      min_seen = std::min(min_seen, r.live);
      ++balance[r.live];
      --balance[r.live - r.delta];
      if (r.event) announced.push_back(r.live);
    }
  }
  EXPECT_EQ(h.live.load(), sum);
  EXPECT_EQ(h.peak.load(), max_seen);
  EXPECT_EQ(h.window_max.load(), max_seen);
  EXPECT_EQ(h.window_min.load(), min_seen);
  // The reported values are the running sums of one order of the deltas.
  ++balance[0];
  --balance[sum];
  for (const auto& [value, count] : balance) ASSERT_EQ(count, 0) << "value " << value;
  // Announcements: a chain of hysteresis steps, the last one is last_marked_peak.
  ASSERT_FALSE(announced.empty());
  std::sort(announced.begin(), announced.end());
  int64_t marked = 0;
  for (int64_t v : announced) {
    ASSERT_GE(v, marked + Step(marked));
    marked = v;
  }
  EXPECT_EQ(h.last_marked_peak.load(), marked);
  EXPECT_LE(marked, max_seen);
  EXPECT_LE(static_cast<double>(announced.size()), MaxPeakEvents(max_seen));
  // The workload did move the peak: each thread alone rises by ~10000 x 40 KiB.
  EXPECT_GT(max_seen, 200 * kMiB);
}

// A spike and a dip between two reads of the window are both seen by the second read (the
// aggregator's read: exchange with the current live value, aggregate/memory_aggregator.cc).
TEST(HeapCountersTest, WindowCapturesSpikeAndDipBetweenReads) {
  HeapCounters h;
  int64_t live = 0, now = 0;
  h.Flush(100 * kMiB, &live, &now);
  auto read = [&h](int64_t* max_v, int64_t* max_t, int64_t* min_v, int64_t* min_t) {
    const int64_t cur = h.live.load();
    *max_v = h.window_max.exchange(cur);
    *max_t = h.window_max_time_ns.load();
    *min_v = h.window_min.exchange(cur);
    *min_t = h.window_min_time_ns.load();
  };
  int64_t max_v, max_t, min_v, min_t;
  read(&max_v, &max_t, &min_v, &min_t);
  EXPECT_EQ(max_v, 100 * kMiB);

  const int64_t t0 = MonotonicNowNs();
  h.Flush(300 * kMiB, &live, &now);   // spike to 400 MiB
  const int64_t spike_t = now;
  h.Flush(-300 * kMiB, &live, &now);  // back to 100
  h.Flush(-90 * kMiB, &live, &now);   // dip to 10
  const int64_t dip_t = now;
  h.Flush(90 * kMiB, &live, &now);    // back to 100
  const int64_t t1 = MonotonicNowNs();
  read(&max_v, &max_t, &min_v, &min_t);
  EXPECT_EQ(max_v, 400 * kMiB);
  EXPECT_EQ(min_v, 10 * kMiB);
  EXPECT_EQ(max_t, spike_t);
  EXPECT_EQ(min_t, dip_t);
  EXPECT_LE(t0, max_t);
  EXPECT_LT(max_t, min_t);  // order of the two extremes is recoverable
  EXPECT_LE(min_t, t1);

  // Nothing happened since: the next read sees just the current value.
  read(&max_v, &max_t, &min_v, &min_t);
  EXPECT_EQ(max_v, 100 * kMiB);
  EXPECT_EQ(min_v, 100 * kMiB);
}

// Spikes from several threads while a reader keeps resetting the window: the largest value
// any read (or the final state) returns is exactly the largest value live ever had, and the
// smallest likewise: no spike is lost to a concurrent reset.
TEST(HeapCountersTest, ConcurrentReadsNeverLoseTheExtremes) {
  constexpr int kThreads = 4;
  constexpr int kFlushes = 20000;
  HeapCounters h;
  std::atomic<bool> stop{false};
  std::vector<std::vector<int64_t>> seen(kThreads);
  int64_t read_max = 0, read_min = 0;
  std::thread reader([&] {
    while (!stop.load()) {
      const int64_t cur = h.live.load();
      read_max = std::max(read_max, h.window_max.exchange(cur));
      read_min = std::min(read_min, h.window_min.exchange(cur));
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(77 + t);
      for (int i = 0; i < kFlushes; ++i) {
        // Short spikes: up by a random amount, then straight back down.
        const int64_t d = static_cast<int64_t>(rng() % (64 * kMiB)) - 32 * kMiB;
        int64_t live = 0, now = 0;
        h.Flush(d, &live, &now);
        seen[t].push_back(live);
        h.Flush(-d, &live, &now);
        seen[t].push_back(live);
      }
    });
  }
  for (auto& w : writers) w.join();
  stop.store(true);
  reader.join();
  read_max = std::max(read_max, h.window_max.load());
  read_min = std::min(read_min, h.window_min.load());
  int64_t true_max = 0, true_min = 0;
  for (const auto& v : seen) {
    for (int64_t x : v) {
      true_max = std::max(true_max, x);
      true_min = std::min(true_min, x);
    }
  }
  EXPECT_EQ(h.live.load(), 0);
  EXPECT_EQ(read_max, true_max);
  EXPECT_EQ(read_min, true_min);
  EXPECT_EQ(h.peak.load(), true_max);
}

}  // namespace
}  // namespace peakline::memory
