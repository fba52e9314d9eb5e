// The stop of a sampling session (SamplingSession::StopTimers, StopThread, Drain, in the order
// session/profiler.cc's StopProfiler calls them): StopThread runs without the GIL, so a Python
// thread may hold the GIL meanwhile and start a thread, end one, exclude one or snapshot the
// profile. Those calls must find the session stopped (no new thread, no catch-up tick; an
// ending thread is still accounted), and StopThread must touch nothing they touch (the slot
// map, the stopped flag). Driven in an embedded interpreter
// (session_harness.h); the second test is the one ThreadSanitizer watches
// (scripts/sanitize.sh --tsan).
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "session_harness.h"

namespace peakline::session {
namespace {

using transport::SampleKind;

class SessionStopTest : public SessionHarness {
 protected:
  void SetUp() override {
    SessionHarness::SetUp();
    ASSERT_FALSE(Call(user_, "site_a"));  // records "a": user.py:2
  }
  // Whether a summary of thread tid is listed (a slot, live or retired).
  bool Listed(pid_t tid) const {
    for (const ThreadSummary& t : session_->Threads()) {
      if (t.tid == tid) return true;
    }
    return false;
  }

  const pid_t main_ = CurrentTid();
};

TEST_F(SessionStopTest, AfterStopTimersNoThreadGetsATimerAndWhatWasQueuedIsStillCounted) {
  BlockedThread worker;
  cpu::ThreadSlot* slot = session_->SlotForTesting(main_);
  ASSERT_NE(slot, nullptr);
  EXPECT_TRUE(slot->armed);
  Sample(main_, SampleKind::kPython, 3 * kMs, 0, Own("a"));

  session_->StopTimers();
  EXPECT_FALSE(slot->armed);
  session_->ThreadStarted(worker.tid());  // a thread started during the stop: not registered
  EXPECT_FALSE(Listed(worker.tid()));
  EXPECT_EQ(session_->SlotForTesting(worker.tid()), nullptr);
  EXPECT_FALSE(Call(user_, "tick_x"));  // a snapshot's catch-up tick is skipped
  session_->StopThread();               // never started: nothing to join
  session_->Drain(/*measure_wait=*/false);
  EXPECT_EQ(Stack(main_, {"user.py:2"}).cpu_python_ns, 3 * kMs);
}

TEST_F(SessionStopTest, AGilHolderWhileTheTickThreadStopsFindsTheSessionStopped) {
  BlockedThread worker;
  ASSERT_NE(session_->SlotForTesting(worker.tid()), nullptr);
  // A thread that ends while the session stops: it takes the GIL and reports its end, which
  // retires its slot (an erase from the slot map) while StopThread runs.
  std::atomic<pid_t> ending_tid{0};
  std::atomic<bool> go{false};
  std::thread ending([&] {
    ending_tid = CurrentTid();
    while (!go) sched_yield();
    PyGILState_STATE gil = PyGILState_Ensure();
    session_->ThreadFinishing(CurrentTid());
    PyGILState_Release(gil);
  });
  while (ending_tid == 0) sched_yield();
  ASSERT_NE(session_->SlotForTesting(ending_tid), nullptr);
  session_->Start();  // the tick and staging threads
  session_->StopTimers();
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    session_->StopThread();
    stopped = true;
  });
  go = true;
  // What a program's threads may do meanwhile, each time they get the GIL: start a thread,
  // snapshot the profile. The GIL is let go between rounds: the tick thread needs it to
  // finish, the ending thread to end, and StopThread goes on past them while this thread
  // holds the GIL again.
  int rounds = 0;
  while (!stopped) {
    Py_BEGIN_ALLOW_THREADS
    struct timespec pause = {0, 1'000'000};
    nanosleep(&pause, nullptr);
    Py_END_ALLOW_THREADS
    session_->ThreadStarted(worker.tid());
    session_->CatchUp();
    ++rounds;
  }
  Py_BEGIN_ALLOW_THREADS
  stopper.join();
  ending.join();
  Py_END_ALLOW_THREADS
  session_->Exclude(worker.tid());  // retires its slot
  session_->Drain(/*measure_wait=*/false);

  EXPECT_GE(session_->stats().skipped_ticks, rounds);  // every catch-up found it stopped
  EXPECT_FALSE(Listed(worker.tid()));
  EXPECT_TRUE(Listed(ending_tid));  // retired by its end, with its CPU
  EXPECT_EQ(session_->stats().finished_threads, 1);
  cpu::ThreadSlot* main_slot = session_->SlotForTesting(main_);  // registered at Start
  ASSERT_NE(main_slot, nullptr);
  EXPECT_FALSE(main_slot->armed);
}

// Not the stop itself, but the same bookkeeping of thread ids: peakline's own thread that
// ended no longer excludes its id, which the kernel may give to a thread of the program.
TEST_F(SessionStopTest, AnExcludedThreadIsForgottenOnceItHasEnded) {
  auto worker = std::make_unique<BlockedThread>();
  const pid_t tid = worker->tid();
  session_->Exclude(tid);
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_TRUE(session_->ExcludedForTesting(tid));  // alive: still excluded
  EXPECT_FALSE(Listed(tid));
  worker.reset();  // the thread ends; the kernel releases it a moment after the join
  const std::string task = "/proc/self/task/" + std::to_string(tid);
  for (int i = 0; i < 1000 && access(task.c_str(), F_OK) == 0; ++i) usleep(1000);
  ASSERT_TRUE(Call(user_, "tick_x"));
  EXPECT_FALSE(session_->ExcludedForTesting(tid));
}

}  // namespace
}  // namespace peakline::session
