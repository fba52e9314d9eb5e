// EventStager and the ring's doorbell: a consumer that cannot drain (its thread holds the GIL
// in a long C call) loses nothing while the stager runs; records come out exactly once, intact
// and in per-producer order, whether the consumer drains late or concurrently; an oversize
// record reaches the consumer as invalid; the doorbell rings at the watermark and only then.
// Deterministic in what it asserts: every assertion holds for any interleaving.
#include "transport/event_stager.h"

#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/mpsc_ring.h"

namespace peakline::transport {
namespace {

struct Record {
  uint32_t producer;
  uint32_t seq;
  uint8_t filler[104];  // 112 bytes: about the size of a memory event with 4 frames
};

// Writes n records, retrying a full ring after a short pause (a producer that outruns both the
// stager and the consumer would drop; that is the ring's own, separately tested behaviour).
void Produce(MpscRing* ring, uint32_t producer, uint32_t n, std::atomic<uint64_t>* retries) {
  Record r{};
  r.producer = producer;
  for (uint32_t i = 0; i < n; ++i) {
    r.seq = i;
    std::memset(r.filler, static_cast<int>((producer * 31 + i) & 0xff), sizeof(r.filler));
    while (!ring->TryWrite(&r, sizeof(r), nullptr, 0)) {
      retries->fetch_add(1);
      struct timespec pause = {0, 20'000};
      nanosleep(&pause, nullptr);
    }
  }
}

// n producer threads writing `each` records apiece; returns when all are done.
void RunProducers(MpscRing* ring, int n, uint32_t each, std::atomic<uint64_t>* retries) {
  std::vector<std::thread> producers;
  for (int p = 0; p < n; ++p) producers.emplace_back(Produce, ring, p, each, retries);
  for (auto& t : producers) t.join();
}

class Checker {
 public:
  explicit Checker(int producers) : next_(producers, 0) {}
  void operator()(const uint8_t* p, size_t n) {
    ASSERT_EQ(n, sizeof(Record));
    Record r;
    std::memcpy(&r, p, sizeof(r));
    ASSERT_LT(r.producer, next_.size());
    ASSERT_EQ(r.seq, next_[r.producer]) << "producer " << r.producer << " out of order";
    ++next_[r.producer];
    for (uint8_t b : r.filler) ASSERT_EQ(b, static_cast<uint8_t>((r.producer * 31 + r.seq) & 0xff));
    ++total_;
  }
  uint64_t total() const { return total_; }
  const std::vector<uint32_t>& next() const { return next_; }

 private:
  std::vector<uint32_t> next_;
  uint64_t total_ = 0;
};

TEST(EventStagerTest, ConsumerThatNeverDrainsLosesNothingWhileTheStagerRuns) {
  // 64 KiB ring, 4 producers x 20,000 records of 120 bytes each = 9.6 MB: 146 ring-fulls
  // written while the consumer is "in a C call holding the GIL", i.e. not draining at all.
  // Without a consumer the thread fills one staging buffer (the consumer swaps them).
  MpscRing ring(64 * 1024);
  EventStager stager(sizeof(Record), 16u << 20);
  stager.Start(&ring, nullptr);
  constexpr int kProducers = 4;
  constexpr uint32_t kEach = 20'000;
  std::atomic<uint64_t> retries{0};
  RunProducers(&ring, kProducers, kEach, &retries);
  stager.Stop();
  Checker check(kProducers);
  stager.Drain(&ring, std::ref(check));
  EXPECT_EQ(check.total(), uint64_t{kProducers} * kEach);
  for (uint32_t n : check.next()) EXPECT_EQ(n, kEach);
  EXPECT_EQ(ring.dropped(), retries.load());  // every full-ring moment was retried, none lost
  EXPECT_GT(stager.staged_records(), 0u);
  EXPECT_GT(stager.stage_passes(), 0u);
}

TEST(EventStagerTest, ConcurrentConsumerSeesEveryRecordOnceInOrder) {
  MpscRing ring(16 * 1024);
  EventStager stager(sizeof(Record), 1u << 20);
  stager.Start(&ring, nullptr);
  constexpr int kProducers = 3;
  constexpr uint32_t kEach = 30'000;
  std::atomic<uint64_t> retries{0};
  std::atomic<bool> done{false};
  Checker check(kProducers);
  std::thread consumer([&] {
    while (!done.load()) {
      stager.Drain(&ring, std::ref(check));
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  RunProducers(&ring, kProducers, kEach, &retries);
  done.store(true);
  consumer.join();
  stager.Stop();
  stager.Drain(&ring, std::ref(check));  // whatever the last pass left
  EXPECT_EQ(check.total(), uint64_t{kProducers} * kEach);
  for (uint32_t n : check.next()) EXPECT_EQ(n, kEach);
}

TEST(EventStagerTest, FullStagingBuffersLeaveTheRestInTheRing) {
  // Two 4 KiB buffers hold 32 records of 120 bytes each; the 64 KiB ring holds the rest.
  MpscRing ring(64 * 1024);
  EventStager stager(sizeof(Record), 4096);
  stager.Start(&ring, nullptr);
  std::atomic<uint64_t> retries{0};
  Produce(&ring, 0, 300, &retries);  // 36 KB: fits in buffer + ring without the consumer
  // Give the thread time to stage whatever it will (it stops when its buffer is full).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stager.Stop();
  EXPECT_EQ(retries.load(), 0u);
  Checker check(1);
  stager.Drain(&ring, std::ref(check));
  EXPECT_EQ(check.total(), 300u);
  EXPECT_EQ(ring.dropped(), 0u);
}

TEST(EventStagerTest, OversizeRecordReachesTheConsumerAsInvalidInItsPlace) {
  MpscRing ring(64 * 1024);
  EventStager stager(/*max_record=*/16, 1u << 20);
  const char small[8] = "abcdefg";
  const char big[40] = "this record is longer than max_record";
  ASSERT_TRUE(ring.TryWrite(small, 8, nullptr, 0));
  ASSERT_TRUE(ring.TryWrite(big, 40, nullptr, 0));
  ASSERT_TRUE(ring.TryWrite(small, 8, nullptr, 0));
  std::vector<size_t> lengths;
  stager.Drain(&ring, [&](const uint8_t* p, size_t n) {
    lengths.push_back(n);
    if (n == 8) {
      EXPECT_EQ(std::memcmp(p, small, 8), 0);
    }
  });
  EXPECT_EQ(lengths, (std::vector<size_t>{8, SIZE_MAX, 8}));
  lengths.clear();
  stager.Drain(&ring, [&](const uint8_t*, size_t n) { lengths.push_back(n); });
  EXPECT_TRUE(lengths.empty());
}

TEST(MpscRingDoorbellTest, RingsOnlyAboveTheWatermark) {
  MpscRing ring(4096);
  ring.SetDoorbellWatermark(1024);
  // Nothing queued: the wait times out and reports no ring.
  EXPECT_FALSE(ring.WaitDoorbell(1'000'000));
  char rec[120] = {};
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(ring.TryWrite(rec, sizeof(rec), nullptr, 0));  // 896 B
  EXPECT_FALSE(ring.WaitDoorbell(1'000'000));
  ASSERT_TRUE(ring.TryWrite(rec, sizeof(rec), nullptr, 0));
  ASSERT_TRUE(ring.TryWrite(rec, sizeof(rec), nullptr, 0));  // 1152 B > 1024
  EXPECT_TRUE(ring.WaitDoorbell(1'000'000));
  EXPECT_FALSE(ring.WaitDoorbell(1'000'000));  // re-armed: rung once, consumed once
}

TEST(MpscRingDoorbellTest, WakesABlockedWaiter) {
  MpscRing ring(4096);
  ring.SetDoorbellWatermark(0);
  std::atomic<bool> woke{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread waiter([&] { woke.store(ring.WaitDoorbell(10'000'000'000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  char rec[8] = {};
  ASSERT_TRUE(ring.TryWrite(rec, sizeof(rec), nullptr, 0));
  waiter.join();
  EXPECT_TRUE(woke.load());
  // Woken by the write, not by the 10 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace peakline::transport
