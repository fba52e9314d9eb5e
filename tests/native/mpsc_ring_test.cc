// MpscRing: framing, wrap-around, full-ring drops counted in dropped(), oversize skipping,
// several producers against one consumer (every accepted record read exactly once, intact,
// in per-producer order), and a reserved-but-uncommitted record holding the consumer back.
// Deterministic: fixed seeds, every assertion holds for any interleaving.
#include "transport/mpsc_ring.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace peakline::transport {
namespace {

constexpr size_t kHeader = 8;  // per-record header word, payload padded to 8 bytes

size_t Footprint(size_t len) { return kHeader + ((len + 7) & ~size_t{7}); }

bool Write(MpscRing& ring, const std::string& a, const std::string& b = "") {
  return ring.TryWrite(a.data(), static_cast<uint32_t>(a.size()), b.data(),
                       static_cast<uint32_t>(b.size()));
}

std::string Read(MpscRing& ring, size_t cap = 8192) {
  std::vector<char> buf(cap + 1, '#');
  const size_t n = ring.Read(buf.data(), cap);
  if (n == 0) return "<empty>";
  if (n == SIZE_MAX) return "<skipped>";
  EXPECT_EQ(buf[cap], '#') << "Read wrote past out_cap";
  return std::string(buf.data(), n);
}

TEST(MpscRingTest, RoundTripAndEmpty) {
  MpscRing ring(4096);
  EXPECT_EQ(Read(ring), "<empty>");
  ASSERT_TRUE(Write(ring, "header|", "payload"));
  ASSERT_TRUE(Write(ring, "only-a"));
  ASSERT_TRUE(ring.TryWrite(nullptr, 0, "only-b", 6));
  EXPECT_EQ(Read(ring), "header|payload");
  EXPECT_EQ(Read(ring), "only-a");
  EXPECT_EQ(Read(ring), "only-b");
  EXPECT_EQ(Read(ring), "<empty>");
  EXPECT_EQ(ring.dropped(), 0u);
}

TEST(MpscRingTest, FullRingDropsAndCounts) {
  constexpr size_t kCap = 4096;
  MpscRing ring(kCap);
  const std::string rec(100, 'x');  // 112 bytes in the ring
  const size_t fit = kCap / Footprint(rec.size());
  for (size_t i = 0; i < fit; ++i) ASSERT_TRUE(Write(ring, rec)) << i;
  EXPECT_FALSE(Write(ring, rec));
  EXPECT_FALSE(Write(ring, rec));
  EXPECT_EQ(ring.dropped(), 2u);
  // What is left (4096 - 36 * 112 = 64 bytes) still takes a record that fits exactly.
  const size_t left = kCap - fit * Footprint(rec.size());
  EXPECT_TRUE(Write(ring, std::string(left - kHeader, 'y')));
  EXPECT_FALSE(Write(ring, "z"));
  EXPECT_EQ(ring.dropped(), 3u);
  // Reading one record makes room for exactly one more.
  EXPECT_EQ(Read(ring), rec);
  EXPECT_TRUE(Write(ring, rec));
  EXPECT_FALSE(Write(ring, "z"));
  EXPECT_EQ(ring.dropped(), 4u);
  for (size_t i = 0; i < fit - 1; ++i) ASSERT_EQ(Read(ring), rec);
  EXPECT_EQ(Read(ring), std::string(left - kHeader, 'y'));
  EXPECT_EQ(Read(ring), rec);
  EXPECT_EQ(Read(ring), "<empty>");
}

TEST(MpscRingTest, OversizeRecordIsSkippedNotStuck) {
  MpscRing ring(4096);
  ASSERT_TRUE(Write(ring, std::string(300, 'a')));
  ASSERT_TRUE(Write(ring, "next"));
  EXPECT_EQ(Read(ring, 100), "<skipped>");
  EXPECT_EQ(Read(ring, 100), "next");
  EXPECT_EQ(Read(ring, 100), "<empty>");
}

// Records of every length 1..300 bytes, many laps around a small ring, so that payloads wrap
// around the end at every offset; each one reads back byte for byte.
TEST(MpscRingTest, WrapAroundKeepsRecordsIntact) {
  MpscRing ring(4096);
  std::mt19937_64 rng(3);
  uint64_t written = 0, read = 0;
  std::vector<std::string> pending;
  size_t next_pending = 0;
  for (int i = 0; i < 20000; ++i) {
    const size_t len = 1 + static_cast<size_t>(i) % 300;
    std::string rec(len, '\0');
    for (auto& c : rec) c = static_cast<char>(rng());
    const size_t split = rng() % (len + 1);
    if (ring.TryWrite(rec.data(), static_cast<uint32_t>(split), rec.data() + split,
                      static_cast<uint32_t>(len - split))) {
      pending.push_back(rec);
      ++written;
    }
    // Drain now and then, so the ring is sometimes nearly full, sometimes empty.
    if (rng() % 8 == 0) {
      for (;;) {
        const std::string got = Read(ring);
        if (got == "<empty>") break;
        ASSERT_LT(next_pending, pending.size());
        ASSERT_EQ(got, pending[next_pending]) << "record " << next_pending;
        ++next_pending;
        ++read;
      }
    }
  }
  for (std::string got = Read(ring); got != "<empty>"; got = Read(ring)) {
    ASSERT_EQ(got, pending[next_pending++]);
    ++read;
  }
  EXPECT_EQ(read, written);
  EXPECT_EQ(written + ring.dropped(), 20000u);
  EXPECT_GT(ring.dropped(), 0u);  // it did fill up
}

// ---- several producers, one consumer ---------------------------------------------------------

struct RecordHeader {
  uint32_t producer;
  uint32_t len;  // payload bytes after this header
  uint64_t seq;
};

uint8_t PayloadByte(uint32_t producer, uint64_t seq, size_t j) {
  return static_cast<uint8_t>(producer * 131 + seq * 7 + j * 13);
}

// P producers write sequence-numbered records of 0..199 payload bytes into a ring small
// enough to fill up; the consumer runs meanwhile. Every accepted record is read exactly once
// and intact, records of one producer come out in the order it wrote them, and the refused
// ones are exactly what dropped() counts.
TEST(MpscRingTest, ManyProducersOneConsumer) {
  constexpr uint32_t kProducers = 4;
  constexpr uint64_t kRecords = 40000;
  MpscRing ring(16 * 1024);
  std::vector<std::vector<uint8_t>> accepted(kProducers, std::vector<uint8_t>(kRecords, 0));
  std::vector<std::vector<uint8_t>> received(kProducers, std::vector<uint8_t>(kRecords, 0));
  std::atomic<uint32_t> done{0};
  std::atomic<uint64_t> refused{0};

  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::vector<uint8_t> payload(200);
      for (uint64_t seq = 0; seq < kRecords; ++seq) {
        RecordHeader h{p, static_cast<uint32_t>((seq * 37 + p) % 200), seq};
        for (size_t j = 0; j < h.len; ++j) payload[j] = PayloadByte(p, seq, j);
        if (ring.TryWrite(&h, sizeof(h), payload.data(), h.len)) {
          accepted[p][seq] = 1;
        } else {
          refused.fetch_add(1);
        }
        if (seq % 1024 == 0) std::this_thread::yield();
      }
      done.fetch_add(1);
    });
  }

  std::string failure;
  uint64_t total_read = 0;
  std::vector<int64_t> last_seq(kProducers, -1);
  std::vector<uint8_t> buf(512);
  auto consume = [&]() -> bool {  // one record; false if none was ready
    const size_t n = ring.Read(buf.data(), buf.size());
    if (n == 0) return false;
    RecordHeader h;
    if (n == SIZE_MAX || n < sizeof(h)) {
      failure = "bad record length " + std::to_string(n);
      return true;
    }
    std::memcpy(&h, buf.data(), sizeof(h));
    if (h.producer >= kProducers || h.seq >= kRecords || n != sizeof(h) + h.len) {
      failure = "corrupt header";
      return true;
    }
    for (size_t j = 0; j < h.len; ++j) {
      if (buf[sizeof(h) + j] != PayloadByte(h.producer, h.seq, j)) {
        failure = "corrupt payload";
        return true;
      }
    }
    if (static_cast<int64_t>(h.seq) <= last_seq[h.producer]) {
      failure = "out of order or repeated: producer " + std::to_string(h.producer) + " seq " +
                std::to_string(h.seq);
      return true;
    }
    last_seq[h.producer] = static_cast<int64_t>(h.seq);
    received[h.producer][h.seq] = 1;
    ++total_read;
    return true;
  };
  while (done.load() < kProducers && failure.empty()) {
    if (!consume()) std::this_thread::yield();
  }
  for (auto& t : producers) t.join();
  while (failure.empty() && consume()) {}
  ASSERT_EQ(failure, "");

  uint64_t total_accepted = 0;
  for (uint32_t p = 0; p < kProducers; ++p) {
    for (uint64_t s = 0; s < kRecords; ++s) {
      ASSERT_EQ(received[p][s], accepted[p][s]) << "producer " << p << " seq " << s;
      total_accepted += accepted[p][s];
    }
  }
  EXPECT_EQ(total_read, total_accepted);
  EXPECT_EQ(ring.dropped(), refused.load());
  EXPECT_EQ(total_accepted + refused.load(), kProducers * kRecords);
  EXPECT_GT(total_accepted, 0u);
}

// ---- a reserved, not yet committed record ----------------------------------------------------
//
// To hold a producer between its reservation and its commit, its payload (part b) is a page
// with no access: TryWrite reserves, copies part a, then faults on the first byte of part b.
// The SIGSEGV handler (on the producer's thread) reports "paused", waits until the test lets
// it go, makes the page readable and returns, so the copy resumes and the record is committed.

std::atomic<int> g_phase{0};  // 0 running, 1 producer paused in the fault, 2 released
void* g_trap_page = nullptr;
struct sigaction g_old_segv;

void TrapHandler(int sig, siginfo_t* info, void* ctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  const uintptr_t page = reinterpret_cast<uintptr_t>(g_trap_page);
  if (g_trap_page == nullptr || a < page || a >= page + 4096) {
    // Not ours: hand over to whatever was there (a sanitizer's handler, or the default).
    if (g_old_segv.sa_flags & SA_SIGINFO) {
      g_old_segv.sa_sigaction(sig, info, ctx);
    } else {
      signal(sig, SIG_DFL);
    }
    return;
  }
  g_phase.store(1);
  while (g_phase.load() != 2) {
    const timespec ts{0, 100000};
    nanosleep(&ts, nullptr);
  }
  mprotect(g_trap_page, 4096, PROT_READ);
}

// dirty: the slow record's header lands on bytes that were the payload of an earlier record
// (0xFF: the commit bit set), which the consumer must never take for a committed header.
void SlowProducerHoldsTheConsumerBack(bool dirty) {
  const long page_size = sysconf(_SC_PAGESIZE);
  ASSERT_EQ(page_size, 4096) << "the trap assumes 4 KiB pages";
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  std::memset(page, 'P', 4096);
  ASSERT_EQ(mprotect(page, 4096, PROT_NONE), 0);
  g_trap_page = page;
  g_phase.store(0);
  struct sigaction sa {};
  sa.sa_sigaction = TrapHandler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &sa, &g_old_segv), 0);

  MpscRing ring(4096);
  if (dirty) {  // one record covering the whole ring, read: the next records reuse its bytes
    ASSERT_TRUE(Write(ring, "", std::string(4096 - kHeader, '\xff')));
    ASSERT_EQ(Read(ring), std::string(4096 - kHeader, '\xff'));
  }
  ASSERT_TRUE(Write(ring, "before"));
  std::atomic<bool> slow_ok{false};
  std::thread slow([&] {
    slow_ok.store(ring.TryWrite("slow:", 5, page, 16));  // faults inside, after reserving
  });
  while (g_phase.load() != 1) std::this_thread::yield();

  // The slow producer has reserved its record and is stuck before committing it.
  ASSERT_TRUE(Write(ring, "after"));  // reserved and committed behind it
  EXPECT_EQ(Read(ring), "before");
  EXPECT_EQ(Read(ring), "<empty>") << "the consumer ran past an uncommitted record";
  EXPECT_EQ(Read(ring), "<empty>");
  ASSERT_TRUE(Write(ring, "after2"));
  EXPECT_EQ(Read(ring), "<empty>");

  g_phase.store(2);
  slow.join();
  EXPECT_TRUE(slow_ok.load());
  EXPECT_EQ(Read(ring), "slow:" + std::string(16, 'P'));
  EXPECT_EQ(Read(ring), "after");
  EXPECT_EQ(Read(ring), "after2");
  EXPECT_EQ(Read(ring), "<empty>");
  EXPECT_EQ(ring.dropped(), 0u);

  sigaction(SIGSEGV, &g_old_segv, nullptr);
  g_trap_page = nullptr;
  munmap(page, 4096);
}

TEST(MpscRingTest, UncommittedRecordHoldsTheConsumerBack) { SlowProducerHoldsTheConsumerBack(false); }

TEST(MpscRingTest, UncommittedRecordOverOldPayloadHoldsTheConsumerBack) {
  SlowProducerHoldsTheConsumerBack(true);
}

}  // namespace
}  // namespace peakline::transport
