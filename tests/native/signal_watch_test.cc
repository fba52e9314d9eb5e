// session/signal_watch: the arrival of a watched signal is recorded and the previous handler
// still runs; the tick thread's kick re-sends it to a thread until its (Python) handler
// reports in; and a process whose handler never runs dies by the signal.
#include "session/signal_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "cpu/clock.h"

namespace peakline::session {
namespace {

using cpu::MonotonicNowNs;

std::atomic<int> g_calls{0};
void CountingHandler(int) { g_calls.fetch_add(1, std::memory_order_relaxed); }

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void InstallCounting(int signo) {
  struct sigaction sa = {};
  sa.sa_handler = CountingHandler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(signo, &sa, nullptr), 0);
}

TEST(SignalWatch, RefusesDefaultAndIgnoredDispositions) {
  signal(SIGUSR2, SIG_DFL);
  EXPECT_FALSE(WatchSignal(SIGUSR2).ok());
  signal(SIGUSR2, SIG_IGN);
  EXPECT_FALSE(WatchSignal(SIGUSR2).ok());
  EXPECT_FALSE(WatchSignal(0).ok());
  EXPECT_FALSE(WatchSignal(1000).ok());
}

TEST(SignalWatch, ChainsThePreviousHandlerAndKicksUntilHandled) {
  g_calls = 0;
  InstallCounting(SIGUSR1);
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());  // twice: still one wrapper, no self-chaining
  const pid_t me = Tid();
  SignalKickPolicy policy;
  policy.first_after_ns = 1'000'000;
  policy.retry_ns = 1'000'000;
  policy.give_up_ns = 60'000'000'000;

  EXPECT_EQ(KickPendingSignals(me, MonotonicNowNs(), policy), 0);  // nothing arrived yet
  raise(SIGUSR1);
  EXPECT_EQ(g_calls.load(), 1);  // the previous handler ran, once
  // Arrived 0 ms ago: too early to re-send.
  EXPECT_EQ(KickPendingSignals(me, MonotonicNowNs(), policy), 0);
  usleep(3000);
  EXPECT_EQ(KickPendingSignals(me, MonotonicNowNs(), policy), 1);  // re-sent to this thread...
  EXPECT_EQ(g_calls.load(), 2);                           // ...and handled again
  EXPECT_EQ(KickPendingSignals(me, MonotonicNowNs(), policy), 0);  // not before retry_ns
  usleep(3000);
  EXPECT_EQ(KickPendingSignals(me, MonotonicNowNs(), policy), 1);
  EXPECT_EQ(g_calls.load(), 3);
  SignalHandled(SIGUSR1);
  usleep(3000);
  EXPECT_EQ(KickPendingSignals(me, MonotonicNowNs(), policy), 0);  // handled: left alone
  EXPECT_EQ(g_calls.load(), 3);
}

TEST(SignalWatch, TheKickWakesAThreadThatBlockedAfterTheSignal) {
  g_calls = 0;
  InstallCounting(SIGUSR1);
  {
    struct sigaction sa;
    sigaction(SIGUSR1, nullptr, &sa);
    sa.sa_flags &= ~SA_RESTART;  // as CPython installs its handlers
    sigaction(SIGUSR1, &sa, nullptr);
  }
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());
  std::atomic<pid_t> sleeper_tid{0};
  std::atomic<int> woke_with{0};
  std::thread sleeper([&] {
    sleeper_tid = Tid();
    raise(SIGUSR1);  // handled right away; then the thread blocks, unaware
    const int rc = pause();
    woke_with = rc == -1 ? errno : -1;
  });
  while (sleeper_tid.load() == 0) std::this_thread::yield();
  SignalKickPolicy policy;
  policy.first_after_ns = 1'000'000;
  policy.retry_ns = 5'000'000;
  int kicks = 0;
  // A kick that lands before the thread reaches pause() is handled and lost like the first
  // signal; the next one wakes it.
  for (int i = 0; i < 1000 && woke_with.load() == 0; ++i) {
    usleep(2000);
    kicks += KickPendingSignals(sleeper_tid.load(), MonotonicNowNs(), policy);
  }
  sleeper.join();  // would hang without the kick
  EXPECT_EQ(woke_with.load(), EINTR);
  EXPECT_GE(kicks, 1);
  EXPECT_EQ(g_calls.load(), 1 + kicks);
  SignalHandled(SIGUSR1);
}

TEST(SignalWatch, GivesUpAndDiesByTheSignalWhenTheHandlerNeverRuns) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    InstallCounting(SIGTERM);
    if (!WatchSignal(SIGTERM).ok()) _exit(3);
    raise(SIGTERM);
    SignalKickPolicy policy;
    policy.give_up_ns = 1'000'000;
    usleep(5000);
    KickPendingSignals(0, MonotonicNowNs(), policy);  // no main thread to kick: give up
    usleep(100'000);
    _exit(4);  // not reached: SIGTERM's default action ended the process
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(SignalWatch, AForkChildForgetsItsParentsArrivals) {
  g_calls = 0;
  InstallCounting(SIGUSR1);
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());
  raise(SIGUSR1);  // arrived, not handled
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SignalKickPolicy policy;
    policy.first_after_ns = 0;
    // The child never received the signal: nothing to re-send.
    _exit(KickPendingSignals(Tid(), MonotonicNowNs() + 10'000'000'000, policy) == 0 ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  SignalHandled(SIGUSR1);
}


TEST(SignalWatch, AnArrivalSurvivesANewHandlerAndAReWatch) {
  // A fork child: the signal lands after fork (recorded; CPython then clears its own flag),
  // the child installs its own handler over the wrapper and watches again. The arrival must
  // still be re-sent, or the child waits forever on a queue nobody fills.
  g_calls = 0;
  InstallCounting(SIGUSR1);
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());
  raise(SIGUSR1);  // arrived, not handled
  InstallCounting(SIGUSR1);  // the wrapper is replaced...
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());  // ...and installed again
  SignalKickPolicy policy;
  policy.first_after_ns = 0;
  EXPECT_EQ(KickPendingSignals(Tid(), MonotonicNowNs(), policy), 1);
  EXPECT_EQ(g_calls.load(), 2);
  SignalHandled(SIGUSR1);
  EXPECT_EQ(KickPendingSignals(Tid(), MonotonicNowNs() + 1'000'000'000, policy), 0);
}

TEST(SignalWatch, AForkChildKeepsItsOwnArrivalBesideItsParents) {
  g_calls = 0;
  InstallCounting(SIGUSR1);
  ASSERT_TRUE(WatchSignal(SIGUSR1).ok());
  raise(SIGUSR1);  // the parent's arrival, not handled
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    raise(SIGUSR1);  // lands in the child at once (Pool.terminate right after the fork)
    SignalKickPolicy policy;
    policy.first_after_ns = 0;
    _exit(KickPendingSignals(Tid(), MonotonicNowNs() + 2'000'000, policy) == 1 ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  SignalHandled(SIGUSR1);
}

}  // namespace
}  // namespace peakline::session
