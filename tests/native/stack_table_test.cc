// StackTable (aggregate/stack_table.h): interning and per-(thread, stack) counters.
#include "aggregate/stack_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peakline::aggregate {
namespace {

TEST(StackTableTest, StringsAreInternedOnce) {
  StackTable t;
  const uint32_t a = t.InternString("a.py");
  const uint32_t b = t.InternString("b.py");
  const uint32_t empty = t.InternString("");
  EXPECT_NE(a, b);
  EXPECT_NE(a, empty);
  std::string dynamic = std::string("a.") + "py";  // equal content, different storage
  EXPECT_EQ(t.InternString(dynamic), a);
  EXPECT_EQ(t.InternString(std::string_view("b.pyXYZ", 4)), b);
  EXPECT_EQ(t.InternString(""), empty);
  ASSERT_EQ(t.strings().size(), 3u);
  EXPECT_EQ(t.strings()[a], "a.py");
  EXPECT_EQ(t.strings()[b], "b.py");
  EXPECT_EQ(t.strings()[empty], "");
}

TEST(StackTableTest, ManyStringsKeepTheirIds) {
  // Enough to force rehashing and vector reallocation several times.
  StackTable t;
  std::vector<uint32_t> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back(t.InternString("s" + std::to_string(i)));
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(t.InternString("s" + std::to_string(i)), ids[i]);
    ASSERT_EQ(t.strings()[ids[i]], "s" + std::to_string(i));
  }
  EXPECT_EQ(t.strings().size(), 5000u);
}

TEST(StackTableTest, FramesAreInternedByAllFourFields) {
  StackTable t;
  const uint32_t f = t.InternString("f.py"), g = t.InternString("g.py");
  const uint32_t fn = t.InternString("fn"), gn = t.InternString("gn");
  const FrameKey base{f, fn, 10, 12};
  const uint32_t id = t.InternFrame(base);
  EXPECT_EQ(t.InternFrame(FrameKey{f, fn, 10, 12}), id);
  const FrameKey variants[] = {{g, fn, 10, 12}, {f, gn, 10, 12}, {f, fn, 11, 12},
                               {f, fn, 10, 13}, {f, fn, 12, 10}, {f, fn, -1, -1}};
  std::vector<uint32_t> ids = {id};
  for (const FrameKey& k : variants) {
    const uint32_t v = t.InternFrame(k);
    for (uint32_t other : ids) EXPECT_NE(v, other);
    ids.push_back(v);
    EXPECT_EQ(t.InternFrame(k), v);
  }
  ASSERT_EQ(t.frames().size(), 7u);
  EXPECT_EQ(t.frames()[id], base);
  EXPECT_EQ(t.frames()[ids[5]], (FrameKey{f, fn, 12, 10}));
}

TEST(StackTableTest, SameThreadAndFramesShareCounters) {
  StackTable t;
  const uint32_t frames[] = {3, 1, 2};
  StackCounters& c = t.Stack(42, frames, 3);
  c.cpu_python_ns += 100;
  c.cpu_samples += 1;
  std::vector<uint32_t> copy(frames, frames + 3);  // equal content, different storage
  StackCounters& again = t.Stack(42, copy.data(), copy.size());
  EXPECT_EQ(&again, &c);
  EXPECT_EQ(again.cpu_python_ns, 100);
  EXPECT_EQ(again.cpu_samples, 1);
  EXPECT_EQ(t.stacks().size(), 1u);
}

TEST(StackTableTest, ThreadOrderAndLengthDistinguishStacks) {
  StackTable t;
  const uint32_t abc[] = {1, 2, 3};
  const uint32_t cba[] = {3, 2, 1};
  const uint32_t ab[] = {1, 2};
  t.Stack(1, abc, 3).cpu_samples = 1;
  t.Stack(2, abc, 3).cpu_samples = 2;  // other thread
  t.Stack(1, cba, 3).cpu_samples = 3;  // other order
  t.Stack(1, ab, 2).cpu_samples = 4;   // prefix
  t.Stack(1, abc, 0).cpu_samples = 5;  // empty stack (thread with no Python frames)
  ASSERT_EQ(t.stacks().size(), 5u);
  EXPECT_EQ(t.Stack(1, abc, 3).cpu_samples, 1);
  EXPECT_EQ(t.Stack(2, abc, 3).cpu_samples, 2);
  EXPECT_EQ(t.Stack(1, cba, 3).cpu_samples, 3);
  EXPECT_EQ(t.Stack(1, ab, 2).cpu_samples, 4);
  EXPECT_EQ(t.Stack(1, nullptr, 0).cpu_samples, 5);
  EXPECT_EQ(t.stacks().size(), 5u);
}

TEST(StackTableTest, RowsPreserveThreadFramesAndCounters) {
  StackTable t;
  std::vector<std::vector<uint32_t>> keys;
  for (uint32_t i = 0; i < 300; ++i) keys.push_back({i, i * 7 % 13, 99, i % 5});
  for (uint32_t i = 0; i < keys.size(); ++i) {
    StackCounters& c = t.Stack(static_cast<pid_t>(1000 + i % 3), keys[i].data(), keys[i].size());
    c.wait_ns += i;
    c.cpu_native_ns = 2 * i;
  }
  // A second pass (with the table now large) finds the same rows.
  for (uint32_t i = 0; i < keys.size(); ++i) {
    t.Stack(static_cast<pid_t>(1000 + i % 3), keys[i].data(), keys[i].size()).wait_samples += 1;
  }
  ASSERT_EQ(t.stacks().size(), keys.size());
  for (uint32_t i = 0; i < keys.size(); ++i) {
    const StackRow& row = t.stacks()[i];
    EXPECT_EQ(row.tid, static_cast<pid_t>(1000 + i % 3));
    EXPECT_EQ(row.frames, keys[i]);
    EXPECT_EQ(row.counters.wait_ns, i);
    EXPECT_EQ(row.counters.cpu_native_ns, 2 * i);
    EXPECT_EQ(row.counters.wait_samples, 1);
  }
}

}  // namespace
}  // namespace peakline::aggregate
