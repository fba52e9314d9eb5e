// Code-object lifetime in a sampling session (python/code_resolver.h, InstallCodeDeallocHook;
// SamplingSession::BeforeCodeFreed): queued memory events and CPU samples hold raw
// code-object pointers, so a code object that dies is kept until the records that may name it
// are resolved. Driven by hand in an embedded interpreter (session_harness.h) with the
// deallocation hook installed.
#include <algorithm>

#include "session_harness.h"

namespace peakline::session {
namespace {

using Strings = std::vector<std::string>;
using transport::SampleKind;

class CodeLifetimeTest : public SessionHarness {
 protected:
  void SetUp() override {
    SessionHarness::SetUp();
    freed_.clear();
    python::InstallCodeDeallocHook(BeforeFree);
  }
  void TearDown() override {
    python::UninstallCodeDeallocHook();
    SessionHarness::TearDown();
  }

  // What session/profiler.cc installs, less the main-stack cache (not used here).
  static bool BeforeFree(PyObject* code) {
    freed_.push_back(code);
    return current_ != nullptr && current_->BeforeCodeFreed(code);
  }
  static bool WasFreed(const void* code) {
    return std::find(freed_.begin(), freed_.end(), code) != freed_.end();
  }

  static inline std::vector<const void*> freed_;  // every code object the hook saw die
  const pid_t main_ = CurrentTid();
  BlockedThread worker_;  // a thread other than the main one, for CPU samples
};

TEST_F(CodeLifetimeTest, AnEventNamingACodeObjectThatDiesResolvesBeforeTheObjectIsFreed) {
  ASSERT_FALSE(Call(harness_, "make_code", "(ss)", kDoomedPy, "doomed"));
  const void* doomed = Own("doomed").at(0).code;
  Alloc(main_, 0x1000, 64, Own("doomed"));  // queued, naming doomed() at its line 2
  ASSERT_FALSE(Call(harness_, "free_codes"));  // its last reference goes
  ASSERT_TRUE(WasFreed(doomed));
  ASSERT_TRUE(Call(harness_, "freed"));
  EXPECT_EQ(AllocStacks(main_), (std::vector<Strings>{{"dynamic.py:2", "harness.py:6"}}));
  EXPECT_EQ(Line("dynamic.py:2").live_bytes, 64);
  EXPECT_EQ(session_->memory()->invalid_events(), 0);
  EXPECT_EQ(session_->stats().deferred_code_frees, 0);  // nothing else was under way
}

TEST_F(CodeLifetimeTest, ACodeObjectThatDiesWhileATickIsSuspendedInPythonIsKeptUntilItEnds) {
  ASSERT_FALSE(Call(harness_, "make_code", "(ss)", kDoomedPy, "doomed"));
  ASSERT_FALSE(Call(user_, "site_a"));
  // In the tick, the first event asks the file filter (Python) about user.py, and the filter
  // drops doomed()'s last reference; the second event, behind it, names doomed().
  Alloc(main_, 0x1000, 10, Own("a"));
  Alloc(main_, 0x2000, 64, Own("doomed"));
  ASSERT_FALSE(Call(harness_, "free_codes_at_next_filter_call"));
  TakeLog();
  ASSERT_TRUE(Call(user_, "tick_x"));
  // Deallocated only once the tick is done with the event that names it.
  EXPECT_EQ(TakeLog(), (Strings{"asked user.py", "asked dynamic.py", "freed doomed"}));
  EXPECT_EQ(session_->stats().deferred_code_frees, 1);
  EXPECT_TRUE(WasFreed(Own("doomed").at(0).code));
  EXPECT_TRUE(Call(harness_, "freed"));  // by the end of the tick
  EXPECT_EQ(AllocStacks(main_),
            (std::vector<Strings>{{"user.py:2"}, {"dynamic.py:2", "harness.py:6"}}));
  EXPECT_EQ(session_->memory()->invalid_events(), 0);
}

TEST_F(CodeLifetimeTest, AnEventTakenDuringTheDeallocationLosesTheDeadFrameOnly) {
  // The deallocation itself queues an event whose stack names the dying doomed() (as a sample
  // taken while the dying frame is still a thread's current one would): that frame must not
  // be resolved through the freed object; the rest of its stack is.
  ASSERT_FALSE(Call(harness_, "make_code", "(ssi)", kDoomedPy, "doomed", 1));
  ASSERT_FALSE(Call(harness_, "free_codes"));
  ASSERT_TRUE(Call(harness_, "freed"));
  EXPECT_EQ(AllocStacks(main_), (std::vector<Strings>{{"harness.py:6"}}));
  EXPECT_EQ(session_->memory()->invalid_events(), 1);
  // Drained within the deallocation's own operation: nothing of it is left for later.
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_EQ(AllocStacks(main_), (std::vector<Strings>{{"harness.py:6"}}));
  EXPECT_EQ(session_->memory()->invalid_events(), 1);
}

TEST_F(CodeLifetimeTest, ASampleNamingACodeObjectThatDiesResolvesBeforeTheObjectIsFreed) {
  ASSERT_FALSE(Call(harness_, "make_code", "(ss)", kDoomedPy, "doomed"));
  const void* doomed = Own("doomed").at(0).code;
  Sample(main_, SampleKind::kPython, 3 * kMs, 0, Own("doomed"));  // queued, naming doomed()
  ASSERT_FALSE(Call(harness_, "free_codes"));  // its last reference goes
  ASSERT_TRUE(WasFreed(doomed));
  ASSERT_TRUE(Call(harness_, "freed"));
  // Drained by the deallocation's own operation, before the object went.
  EXPECT_EQ(CpuStacks(main_), (std::vector<Strings>{{"dynamic.py:2", "harness.py:6"}}));
  EXPECT_EQ(session_->stats().invalid_frames, 0);
  EXPECT_EQ(session_->stats().deferred_code_frees, 0);  // nothing else was under way
}

TEST_F(CodeLifetimeTest, ACodeObjectThatDiesWhileATickIsSuspendedIsKeptUntilItsSamplesResolve) {
  ASSERT_FALSE(Call(harness_, "make_code", "(ss)", kDoomedPy, "doomed"));
  ASSERT_FALSE(Call(user_, "site_a"));
  // In the tick, the worker's first sample asks the file filter (Python) whether its stack
  // is the user's (StitchToMain), and the filter drops doomed()'s last reference; the second
  // sample, behind it, names doomed().
  Sample(worker_.tid(), SampleKind::kPython, 2 * kMs, 0, Own("a"));
  Sample(worker_.tid(), SampleKind::kPython, 4 * kMs, 0, Own("doomed"));
  ASSERT_FALSE(Call(harness_, "free_codes_at_next_filter_call"));
  TakeLog();
  ASSERT_TRUE(Call(user_, "tick_x"));
  const Strings log = TakeLog();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(), "asked user.py");
  EXPECT_EQ(log.back(), "freed doomed");  // once the tick was done with the sample naming it
  EXPECT_EQ(session_->stats().deferred_code_frees, 1);
  EXPECT_TRUE(Call(harness_, "freed"));
  EXPECT_EQ(CpuStacks(worker_.tid()),
            (std::vector<Strings>{{"user.py:2"}, {"dynamic.py:2", "harness.py:6"}}));
  EXPECT_EQ(Stack(worker_.tid(), {"dynamic.py:2", "harness.py:6"}).cpu_python_ns, 4 * kMs);
  EXPECT_EQ(session_->stats().invalid_frames, 0);
}

TEST_F(CodeLifetimeTest, ASampleTakenDuringTheDeallocationLosesTheDeadFrameOnly) {
  // The deallocation itself queues a sample whose stack names the dying doomed(): that frame
  // must not be resolved through the freed object; the rest of its stack is.
  ASSERT_FALSE(Call(harness_, "make_code", "(ssii)", kDoomedPy, "doomed", 0, 1));
  ASSERT_FALSE(Call(harness_, "free_codes"));
  ASSERT_TRUE(Call(harness_, "freed"));
  EXPECT_EQ(CpuStacks(main_), (std::vector<Strings>{{"harness.py:6"}}));
  EXPECT_EQ(session_->stats().invalid_frames, 1);
}

}  // namespace
}  // namespace peakline::session
