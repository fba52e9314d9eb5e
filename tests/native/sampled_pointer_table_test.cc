// SampledPointerTable: set semantics, the bounded probe window (full window -> Insert fails,
// "not tracked"), reuse of deleted slots, and concurrent inserts/removes from several threads
// with no lost or phantom keys. Deterministic: fixed seeds, every assertion holds for any.
#include "memory/sampled_pointer_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace peakline::memory {
namespace {

using Table = SampledPointerTable;

// Plausible block addresses: 16-byte aligned, as malloc returns them.
uintptr_t Key(uint64_t i) { return static_cast<uintptr_t>(0x7f0000000000ULL + (i << 4)); }

// The table's home slot of a key. Mirrors the private hash of sampled_pointer_table.h; used
// only to build keys that collide, and checked below to collide in behaviour too.
size_t HomeSlot(uintptr_t key, size_t log2_slots) {
  return static_cast<size_t>(((key >> 4) * 0x9E3779B97F4A7C15ULL) >> (64 - log2_slots)) &
         ((size_t{1} << log2_slots) - 1);
}

// n distinct keys that share one home slot.
std::vector<uintptr_t> CollidingKeys(size_t n, size_t log2_slots) {
  std::vector<uintptr_t> keys;
  const size_t home = HomeSlot(Key(1), log2_slots);
  for (uint64_t i = 1; keys.size() < n; ++i) {
    if (HomeSlot(Key(i), log2_slots) == home) keys.push_back(Key(i));
  }
  return keys;
}

TEST(SampledPointerTableTest, InsertContainsRemove) {
  Table t(10);
  const uintptr_t a = Key(1), b = Key(2);
  EXPECT_FALSE(t.Contains(a));
  EXPECT_FALSE(t.Remove(a));
  EXPECT_TRUE(t.Insert(a));
  EXPECT_TRUE(t.Contains(a));
  EXPECT_FALSE(t.Contains(b));
  EXPECT_FALSE(t.Insert(a)) << "duplicate accepted";
  EXPECT_TRUE(t.Insert(b));
  EXPECT_TRUE(t.Remove(a));
  EXPECT_FALSE(t.Contains(a));
  EXPECT_TRUE(t.Contains(b));
  EXPECT_FALSE(t.Remove(a)) << "removed twice";
  EXPECT_TRUE(t.Insert(a)) << "re-insert after remove";
  EXPECT_TRUE(t.Contains(a));
  // The two marker values are never keys.
  EXPECT_FALSE(t.Insert(Table::kEmpty));
  EXPECT_FALSE(t.Insert(Table::kDeleted));
  EXPECT_FALSE(t.Contains(Table::kEmpty));
  EXPECT_FALSE(t.Remove(Table::kDeleted));
  t.Clear();
  EXPECT_FALSE(t.Contains(a));
  EXPECT_FALSE(t.Contains(b));
  EXPECT_TRUE(t.Insert(b));
}

TEST(SampledPointerTableTest, ManyKeysRoundTrip) {
  Table t(16);
  constexpr uint64_t kKeys = 20000;  // ~30% load
  uint64_t untracked = 0;
  std::vector<bool> in(kKeys + 1);
  for (uint64_t i = 1; i <= kKeys; ++i) {
    in[i] = t.Insert(Key(i));
    untracked += !in[i];
  }
  EXPECT_EQ(untracked, 0u) << "a 32-slot window overflowed at 30% load";
  for (uint64_t i = 1; i <= kKeys; ++i) ASSERT_EQ(t.Contains(Key(i)), in[i]);
  for (uint64_t i = kKeys + 1; i <= 2 * kKeys; ++i) ASSERT_FALSE(t.Contains(Key(i)));
  for (uint64_t i = 1; i <= kKeys; i += 2) ASSERT_EQ(t.Remove(Key(i)), in[i]);
  for (uint64_t i = 1; i <= kKeys; ++i) ASSERT_EQ(t.Contains(Key(i)), in[i] && i % 2 == 0);
}

// 32 keys with the same home slot fill its window; the 33rd is refused (the hooks count it as
// "not tracked") and is not contained; a removal frees a slot (a tombstone) that the next
// insert reuses.
TEST(SampledPointerTableTest, FullWindowRefusesThenTombstoneIsReused) {
  constexpr size_t kLog2 = 12;
  const std::vector<uintptr_t> keys = CollidingKeys(Table::kWindow + 2, kLog2);
  Table t(kLog2);
  for (size_t i = 0; i < Table::kWindow; ++i) ASSERT_TRUE(t.Insert(keys[i])) << i;
  const uintptr_t extra = keys[Table::kWindow], extra2 = keys[Table::kWindow + 1];
  EXPECT_FALSE(t.Insert(extra)) << "window full, yet the insert succeeded";
  EXPECT_FALSE(t.Contains(extra));
  EXPECT_FALSE(t.Remove(extra));
  for (size_t i = 0; i < Table::kWindow; ++i) ASSERT_TRUE(t.Contains(keys[i]));

  ASSERT_TRUE(t.Remove(keys[5]));
  EXPECT_FALSE(t.Contains(keys[5]));
  EXPECT_TRUE(t.Insert(extra)) << "the deleted slot was not reused";
  EXPECT_TRUE(t.Contains(extra));
  EXPECT_FALSE(t.Insert(extra2));  // full again
  for (size_t i = 0; i < Table::kWindow; ++i) ASSERT_EQ(t.Contains(keys[i]), i != 5);

  // A window made only of tombstones: lookups of absent keys scan it all and fail, inserts
  // reuse it.
  for (size_t i = 0; i < Table::kWindow; ++i) t.Remove(keys[i]);
  t.Remove(extra);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_FALSE(t.Contains(keys[i]));
  for (size_t i = 0; i < Table::kWindow; ++i) ASSERT_TRUE(t.Insert(keys[i + 2])) << i;
  for (size_t i = 2; i < Table::kWindow + 2; ++i) ASSERT_TRUE(t.Contains(keys[i]));
  EXPECT_FALSE(t.Contains(keys[0]));
  EXPECT_FALSE(t.Contains(keys[1]));
}

// The same without the mirrored hash: a table of 2 home slots (34 slots, 33 reachable) takes
// 32 or 33 keys whatever they are, refuses the rest, and after removing everything takes as
// many again (tombstones reused).
TEST(SampledPointerTableTest, TinyTableCapacityIsTheWindow) {
  Table t(1);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::vector<uintptr_t> in;
    for (uint64_t i = 1; i <= 1000; ++i) {
      const uintptr_t k = Key(i + 1000 * round);
      if (t.Insert(k)) {
        in.push_back(k);
      } else {
        ASSERT_FALSE(t.Contains(k));
      }
    }
    EXPECT_GE(in.size(), Table::kWindow);
    EXPECT_LE(in.size(), Table::kWindow + 1);
    for (uintptr_t k : in) ASSERT_TRUE(t.Contains(k));
    for (uintptr_t k : in) ASSERT_TRUE(t.Remove(k));
    for (uintptr_t k : in) ASSERT_FALSE(t.Contains(k));
  }
}

// Several threads insert and remove their own keys at random (as the hooks do: a block's
// address is inserted by the thread that allocated it and removed by whichever frees it; here
// ownership moves between threads through a shared pool). The table is small so that windows
// fill up and refusals happen. A refused insert must leave the key absent, an accepted one
// present; Remove must find exactly the keys that are in; at the end every key's presence
// matches. Keys sit in a shared array of atomics, so a key freed by one thread can be
// inserted again by another.
TEST(SampledPointerTableTest, ConcurrentInsertRemoveLosesNothing) {
  constexpr int kThreads = 8;
  constexpr int kOps = 50000;  // per thread; ~2 s under TSan on 2 cores
  constexpr uint64_t kKeys = 4096;
  Table t(9);  // 512 home slots
  // state[i]: 0 free, 1 being handled by a thread, 2 in the table, 3 refused (not in).
  std::vector<std::atomic<int>> state(kKeys);
  for (auto& s : state) s.store(0);
  std::atomic<int64_t> refused{0}, errors{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937_64 rng(th + 1);
      for (int op = 0; op < kOps; ++op) {
        const uint64_t i = rng() % kKeys;
        int s = state[i].load(std::memory_order_acquire);
        if (s == 1 || !state[i].compare_exchange_strong(s, 1, std::memory_order_acq_rel)) continue;
        const uintptr_t k = Key(i + 1);
        if (s == 2) {  // in the table: remove it ("free")
          if (!t.Contains(k)) errors.fetch_add(1);
          if (!t.Remove(k)) errors.fetch_add(1);
          if (t.Contains(k)) errors.fetch_add(1);
          state[i].store(0, std::memory_order_release);
        } else {  // not in the table: insert it ("sampled allocation")
          if (t.Contains(k)) errors.fetch_add(1);
          if (t.Remove(k)) errors.fetch_add(1);
          const bool ok = t.Insert(k);
          if (ok != t.Contains(k)) errors.fetch_add(1);
          if (ok && t.Insert(k)) errors.fetch_add(1);  // duplicate
          if (!ok) refused.fetch_add(1);
          state[i].store(ok ? 2 : 3, std::memory_order_release);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  int64_t present = 0;
  for (uint64_t i = 0; i < kKeys; ++i) {
    ASSERT_EQ(t.Contains(Key(i + 1)), state[i].load() == 2) << "key " << i;
    present += state[i].load() == 2;
  }
  // The workload did exercise full windows (keys outnumber slots) and still kept many keys.
  EXPECT_GT(refused.load(), 0);
  EXPECT_GT(present, 200);
}

}  // namespace
}  // namespace peakline::memory
