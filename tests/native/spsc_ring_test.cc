// SpscRing: framing, wrap-around, full-ring rejection, oversize skipping, and a two-thread
// producer/consumer stress run (the real deployment: signal handler -> tick thread).
#include "transport/spsc_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace peakline::transport {
namespace {

constexpr size_t kHdr = sizeof(uint32_t);  // the ring's per-record length prefix

bool WriteString(SpscRing& ring, const std::string& a, const std::string& b = "") {
  return ring.TryWrite(a.data(), static_cast<uint32_t>(a.size()), b.data(),
                       static_cast<uint32_t>(b.size()));
}

// Reads one record as a string; "<empty>" / "<skipped>" for the two special results.
std::string ReadString(SpscRing& ring, size_t cap = 4096) {
  std::vector<char> buf(cap + 1, '#');
  const size_t n = ring.Read(buf.data(), cap);
  if (n == 0) return "<empty>";
  if (n == SIZE_MAX) return "<skipped>";
  EXPECT_LE(n, cap);
  EXPECT_EQ(buf[cap], '#') << "Read wrote past out_cap";
  return std::string(buf.data(), n);
}

TEST(SpscRingTest, EmptyRingReadsNothing) {
  SpscRing ring(64);
  EXPECT_TRUE(ring.Empty());
  EXPECT_EQ(ring.capacity(), 64u);
  char buf[16];
  EXPECT_EQ(ring.Read(buf, sizeof(buf)), 0u);
}

TEST(SpscRingTest, RoundTripJoinsBothPartsInOrder) {
  SpscRing ring(256);
  ASSERT_TRUE(WriteString(ring, "head-", "body"));
  ASSERT_TRUE(WriteString(ring, "second"));         // empty part 2
  ASSERT_TRUE(ring.TryWrite(nullptr, 0, "xy", 2));  // empty part 1
  EXPECT_FALSE(ring.Empty());
  EXPECT_EQ(ReadString(ring), "head-body");
  EXPECT_EQ(ReadString(ring), "second");
  EXPECT_EQ(ReadString(ring), "xy");
  EXPECT_EQ(ReadString(ring), "<empty>");
  EXPECT_TRUE(ring.Empty());
}

TEST(SpscRingTest, BinaryRecordsWithZeroBytesSurvive) {
  SpscRing ring(128);
  const uint8_t a[5] = {0, 1, 0, 255, 0};
  const uint64_t b = 0x0102030405060708ULL;
  ASSERT_TRUE(ring.TryWrite(a, sizeof(a), &b, sizeof(b)));
  uint8_t out[sizeof(a) + sizeof(b)] = {};
  ASSERT_EQ(ring.Read(out, sizeof(out)), sizeof(out));
  EXPECT_EQ(std::memcmp(out, a, sizeof(a)), 0);
  uint64_t b2;
  std::memcpy(&b2, out + sizeof(a), sizeof(b2));
  EXPECT_EQ(b2, b);
}

TEST(SpscRingTest, RecordsWrapAroundTheEnd) {
  // 64-byte ring; 10-byte bodies make 14-byte records, so after a few rounds every record
  // position modulo 64 (including prefix and body split across the end) has been used.
  SpscRing ring(64);
  for (int i = 0; i < 200; ++i) {
    std::string body = "rec-" + std::to_string(100000 + i);  // 10 bytes
    ASSERT_EQ(body.size(), 10u);
    ASSERT_TRUE(WriteString(ring, body.substr(0, 3), body.substr(3))) << i;
    if (i % 3 == 2) {  // keep 1-3 records in flight so head and tail move apart
      for (int k = i - 2; k <= i; ++k) {
        ASSERT_EQ(ReadString(ring), "rec-" + std::to_string(100000 + k)) << k;
      }
    }
  }
  while (!ring.Empty()) ring.Read(nullptr, 0);
}

TEST(SpscRingTest, FullRingRejectsWithoutCorruption) {
  SpscRing ring(64);
  // 4 + 12 = 16 bytes per record: exactly 4 fit.
  const std::string recs[] = {"aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"};
  for (const auto& r : recs) ASSERT_TRUE(WriteString(ring, r));
  EXPECT_FALSE(WriteString(ring, "eeeeeeeeeeee"));
  EXPECT_FALSE(WriteString(ring, "e"));  // not even 5 bytes are free
  EXPECT_FALSE(ring.TryWrite(nullptr, 0, nullptr, 0));  // a bare 4-byte prefix neither
  EXPECT_EQ(ReadString(ring), "aaaaaaaaaaaa");
  // 16 bytes free now: a 13-byte body (17 bytes) still does not fit, a 12-byte one does.
  EXPECT_FALSE(WriteString(ring, "fffffffffffff"));
  EXPECT_TRUE(WriteString(ring, "gggggggggggg"));
  EXPECT_EQ(ReadString(ring), "bbbbbbbbbbbb");
  EXPECT_EQ(ReadString(ring), "cccccccccccc");
  EXPECT_EQ(ReadString(ring), "dddddddddddd");
  EXPECT_EQ(ReadString(ring), "gggggggggggg");
  EXPECT_EQ(ReadString(ring), "<empty>");
}

TEST(SpscRingTest, RecordLargerThanCapacityIsRejected) {
  SpscRing ring(32);
  std::string big(29, 'x');  // 4 + 29 > 32
  EXPECT_FALSE(WriteString(ring, big));
  EXPECT_TRUE(ring.Empty());
  std::string fits(28, 'y');  // 4 + 28 == 32: the whole ring
  EXPECT_TRUE(WriteString(ring, fits));
  EXPECT_EQ(ReadString(ring), fits);
}

TEST(SpscRingTest, RecordLargerThanOutCapIsSkipped) {
  SpscRing ring(128);
  ASSERT_TRUE(WriteString(ring, "short"));
  ASSERT_TRUE(WriteString(ring, std::string(40, 'L')));
  ASSERT_TRUE(WriteString(ring, "after"));
  EXPECT_EQ(ReadString(ring, 16), "short");
  EXPECT_EQ(ReadString(ring, 16), "<skipped>");  // and nothing past out_cap is written
  EXPECT_EQ(ReadString(ring, 16), "after");      // the next record is intact
  EXPECT_EQ(ReadString(ring, 16), "<empty>");
  // The skipped record's space was released.
  EXPECT_TRUE(WriteString(ring, std::string(124, 'z')));
}

TEST(SpscRingTest, ResetEmptiesTheRing) {
  SpscRing ring(64);
  ASSERT_TRUE(WriteString(ring, "abc"));
  ring.Reset();
  EXPECT_TRUE(ring.Empty());
  EXPECT_EQ(ReadString(ring), "<empty>");
  ASSERT_TRUE(WriteString(ring, std::string(60, 'q')));  // full capacity available again
  EXPECT_EQ(ReadString(ring), std::string(60, 'q'));
}

// Record body for the stress test: [uint64 seq][len-8 bytes derived from seq].
uint32_t StressLen(uint64_t seq) { return 8 + static_cast<uint32_t>((seq * 2654435761u) % 93); }
uint8_t StressByte(uint64_t seq, uint32_t i) { return static_cast<uint8_t>(seq * 31 + i * 7); }

TEST(SpscRingTest, ProducerConsumerStress) {
  // A small ring (many wraps, frequent fullness) and two threads. The producer writes
  // sequence-numbered records of varying length and counts rejections; the consumer checks
  // that the records it reads are exactly the accepted ones, in order, byte for byte.
  constexpr uint64_t kRecords = 200000;
  SpscRing ring(1024);
  std::vector<uint8_t> accepted(kRecords, 0);  // written by the producer, read after join
  std::atomic<bool> done{false};
  uint64_t rejected = 0;

  std::thread producer([&] {
    uint8_t body[128];
    for (uint64_t seq = 0; seq < kRecords; ++seq) {
      const uint32_t len = StressLen(seq);
      for (uint32_t i = 8; i < len; ++i) body[i - 8] = StressByte(seq, i);
      if (ring.TryWrite(&seq, 8, body, len - 8)) {
        accepted[seq] = 1;
      } else {
        ++rejected;
        if (seq % 16 == 0) std::this_thread::yield();  // give the consumer a chance
      }
    }
    done.store(true, std::memory_order_release);
  });

  std::vector<uint64_t> got;
  got.reserve(kRecords);
  uint64_t bad_content = 0;
  uint8_t buf[256];
  for (;;) {
    const bool finished = done.load(std::memory_order_acquire);
    const size_t n = ring.Read(buf, sizeof(buf));
    if (n == 0) {
      if (finished) break;  // producer done and ring drained
      continue;
    }
    ASSERT_NE(n, SIZE_MAX);
    ASSERT_GE(n, 8u);
    uint64_t seq;
    std::memcpy(&seq, buf, 8);
    ASSERT_LT(seq, kRecords);
    if (n != StressLen(seq)) ++bad_content;
    for (uint32_t i = 8; i < n; ++i) {
      if (buf[i] != StressByte(seq, i)) {
        ++bad_content;
        break;
      }
    }
    got.push_back(seq);
  }
  producer.join();

  EXPECT_EQ(bad_content, 0u);
  uint64_t n_accepted = 0;
  for (uint8_t a : accepted) n_accepted += a;
  EXPECT_EQ(n_accepted + rejected, kRecords);
  ASSERT_EQ(got.size(), n_accepted) << "records lost or duplicated";
  size_t k = 0;
  for (uint64_t seq = 0; seq < kRecords; ++seq) {
    if (!accepted[seq]) continue;
    ASSERT_EQ(got[k], seq) << "out of order at read #" << k;
    ++k;
  }
  EXPECT_GT(n_accepted, kRecords / 100) << "consumer made (almost) no progress";
}

}  // namespace
}  // namespace peakline::transport
