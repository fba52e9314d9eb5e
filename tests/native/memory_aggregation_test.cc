// The GIL-side memory aggregation of a sampling session, fed synthetic events in a known order
// (session_harness.h): what each stack and line held at the peak (the lazy peak epochs of
// aggregate/memory_aggregator.h), and to which main-thread stack the work of other threads is
// charged (SamplingSession::StitchToMain).
#include "session_harness.h"

namespace peakline::session {
namespace {

using Strings = std::vector<std::string>;

class MemoryAggregationTest : public SessionHarness {
 protected:
  void SetUp() override {
    SessionHarness::SetUp();
    ASSERT_NO_FATAL_FAILURE(RecordStacks());
  }
  const pid_t main_ = CurrentTid();
  const Strings a_{"user.py:2"};
  const Strings b_{"user.py:4"};
  const Strings shared1_{"lib.py:2", "user.py:6"};
  const Strings shared2_{"lib.py:4", "user.py:6"};
};

TEST_F(MemoryAggregationTest, LiveAtPeakIsWhatEachStackAndLineHeldWhenThePeakWasReached) {
  Alloc(main_, 0x1000, 100, Own("a"));
  Alloc(main_, 0x2000, 50, Own("b"));
  Alloc(main_, 0x3000, 7, Own("shared1"));
  Peak();
  Free(0x1000);                           // a: 0 now, 100 at the peak
  Alloc(main_, 0x4000, 30, Own("b"));     // b: 80 now, 50 at the peak
  Alloc(main_, 0x5000, 11, Own("shared2"));  // a stack first seen after the peak
  ASSERT_TRUE(Call(user_, "tick_x"));

  EXPECT_EQ(session_->memory()->peak_events(), 1);
  // The lazy snapshot: a stack changed since the peak (epoch 2 began there) saved its value
  // from before the change; one unchanged since (epoch 1) still holds it as its live bytes.
  EXPECT_EQ(Stack(main_, a_).peak_epoch, 2u);
  EXPECT_EQ(Stack(main_, shared1_).peak_epoch, 1u);
  EXPECT_EQ(LiveAtPeak(main_, a_), 100);
  EXPECT_EQ(Stack(main_, a_).live_bytes, 0);
  EXPECT_EQ(Stack(main_, a_).free_bytes, 100);
  EXPECT_EQ(LiveAtPeak(main_, b_), 50);
  EXPECT_EQ(Stack(main_, b_).live_bytes, 80);
  EXPECT_EQ(LiveAtPeak(main_, shared1_), 7);
  EXPECT_EQ(LiveAtPeak(main_, shared2_), 0);
  EXPECT_EQ(Stack(main_, shared2_).live_bytes, 11);
  // Lines: the innermost frame of the user's code; both shared stacks are on user.py:6.
  EXPECT_EQ(LiveAtPeak("user.py:2"), 100);
  EXPECT_EQ(LiveAtPeak("user.py:4"), 50);
  EXPECT_EQ(LiveAtPeak("user.py:6"), 7);
  EXPECT_EQ(Line("user.py:6").live_bytes, 18);
  EXPECT_EQ(session_->memory()->invalid_events(), 0);
}

TEST_F(MemoryAggregationTest, EachStackKnowsTheVarianceOfWhatItHeldAtThePeak) {
  // Small objects: 100 bytes sampled with p = 0.1 stand for 1,000 each, and each adds
  // w (w - s) = 1,000 x 900 to the estimate's variance; a block counted exactly adds 0.
  Alloc(main_, 0x1000, 1000, Own("a"), transport::kDomainPython, 100);
  Alloc(main_, 0x2000, 1000, Own("a"), transport::kDomainPython, 100);
  Alloc(main_, 0x3000, 4096, Own("b"), transport::kDomainNative);
  Peak();
  Free(0x1000);  // after the peak: a's variance now is one block's, at the peak two
  Alloc(main_, 0x4000, 1000, Own("b"), transport::kDomainPython, 400);
  ASSERT_TRUE(Call(user_, "tick_x"));

  EXPECT_EQ(LiveAtPeak(main_, a_), 2000);
  EXPECT_DOUBLE_EQ(LiveAtPeakVariance(main_, a_), 2 * 1000.0 * 900);
  EXPECT_DOUBLE_EQ(Stack(main_, a_).live_variance, 1000.0 * 900);
  EXPECT_EQ(LiveAtPeak(main_, b_), 4096);
  EXPECT_DOUBLE_EQ(LiveAtPeakVariance(main_, b_), 0.0);
  EXPECT_DOUBLE_EQ(Stack(main_, b_).live_variance, 1000.0 * 600);
}

TEST_F(MemoryAggregationTest, ALaterPeakReplacesTheEarlierOneAcrossTicks) {
  Alloc(main_, 0x1000, 100, Own("a"));
  Alloc(main_, 0x2000, 50, Own("b"));
  Peak();  // a 100, b 50
  ASSERT_TRUE(Call(user_, "tick_x"));
  Free(0x1000);
  Alloc(main_, 0x3000, 80, Own("b"));
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(LiveAtPeak(main_, a_), 100);
  EXPECT_EQ(LiveAtPeak(main_, b_), 50);

  Peak();  // a 0, b 130: nothing changes after it
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(session_->memory()->peak_events(), 2);
  EXPECT_EQ(LiveAtPeak(main_, a_), 0);
  EXPECT_EQ(LiveAtPeak(main_, b_), 130);
  EXPECT_EQ(LiveAtPeak("user.py:4"), 130);

  Alloc(main_, 0x4000, 5, Own("a"));  // after the second peak: not part of it
  Free(0x2000);
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(LiveAtPeak(main_, a_), 0);
  EXPECT_EQ(LiveAtPeak(main_, b_), 130);
  EXPECT_EQ(LiveAtPeak("user.py:2"), 0);
  EXPECT_EQ(LiveAtPeak("user.py:4"), 130);
  EXPECT_EQ(Stack(main_, b_).live_bytes, 80);
}

TEST_F(MemoryAggregationTest, AFreeIsChargedToTheStackThatAllocatedTheBlockLastAtItsAddress) {
  Alloc(main_, 0x1000, 100, Own("a"));
  Free(0x9000);                         // never sampled: changes nothing
  Alloc(main_, 0x1000, 40, Own("b"));   // the same address: a's block was freed unseen
  Free(0x1000);
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(Stack(main_, b_).free_bytes, 40);
  EXPECT_EQ(Stack(main_, b_).live_bytes, 0);
  // a's block is forgotten, not charged a free it was never seen to make.
  EXPECT_EQ(Stack(main_, a_).free_bytes, 0);
  EXPECT_EQ(Stack(main_, a_).live_bytes, 100);
}

TEST_F(MemoryAggregationTest, AnotherThreadsAllocationIsChargedToTheMainStackRecordedWithIt) {
  ASSERT_TRUE(Call(user_, "tick_x"));  // the previous tick: the main thread on user.py:8
  // A worker without Python frames allocates while the main thread is on user.py:12 (the hook
  // appends the main thread's stack read then, as AsMain("main") holds it) ...
  Alloc(kWorker, 0x1000, 64, AsMain("main"), transport::kDomainNative);
  ASSERT_TRUE(Call(user_, "tick_y"));  // ... and it is drained with the main thread on user.py:10.
  EXPECT_EQ(AllocStacks(kWorker), (std::vector<Strings>{{"user.py:12"}}));
  EXPECT_EQ(Stack(kWorker, {"user.py:12"}).alloc_native_bytes, 64);
  EXPECT_EQ(Line("user.py:12").live_bytes, 64);
}

TEST_F(MemoryAggregationTest, WithoutTheMainStackOfItsTimeItGoesToTheStackOfThePreviousTick) {
  ASSERT_TRUE(Call(user_, "tick_x"));  // user.py:8
  Alloc(kWorker, 0x1000, 64, {}, transport::kDomainNative);
  ASSERT_TRUE(Call(user_, "tick_y"));  // drained on user.py:10
  EXPECT_EQ(AllocStacks(kWorker), (std::vector<Strings>{{"user.py:8"}}));
}

TEST_F(MemoryAggregationTest, AWorkerInLibraryCodeHasTheMainStackAppendedAsItsCallers) {
  Alloc(kWorker, 0x1000, 64, Concat(Own("lib"), AsMain("main")));
  ASSERT_TRUE(Call(user_, "tick_y"));
  EXPECT_EQ(AllocStacks(kWorker), (std::vector<Strings>{{"lib.py:2", "user.py:12"}}));
  EXPECT_EQ(Line("user.py:12").live_bytes, 64);
}

TEST_F(MemoryAggregationTest, AWorkerInTheUsersCodeAndTheMainThreadAreNeverStitched) {
  Alloc(kWorker, 0x1000, 64, Concat(Own("a"), AsMain("main")));
  Alloc(main_, 0x2000, 32, Own("lib"));
  ASSERT_TRUE(Call(user_, "tick_y"));
  EXPECT_EQ(AllocStacks(kWorker), (std::vector<Strings>{{"user.py:2"}}));
  EXPECT_EQ(AllocStacks(main_), (std::vector<Strings>{{"lib.py:2"}}));
}

}  // namespace
}  // namespace peakline::session
