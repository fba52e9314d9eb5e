// ZeroedPages: zero on first read, resident only where written, Reset() both zeroes and gives
// the pages back (mincore() reports residency page by page).
#include "transport/zeroed_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace peakline::transport {
namespace {

constexpr size_t kPage = 4096;

// Pages of [p, p + bytes) that are resident now.
size_t ResidentPages(const void* p, size_t bytes) {
  std::vector<unsigned char> vec((bytes + kPage - 1) / kPage);
  if (mincore(const_cast<void*>(p), bytes, vec.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

TEST(ZeroedPagesTest, FreshArrayIsZeroAndNotResident) {
  ASSERT_EQ(sysconf(_SC_PAGESIZE), static_cast<long>(kPage));
  constexpr size_t kCount = 64 * kPage / sizeof(uint64_t);  // 64 pages
  ZeroedPages<uint64_t> a(kCount);
  EXPECT_EQ(ResidentPages(a.get(), kCount * sizeof(uint64_t)), 0u);
  a[0] = 7;
  a[kCount - 1] = 9;
  EXPECT_EQ(ResidentPages(a.get(), kCount * sizeof(uint64_t)), 2u);  // the two written pages
  // Reading untouched pages gives zero (they may map the shared zero page: not counted here).
  uint64_t sum = 0;
  for (size_t i = 1; i + 1 < kCount; ++i) sum += a[i];
  EXPECT_EQ(sum, 0u);
  EXPECT_EQ(a[0] + a[kCount - 1], 16u);
}

TEST(ZeroedPagesTest, ResetZeroesAndReleases) {
  constexpr size_t kCount = 16 * kPage / sizeof(std::atomic<uint64_t>);
  ZeroedPages<std::atomic<uint64_t>> a(kCount);
  for (size_t i = 0; i < kCount; ++i) a[i].store(i + 1, std::memory_order_relaxed);
  EXPECT_EQ(ResidentPages(a.get(), kCount * 8), 16u);
  ASSERT_TRUE(a.Reset());
  EXPECT_EQ(ResidentPages(a.get(), kCount * 8), 0u);
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(a[i].load(std::memory_order_relaxed), 0u) << i;
}

TEST(ZeroedPagesTest, SizeIsRoundedUpToWholePages) {
  ZeroedPages<uint8_t> a(10);  // one page: every byte of it is usable and zero
  for (size_t i = 0; i < kPage; ++i) ASSERT_EQ(a[i], 0);
  a[kPage - 1] = 1;
  EXPECT_EQ(a[kPage - 1], 1);
}

}  // namespace
}  // namespace peakline::transport
