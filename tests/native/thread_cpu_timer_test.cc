// Per-thread CPU clocks and CPU-time timers (cpu/thread_cpu_timer.h).
#include "cpu/thread_cpu_timer.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cpu/clock.h"
#include "cpu_burn.h"

namespace peakline::cpu {
namespace {

int64_t ClockNs(clockid_t clock) {
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -1;
  return TimespecNs(ts);
}

using testing_support::BurnCpuNs;
using testing_support::OwnCpuNs;

TEST(ThreadCpuClockTest, MatchesPthreadGetcpuclockid) {
  clockid_t expected;
  ASSERT_EQ(pthread_getcpuclockid(pthread_self(), &expected), 0);
  EXPECT_EQ(ThreadCpuClock(CurrentTid()), expected);
  BurnCpuNs(20'000'000);
  // Same clock, read back to back: the values agree to well under a millisecond.
  const int64_t a = ClockNs(expected);
  const int64_t b = ThreadCpuTimeNs(CurrentTid());
  const int64_t c = ClockNs(expected);
  ASSERT_GT(a, 0);
  EXPECT_LE(a, b);
  EXPECT_LE(b, c);
  EXPECT_LT(c - a, 1'000'000);
}

TEST(ThreadCpuClockTest, CurrentTidIsGettid) {
  EXPECT_EQ(CurrentTid(), static_cast<pid_t>(syscall(SYS_gettid)));
  pid_t other = 0;
  std::thread([&] { other = CurrentTid(); }).join();
  EXPECT_NE(other, CurrentTid());
  EXPECT_GT(other, 0);
}

TEST(ThreadCpuClockTest, OtherThreadsClockAdvancesAndDiesWithIt) {
  std::atomic<pid_t> tid{0};
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    tid.store(CurrentTid());
    volatile uint64_t sink = 0;
    while (!stop.load(std::memory_order_relaxed)) sink = sink + 1;
  });
  while (tid.load() == 0) std::this_thread::yield();
  const int64_t t0 = ThreadCpuTimeNs(tid.load());
  ASSERT_GE(t0, 0);
  // Wait (without burning our own CPU) until the spinner has run >= 30 ms more.
  int64_t t1 = t0;
  const int64_t deadline = MonotonicNowNs() + 10'000'000'000;
  while (t1 < t0 + 30'000'000 && MonotonicNowNs() < deadline) {
    usleep(5000);
    t1 = ThreadCpuTimeNs(tid.load());
  }
  EXPECT_GE(t1, t0 + 30'000'000);
  // Our own CPU clock is a different clock: we slept, so we used far less.
  stop.store(true);
  spinner.join();
  // The thread is gone (and kernel tids are not reused this quickly): -1. join() returns when
  // the kernel clears the tid futex, slightly before the task is released, so poll briefly.
  int64_t after = 0;
  for (int i = 0; i < 2000 && (after = ThreadCpuTimeNs(tid.load())) != -1; ++i) usleep(1000);
  EXPECT_EQ(after, -1);
}

TEST(ThreadCpuClockTest, MonotonicNowAdvances) {
  const int64_t a = MonotonicNowNs();
  usleep(2000);
  const int64_t b = MonotonicNowNs();
  EXPECT_GE(b - a, 2'000'000);
  EXPECT_LT(b - a, 5'000'000'000);
}

// --- ArmThreadCpuTimer -----------------------------------------------------------------------

// What the test handler records per timer. The handler only accepts sival pointers that are
// registered here, so a wrong si_value shows up as `g_unknown_sival`, not as a crash.
struct TimerCounter {
  pid_t tid = 0;                     // the thread the timer measures
  std::atomic<int64_t> expiries{0};  // sum of 1 + si_overrun
  std::atomic<int64_t> signals{0};
  std::atomic<int64_t> wrong_thread{0};  // delivered to another thread than tid
  std::atomic<int64_t> wrong_code{0};    // si_code != SI_TIMER
};

constexpr int kMaxCounters = 8;
std::atomic<TimerCounter*> g_counters[kMaxCounters];
std::atomic<int64_t> g_unknown_sival{0};

void TestTimerHandler(int, siginfo_t* info, void*) {
  const int saved_errno = errno;
  auto* c = static_cast<TimerCounter*>(info->si_value.sival_ptr);
  bool known = false;
  for (auto& slot : g_counters) known |= (c != nullptr && slot.load() == c);
  if (!known) {
    g_unknown_sival.fetch_add(1);
  } else {
    c->signals.fetch_add(1);
    c->expiries.fetch_add(1 + info->si_overrun);
    if (info->si_code != SI_TIMER) c->wrong_code.fetch_add(1);
    if (static_cast<pid_t>(syscall(SYS_gettid)) != c->tid) c->wrong_thread.fetch_add(1);
  }
  errno = saved_errno;
}

// A spare real-time signal: peakline itself uses SIGRTMIN + 4.
int TestSignal() { return SIGRTMIN + 7; }

void InstallTestHandler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = TestTimerHandler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(TestSignal(), &sa, nullptr), 0);
}

void Register(int i, TimerCounter* c) { g_counters[i].store(c); }

constexpr int64_t kIntervalNs = 10'000'000;  // 10 ms

// CPU-timer expiries are detected only at a scheduler tick that finds the thread running
// (then counted, with si_overrun for the ones missed). On an oversubscribed machine that can
// lag by many intervals: on the 2-vCPU dev VM with two extra CPU hogs, a 200 ms run saw 11-19
// of its 20 expiries by the time it stopped, the rest still pending. Tests that need a
// minimum number of expiries therefore burn until they have arrived (with a CPU cap, so a
// timer that never fires still fails), and check the count against the CPU time actually
// burned by then.
void BurnUntil(const std::atomic<int64_t>& count, int64_t want, int64_t min_ns, int64_t cap_ns) {
  const int64_t start = OwnCpuNs();
  BurnCpuNs(min_ns);
  while (count.load() < want && OwnCpuNs() - start < cap_ns) BurnCpuNs(1'000'000);
}

TEST(ArmThreadCpuTimerTest, DeliversSivalToTheArmedThread) {
  InstallTestHandler();
  static TimerCounter counter;  // static: a late signal must never see a dead object
  counter.tid = CurrentTid();
  Register(0, &counter);
  timer_t timer;
  ASSERT_TRUE(ArmThreadCpuTimer(CurrentTid(), TestSignal(), &counter, kIntervalNs, kIntervalNs,
                                &timer)
                  .ok());
  const int64_t start = OwnCpuNs();
  BurnUntil(counter.expiries, 5, 50'000'000, 3'000'000'000);
  const int64_t burned = OwnCpuNs() - start;
  ASSERT_EQ(timer_delete(timer), 0);
  EXPECT_GE(counter.expiries.load(), 5);
  EXPECT_LE(counter.expiries.load(), burned / kIntervalNs + 1);
  EXPECT_EQ(counter.wrong_code.load(), 0);
  EXPECT_EQ(counter.wrong_thread.load(), 0);
  EXPECT_EQ(g_unknown_sival.load(), 0);
}

TEST(ArmThreadCpuTimerTest, SleepingThreadGetsNoSignals) {
  InstallTestHandler();
  static TimerCounter counter;
  counter.tid = CurrentTid();
  Register(0, &counter);
  timer_t timer;
  ASSERT_TRUE(ArmThreadCpuTimer(CurrentTid(), TestSignal(), &counter, kIntervalNs, kIntervalNs,
                                &timer)
                  .ok());
  usleep(100'000);  // 100 ms of wall time, ~no CPU time: the CPU clock barely moves
  ASSERT_EQ(timer_delete(timer), 0);
  EXPECT_EQ(counter.expiries.load(), 0);
}

TEST(ArmThreadCpuTimerTest, ZeroFirstExpiryStillArms) {
  InstallTestHandler();
  static TimerCounter counter;
  counter.tid = CurrentTid();
  Register(0, &counter);
  timer_t timer;
  ASSERT_TRUE(ArmThreadCpuTimer(CurrentTid(), TestSignal(), &counter, kIntervalNs, 0, &timer).ok());
  BurnUntil(counter.expiries, 2, 0, 3'000'000'000);
  ASSERT_EQ(timer_delete(timer), 0);
  EXPECT_GE(counter.expiries.load(), 2);
}

TEST(ArmThreadCpuTimerTest, SignalIsDirectedAtTheThreadNotTheProcess) {
  // The burning thread blocks the signal; the main thread (waiting in join) does not. A
  // process-directed signal would be handed to the main thread at once; a thread-directed one
  // stays pending on the burner until it unblocks.
  InstallTestHandler();
  static TimerCounter counter;
  Register(0, &counter);
  int arm_err = -1;
  int64_t while_blocked = -1;
  std::thread burner([&] {
    counter.tid = CurrentTid();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, TestSignal());
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    timer_t timer;
    arm_err = ArmThreadCpuTimer(CurrentTid(), TestSignal(), &counter, kIntervalNs, kIntervalNs,
                                &timer)
                  .code();
    if (arm_err != 0) return;
    // Burn until the kernel has queued the expiry on this thread (pending while blocked).
    const int64_t start = OwnCpuNs();
    sigset_t pending;
    do {
      BurnCpuNs(5'000'000);
      sigpending(&pending);
    } while (!sigismember(&pending, TestSignal()) && OwnCpuNs() - start < 3'000'000'000);
    BurnCpuNs(30'000'000);  // more expiries while the first is still queued: overruns
    while_blocked = counter.expiries.load();
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // the pending signal is delivered here
    timer_delete(timer);
  });
  burner.join();
  ASSERT_EQ(arm_err, 0);
  EXPECT_EQ(while_blocked, 0);
  EXPECT_EQ(counter.wrong_thread.load(), 0);
  // One queued signal whose si_overrun counts the expiries that happened meanwhile (maybe one
  // more if the timer fires again between the unblock and timer_delete).
  EXPECT_GE(counter.signals.load(), 1);
  EXPECT_LE(counter.signals.load(), 2);
  EXPECT_GE(counter.expiries.load(), 1);
}

TEST(ArmThreadCpuTimerTest, FailsForADeadThread) {
  pid_t dead = 0;
  std::thread([&] { dead = CurrentTid(); }).join();
  // join() returns when the kernel clears the thread's tid word, before the exiting task is
  // released: for a moment its CPU clock still resolves (a CI run armed a timer on it). Wait
  // until /proc no longer lists it.
  const std::string task = "/proc/self/task/" + std::to_string(dead);
  for (int i = 0; i < 1000 && access(task.c_str(), F_OK) == 0; ++i) usleep(1000);
  ASSERT_NE(access(task.c_str(), F_OK), 0) << "thread " << dead << " still listed after 1 s";
  timer_t timer;
  const Status armed =
      ArmThreadCpuTimer(dead, TestSignal(), nullptr, kIntervalNs, kIntervalNs, &timer);
  EXPECT_FALSE(armed.ok());
  EXPECT_NE(armed.code(), 0) << armed.message();
  if (armed.ok()) timer_delete(timer);
}

// Three threads burn CPU in the ratio 4:2:1, each with a timer on its own CPU clock. Each
// thread's expiry count (1 + si_overrun per signal) must match its own CPU time / interval.
//
// Tolerance: the kernel advances a periodic CPU timer's deadline by whole intervals and counts
// the ones it detects late as overruns, so lag does not accumulate: after T ns of CPU the
// count is floor(T / I) minus the expiries not yet detected (one tick, <= 4 ms at HZ=250, on
// an idle machine), and never more (expiries are never early). The smallest thread runs
// >= 0.3 s = 30 intervals, so on an idle machine the error is <= 2/30 = 6.7%; we allow 20% + 1
// expiry, > 3x that. On a loaded machine detection can lag by many intervals (see BurnUntil),
// so each thread, after its share, keeps burning (up to +50%) until its count has caught up
// to 90% of its CPU time, then stops and compares with the CPU time burned by then. A timer
// that runs slow (e.g. at twice the interval) never catches up and fails; one that runs fast
// fails the upper bound. The error is systematic, not sampling noise, so the false-failure
// odds are those of a stall longer than the catch-up window (> 0.15 s of CPU behind for the
// smallest thread): not seen in 12 runs with two extra CPU hogs on the 2-vCPU dev VM, nor in
// the plain/ASan/TSan runs.
TEST(ArmThreadCpuTimerTest, CountsAreProportionalToEachThreadsCpuTime) {
  InstallTestHandler();
  constexpr int kThreads = 3;
  constexpr int64_t kUnitNs = 300'000'000;  // 0.3 s for the smallest thread
  const int weights[kThreads] = {4, 2, 1};
  static TimerCounter counters[kThreads];
  int64_t burned[kThreads] = {};
  int arm_err[kThreads] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Register(t, &counters[t]);
    threads.emplace_back([&, t] {
      counters[t].tid = CurrentTid();
      timer_t timer;
      const int64_t start = OwnCpuNs();
      arm_err[t] = ArmThreadCpuTimer(CurrentTid(), TestSignal(), &counters[t], kIntervalNs,
                                     kIntervalNs, &timer)
                       .code();
      if (arm_err[t] != 0) return;
      BurnCpuNs(weights[t] * kUnitNs);
      // Catch-up window (see above): until expiries >= 90% of CPU time / interval.
      const int64_t cap = start + weights[t] * kUnitNs * 3 / 2;
      while (counters[t].expiries.load() * kIntervalNs < (OwnCpuNs() - start) * 9 / 10 &&
             OwnCpuNs() < cap) {
        BurnCpuNs(1'000'000);
      }
      burned[t] = OwnCpuNs() - start;
      timer_delete(timer);
    });
  }
  for (auto& th : threads) th.join();

  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(arm_err[t], 0) << std::strerror(arm_err[t]);
    const double expected = static_cast<double>(burned[t]) / kIntervalNs;
    const double got = static_cast<double>(counters[t].expiries.load());
    SCOPED_TRACE(testing::Message() << "thread " << t << " burned " << burned[t] / 1e6
                                    << " ms CPU, " << counters[t].signals.load()
                                    << " signals, " << got << " expiries");
    EXPECT_GE(burned[t], weights[t] * kUnitNs);
    EXPECT_LE(got, expected + 1.0) << "more expiries than CPU time allows";
    EXPECT_GE(got, expected * 0.8 - 1.0) << "expiries missing";
    EXPECT_EQ(counters[t].wrong_thread.load(), 0) << "signal delivered to another thread";
    EXPECT_EQ(counters[t].wrong_code.load(), 0);
  }
  // And the 4:2:1 split itself (the point of per-thread timers): each thread's count ratio to
  // the smallest thread's equals their CPU-time ratio (nominally 4 and 2) within 25%.
  const double c2 = counters[2].expiries.load();
  ASSERT_GT(c2, 0);
  for (int t = 0; t < 2; ++t) {
    const double cpu_ratio = static_cast<double>(burned[t]) / burned[2];
    EXPECT_NEAR(counters[t].expiries.load() / c2, cpu_ratio, 0.25 * cpu_ratio) << "thread " << t;
    EXPECT_NEAR(cpu_ratio, static_cast<double>(weights[t]) / weights[2], 0.5 * weights[t]) << "thread " << t;
  }
  EXPECT_EQ(g_unknown_sival.load(), 0);
}

}  // namespace
}  // namespace peakline::cpu
