// The CPU a thread runs after its announced end, read at its exit (cpu/thread_exit_tail.h).
#include "cpu/thread_exit_tail.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <time.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "cpu/clock.h"
#include "cpu/thread_cpu_timer.h"
#include "cpu_burn.h"

namespace peakline::cpu {
namespace {

using testing_support::BurnCpuNs;
using testing_support::OwnCpuNs;

int64_t OwnSystemNs() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return TimevalNs(ru.ru_stime);
}

std::vector<ExitTail> TakeAll() {
  std::vector<ExitTail> out;
  ExitTail batch[16];
  for (size_t n; (n = TakeExitTails(batch, 16)) > 0;) out.insert(out.end(), batch, batch + n);
  return out;
}

TEST(ThreadExitTailTest, TheCpuAfterTheAnnouncedEndComesBackWithTheThreadAndSession) {
  TakeAll();
  pid_t tid = 0;
  int64_t after_end = 0;
  std::thread([&] {
    tid = CurrentTid();
    BurnCpuNs(3'000'000);  // before the end: not part of the tail
    ASSERT_TRUE(ArmExitTail(/*session=*/7, OwnCpuNs(), OwnSystemNs()));
    const int64_t from = OwnCpuNs();
    BurnCpuNs(20'000'000);  // the teardown, as it were
    after_end = OwnCpuNs() - from;
  }).join();
  const std::vector<ExitTail> tails = TakeAll();
  ASSERT_EQ(tails.size(), 1u);
  EXPECT_EQ(tails[0].tid, tid);
  EXPECT_EQ(tails[0].session, 7u);
  // The 20 ms, and what the thread ran from there to its exit (std::thread's return path):
  // microseconds, not the 3 ms before the end.
  EXPECT_GE(tails[0].cpu_ns, after_end);
  EXPECT_LT(tails[0].cpu_ns, after_end + 1'000'000);
  EXPECT_GE(tails[0].system_ns, 0);
  EXPECT_LE(tails[0].system_ns, tails[0].cpu_ns);
  EXPECT_TRUE(TakeAll().empty());  // taken once
}

TEST(ThreadExitTailTest, AThreadThatDidNotAnnounceItsEndLeavesNothing) {
  TakeAll();
  std::thread([] { BurnCpuNs(2'000'000); }).join();
  EXPECT_TRUE(TakeAll().empty());
}

TEST(ThreadExitTailTest, AnUnknownSystemTimeStaysUnknown) {
  TakeAll();
  std::thread([] {
    ASSERT_TRUE(ArmExitTail(1, OwnCpuNs(), /*system_ns=*/-1));
    BurnCpuNs(1'000'000);
  }).join();
  const std::vector<ExitTail> tails = TakeAll();
  ASSERT_EQ(tails.size(), 1u);
  EXPECT_EQ(tails[0].system_ns, -1);
  EXPECT_GE(tails[0].cpu_ns, 1'000'000);
}

TEST(ThreadExitTailTest, AFullTableDropsAndCountsRatherThanWaits) {
  TakeAll();
  const uint64_t dropped_before = DroppedExitTails();
  constexpr int kThreads = 1100;  // more than the table holds
  for (int i = 0; i < kThreads; ++i) {
    std::thread([] { ArmExitTail(2, OwnCpuNs(), OwnSystemNs()); }).join();
  }
  const size_t taken = TakeAll().size();
  const uint64_t dropped = DroppedExitTails() - dropped_before;
  EXPECT_EQ(taken + dropped, static_cast<uint64_t>(kThreads));
  EXPECT_GT(dropped, 0u);
  // Room again once taken.
  std::thread([] { ArmExitTail(2, OwnCpuNs(), OwnSystemNs()); }).join();
  EXPECT_EQ(TakeAll().size(), 1u);
}

TEST(ThreadExitTailTest, ThreadsEndingAtOnceEachLeaveTheirOwn) {
  TakeAll();
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<pid_t> tids(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&tids, i] {
      tids[i] = CurrentTid();
      ArmExitTail(3, OwnCpuNs(), OwnSystemNs());
      BurnCpuNs(500'000);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<ExitTail> tails = TakeAll();
  ASSERT_EQ(tails.size(), static_cast<size_t>(kThreads));
  for (pid_t tid : tids) {
    int found = 0;
    for (const ExitTail& tail : tails) found += tail.tid == tid && tail.cpu_ns >= 500'000;
    EXPECT_EQ(found, 1) << "thread " << tid;
  }
}

TEST(ThreadExitTailTest, AForkChildForgetsTheParentsTails) {
  TakeAll();
  std::thread([] { ArmExitTail(4, OwnCpuNs(), OwnSystemNs()); }).join();
  ForgetExitTailsAfterFork();  // as the child's atfork handler does
  EXPECT_TRUE(TakeAll().empty());
}

}  // namespace
}  // namespace peakline::cpu
