// The GIL-side aggregation of CPU samples in a sampling session, fed synthetic sample records
// in a known order (session_harness.h): what a sample charges and to which stack
// (SamplingSession::ProcessSample), how another thread's work is charged under the main
// thread's stack (StitchToMain), where its CPU time falls on the timeline and what it leaves
// of the memory peak. What happens to a sample that names a code object which dies:
// code_lifetime_test.cc.
#include "session_harness.h"

namespace peakline::session {
namespace {

using Strings = std::vector<std::string>;
using transport::SampleKind;

class CpuAggregationTest : public SessionHarness {
 protected:
  void SetUp() override {
    SessionHarness::SetUp();
    ASSERT_NO_FATAL_FAILURE(RecordStacks());
  }
  void TearDown() override {
    SessionHarness::TearDown();  // the slot's timer goes before its thread
    worker_.reset();
  }

  int64_t CpuOfThread(pid_t tid) const {
    for (const ThreadSummary& t : session_->Threads()) {
      if (t.tid == tid) return t.cpu_ns;
    }
    ADD_FAILURE() << "no thread " << tid;
    return -1;
  }

  const pid_t main_ = CurrentTid();
  std::unique_ptr<BlockedThread> worker_ = std::make_unique<BlockedThread>();
  const pid_t worker_tid_ = worker_->tid();
};

TEST_F(CpuAggregationTest, ASampleChargesItsCpuLessKernelTimeByKindToTheThreadsOwnStack) {
  Sample(main_, SampleKind::kPython, 10 * kMs, 3 * kMs, Own("a"));
  Sample(main_, SampleKind::kNative, 4 * kMs, 1 * kMs, Own("shared1"), 0, transport::kFlagTruncated,
         2);
  Sample(main_, SampleKind::kPython, 5 * kMs, 0, Own("a"));
  ASSERT_TRUE(Call(user_, "tick_x"));

  const StackCounters& a = Stack(main_, {"user.py:2"});
  EXPECT_EQ(a.cpu_python_ns, 12 * kMs);
  EXPECT_EQ(a.cpu_native_ns, 0);
  EXPECT_EQ(a.cpu_system_ns, 3 * kMs);
  EXPECT_EQ(a.cpu_samples, 2);
  const StackCounters& shared = Stack(main_, {"lib.py:2", "user.py:6"});
  EXPECT_EQ(shared.cpu_python_ns, 0);
  EXPECT_EQ(shared.cpu_native_ns, 3 * kMs);
  EXPECT_EQ(shared.cpu_system_ns, 1 * kMs);
  EXPECT_EQ(shared.cpu_samples, 1);
  EXPECT_EQ(session_->stats().cpu_samples, 3);
  EXPECT_EQ(session_->stats().truncated_stacks, 1);
  EXPECT_EQ(session_->stats().invalid_frames, 2);
  EXPECT_EQ(CpuOfThread(main_), 19 * kMs);
}

TEST_F(CpuAggregationTest, TheMainThreadsWorkOutsideTheUsersCodeIsNeverStitched) {
  Sample(main_, SampleKind::kPython, 2 * kMs, 0, Own("lib"));
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(CpuStacks(main_), (std::vector<Strings>{{"lib.py:2"}}));
}

TEST_F(CpuAggregationTest, AnotherThreadsWorkOutsideTheUsersCodeGoesUnderWhereTheMainThreadWas) {
  // The main thread's stack as the signal handler read it (kForeignFrame frames) follows the
  // worker's own; it is used only when the worker's own stack has no frame of the user's code.
  Sample(worker_tid_, SampleKind::kNative, 4 * kMs, 0, Concat(Own("lib"), AsMain("main")));
  Sample(worker_tid_, SampleKind::kPython, 6 * kMs, 0, Concat(Own("shared1"), AsMain("main")));
  ASSERT_TRUE(Call(user_, "tick_x"));

  EXPECT_EQ(CpuStacks(worker_tid_),
            (std::vector<Strings>{{"lib.py:2", "user.py:12"}, {"lib.py:2", "user.py:6"}}));
  EXPECT_EQ(Stack(worker_tid_, {"lib.py:2", "user.py:12"}).cpu_native_ns, 4 * kMs);
  EXPECT_EQ(Stack(worker_tid_, {"lib.py:2", "user.py:6"}).cpu_python_ns, 6 * kMs);
  EXPECT_EQ(session_->stats().invalid_frames, 0);
  EXPECT_EQ(CpuOfThread(worker_tid_), 10 * kMs);
}

TEST_F(CpuAggregationTest, WithoutTheMainThreadsFramesTheWorkGoesUnderItsStackAtThePreviousTick) {
  ASSERT_TRUE(Call(user_, "tick_x"));  // the main thread is on user.py:8
  // Taken since that tick by a thread without a Python thread state (a BLAS worker), when the
  // main thread's stack could not be read: no frames at all.
  Sample(worker_tid_, SampleKind::kNoThread, 5 * kMs, 0, {});
  ASSERT_TRUE(Call(user_, "tick_y"));  // now on user.py:10: the work was done before
  EXPECT_EQ(CpuStacks(worker_tid_), (std::vector<Strings>{{"user.py:8"}}));
  Sample(worker_tid_, SampleKind::kNoThread, 7 * kMs, 0, {});
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(CpuStacks(worker_tid_), (std::vector<Strings>{{"user.py:8"}, {"user.py:10"}}));
  EXPECT_EQ(Stack(worker_tid_, {"user.py:8"}).cpu_native_ns, 5 * kMs);
  EXPECT_EQ(Stack(worker_tid_, {"user.py:10"}).cpu_native_ns, 7 * kMs);
  // Its frames, when there are any, are the main thread's (kForeignFrame): they win.
  Sample(worker_tid_, SampleKind::kNoThread, 2 * kMs, 0, AsMain("main"));
  ASSERT_TRUE(Call(user_, "tick_y"));
  EXPECT_EQ(Stack(worker_tid_, {"user.py:12"}).cpu_native_ns, 2 * kMs);
}

TEST_F(CpuAggregationTest, TheOffCpuTimeBeforeASampleGoesToTheThreadsOwnStackUnstitched) {
  cpu::ThreadSlot* slot = current_->SlotForTesting(worker_tid_);
  ASSERT_NE(slot, nullptr);
  // 50 ms of wall time since the thread's registration, 10 ms of them on a CPU: 40 ms off it.
  const int64_t wall = slot->wait.last_wall_ns + 50 * kMs;
  Sample(worker_tid_, SampleKind::kNative, 10 * kMs, 0, Concat(Own("lib"), AsMain("main")), wall);
  ASSERT_TRUE(Call(user_, "tick_x"));

  const StackCounters& own = Stack(worker_tid_, {"lib.py:2"});
  // The kernel's run delay, if the thread had any, is split off the wait: the sum is exact.
  EXPECT_EQ(own.wait_ns + own.run_delay_ns, 40 * kMs);
  EXPECT_EQ(own.wait_samples, 1);
  EXPECT_EQ(own.cpu_samples, 0);
  const StackCounters& stitched = Stack(worker_tid_, {"lib.py:2", "user.py:12"});
  EXPECT_EQ(stitched.cpu_native_ns, 10 * kMs);
  EXPECT_EQ(stitched.wait_ns + stitched.run_delay_ns, 0);
  // An observation not later than the last one charges nothing more.
  Sample(worker_tid_, SampleKind::kNative, 1 * kMs, 0, Own("lib"), wall);
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(Stack(worker_tid_, {"lib.py:2"}).wait_samples, 1);
}

TEST_F(CpuAggregationTest, CpuTimeFallsInTheTimelineBucketOfTheSamplesWallClock) {
  const int64_t tick = session_->config().tick_ns;
  Sample(main_, SampleKind::kPython, 7 * kMs, 0, Own("a"), session_->config().start_ns + 10 * tick + 1);
  Sample(worker_tid_, SampleKind::kNoThread, 3 * kMs, 0, {},
         session_->config().start_ns + 12 * tick + 1);
  ASSERT_TRUE(Call(user_, "tick_x"));
  const std::vector<aggregate::TimeBuckets::Bucket> buckets = session_->activity().Used();
  ASSERT_GE(buckets.size(), 13u);
  int64_t total = 0;
  for (const auto& b : buckets) total += b.cpu_ns;
  EXPECT_EQ(buckets[10].cpu_ns, 7 * kMs);
  EXPECT_EQ(buckets[12].cpu_ns, 3 * kMs);
  EXPECT_EQ(total, 10 * kMs);
}

TEST_F(CpuAggregationTest, CpuSamplesLeaveWhatEachStackHeldAtThePeakAlone) {
  // A stack a CPU sample created before the peak, a stack with memory sampled on after it,
  // and a stack created after it: each holds at the peak only what was allocated on it then.
  Sample(main_, SampleKind::kPython, 2 * kMs, 0, Own("shared1"));
  ASSERT_TRUE(Call(user_, "tick_x"));  // samples drain before memory events in a tick
  Alloc(main_, 0x1000, 100, Own("a"));
  Peak();
  Alloc(main_, 0x2000, 5, Own("shared1"));
  ASSERT_TRUE(Call(user_, "tick_x"));
  Sample(main_, SampleKind::kPython, 2 * kMs, 0, Own("a"));
  Sample(main_, SampleKind::kPython, 2 * kMs, 0, Own("b"));
  ASSERT_TRUE(Call(user_, "tick_x"));
  Alloc(main_, 0x3000, 30, Own("b"));
  Free(0x1000);
  ASSERT_TRUE(Call(user_, "tick_x"));

  EXPECT_EQ(LiveAtPeak(main_, {"user.py:2"}), 100);
  EXPECT_EQ(Stack(main_, {"user.py:2"}).live_bytes, 0);
  EXPECT_EQ(Stack(main_, {"user.py:2"}).cpu_samples, 1);
  EXPECT_EQ(LiveAtPeak(main_, {"lib.py:2", "user.py:6"}), 0);
  EXPECT_EQ(Stack(main_, {"lib.py:2", "user.py:6"}).live_bytes, 5);
  EXPECT_EQ(LiveAtPeak(main_, {"user.py:4"}), 0);
  EXPECT_EQ(Stack(main_, {"user.py:4"}).live_bytes, 30);
  EXPECT_EQ(LiveAtPeak("user.py:2"), 100);
  EXPECT_EQ(LiveAtPeak("user.py:4"), 0);
}

}  // namespace
}  // namespace peakline::session
