// MainStackCache (python/main_stack_cache.h): when the main thread's stack is read again and
// when a reading is reused.
#include "python/main_stack_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace peakline::python {

using transport::RawFrame;

namespace {

constexpr int64_t kMs = 1'000'000;

struct FakeMain {
  std::atomic<int> reads{0};
  std::atomic<int64_t> cpu{0};
  std::atomic<int> depth{3};
  std::atomic<uintptr_t> generation{1};
};

int FakeRead(void* ctx, RawFrame* out, int max) {
  auto* m = static_cast<FakeMain*>(ctx);
  m->reads.fetch_add(1);
  const uintptr_t g = m->generation.load();
  const int n = m->depth.load() < max ? m->depth.load() : max;
  for (int i = 0; i < n; ++i) out[i] = RawFrame{reinterpret_cast<const void*>(g), i, 1};
  return n;
}

int64_t FakeCpu(void* ctx) { return static_cast<FakeMain*>(ctx)->cpu.load(); }

TEST(MainStackCacheTest, AStackIsReadAgainOnlyWhenTheMainThreadRan) {
  FakeMain main;
  MainStackCache cache;
  cache.Reset(FakeRead, FakeCpu, &main);
  RawFrame out[64];
  EXPECT_EQ(cache.Get(100 * kMs, out, 64), 3);
  EXPECT_EQ(main.reads.load(), 1);
  // Blocked (its CPU clock does not move): the reading stays valid however long.
  EXPECT_EQ(cache.Get(100 * kMs + MainStackCache::kTrustNs / 2, out, 64), 3);
  EXPECT_EQ(cache.Get(2000 * kMs, out, 64), 3);
  EXPECT_EQ(main.reads.load(), 1);
  // It ran: read again once the reading is older than kRefreshNs, not before.
  main.cpu.store(5 * kMs);
  main.generation.store(2);
  main.depth.store(5);
  EXPECT_EQ(cache.Get(2000 * kMs + 1, out, 64), 5);  // taken at 100 ms: older than kRefreshNs
  EXPECT_EQ(main.reads.load(), 2);
  EXPECT_EQ(out[0].code, reinterpret_cast<const void*>(uintptr_t{2}));
  main.cpu.store(6 * kMs);
  main.generation.store(3);
  EXPECT_EQ(cache.Get(2000 * kMs + 1 + MainStackCache::kRefreshNs / 2, out, 64), 5);
  EXPECT_EQ(out[0].code, reinterpret_cast<const void*>(uintptr_t{2}));  // at most 5 ms stale
  EXPECT_EQ(main.reads.load(), 2);
  EXPECT_EQ(cache.Get(2000 * kMs + 1 + MainStackCache::kRefreshNs, out, 64), 5);
  EXPECT_EQ(out[0].code, reinterpret_cast<const void*>(uintptr_t{3}));
  EXPECT_EQ(main.reads.load(), 3);
  EXPECT_EQ(cache.readings(), 3u);
}

TEST(MainStackCacheTest, AnInvalidatedReadingIsNeverHandedOutAgain) {
  // A code object about to be freed may be named in the cached reading: after Invalidate the
  // stack is read afresh even though the main thread did not run and the reading is young.
  FakeMain main;
  MainStackCache cache;
  cache.Reset(FakeRead, FakeCpu, &main);
  RawFrame out[64];
  EXPECT_EQ(cache.Get(100 * kMs, out, 64), 3);
  main.generation.store(2);
  cache.Invalidate();
  EXPECT_EQ(cache.Get(100 * kMs + 1, out, 64), 3);
  EXPECT_EQ(out[0].code, reinterpret_cast<const void*>(uintptr_t{2}));
  EXPECT_EQ(main.reads.load(), 2);
  EXPECT_EQ(cache.Get(100 * kMs + 2, out, 64), 3);  // the fresh reading is reused again
  EXPECT_EQ(main.reads.load(), 2);
}

TEST(MainStackCacheTest, ReturnsAtMostRoomAndKFrames) {
  FakeMain main;
  main.depth.store(100);
  MainStackCache cache;
  cache.Reset(FakeRead, FakeCpu, &main);
  RawFrame out[64];
  EXPECT_EQ(cache.Get(kMs, out, 64), MainStackCache::kFrames);
  EXPECT_EQ(cache.Get(kMs, out, 4), 4);
  EXPECT_EQ(cache.Get(kMs, out, 0), 0);
}

TEST(MainStackCacheTest, ConcurrentReadersNeverSeeATornReading) {
  // Writers refresh while readers copy: every result holds frames of one reading only.
  FakeMain main;
  main.depth.store(MainStackCache::kFrames);
  MainStackCache cache;
  cache.Reset(FakeRead, FakeCpu, &main);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> clock{1};
  std::atomic<long> torn{0}, results{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      RawFrame out[MainStackCache::kFrames];
      while (!stop.load()) {
        const int n = cache.Get(clock.fetch_add(MainStackCache::kRefreshNs), out,
                                MainStackCache::kFrames);
        for (int i = 1; i < n; ++i) {
          if (out[i].code != out[0].code) {
            torn.fetch_add(1);
            break;
          }
        }
        results.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 20000; ++i) {
    main.generation.fetch_add(1);
    main.cpu.fetch_add(1);
  }
  // On a busy machine the readers may not have run yet: let them read for a while (5 s at
  // most) while the main thread keeps moving.
  for (int i = 0; results.load() <= 100 && i < 5000; ++i) {
    main.generation.fetch_add(1);
    main.cpu.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_GT(results.load(), 100);
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace peakline::python
