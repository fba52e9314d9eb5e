#include "engine/signal_watch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace peakline::engine {

namespace {

constexpr int kMaxSignal = 65;

struct Watched {
  std::atomic<bool> active{false};
  struct sigaction previous;            // written only while `active` is false
  std::atomic<int64_t> arrived_ns{0};   // first unhandled arrival, 0 = none
  std::atomic<int64_t> kicked_ns{0};    // last re-send
};
Watched g_watched[kMaxSignal];

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void OnSignal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (signo > 0 && signo < kMaxSignal) {
    Watched& w = g_watched[signo];
    int64_t expected = 0;
    w.arrived_ns.compare_exchange_strong(expected, NowNs(), std::memory_order_relaxed);
    if (w.active.load(std::memory_order_acquire)) {
      const struct sigaction& p = w.previous;
      if (p.sa_flags & SA_SIGINFO) {
        if (p.sa_sigaction != nullptr) p.sa_sigaction(signo, info, context);
      } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN && p.sa_handler != nullptr) {
        p.sa_handler(signo);
      }
    }
  }
  errno = saved_errno;
}

void ForgetArrivals() {
  for (Watched& w : g_watched) {
    w.arrived_ns.store(0, std::memory_order_relaxed);
    w.kicked_ns.store(0, std::memory_order_relaxed);
  }
}

}  // namespace

int WatchSignal(int signo) {
  if (signo <= 0 || signo >= kMaxSignal) return EINVAL;
  static const int atfork = pthread_atfork(nullptr, nullptr, ForgetArrivals);
  (void)atfork;
  Watched& w = g_watched[signo];
  struct sigaction current;
  if (sigaction(signo, nullptr, &current) != 0) return errno;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == OnSignal) return 0;
  if (!(current.sa_flags & SA_SIGINFO) &&
      (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    return EINVAL;
  }
  // An arrival not yet handled is kept: a fork child re-watches after installing its own
  // handler, and a SIGTERM that landed in between was recorded here while CPython dropped its
  // own flag (it clears pending signals after fork), so only a re-send delivers it now.
  w.active.store(false, std::memory_order_release);
  w.previous = current;
  w.active.store(true, std::memory_order_release);
  struct sigaction mine = current;  // same mask and flags (CPython: no SA_RESTART)
  mine.sa_flags |= SA_SIGINFO;
  mine.sa_sigaction = OnSignal;
  if (sigaction(signo, &mine, nullptr) != 0) {
    const int err = errno;
    w.active.store(false, std::memory_order_release);
    return err;
  }
  return 0;
}

void SignalHandled(int signo) {
  if (signo <= 0 || signo >= kMaxSignal) return;
  g_watched[signo].arrived_ns.store(0, std::memory_order_relaxed);
  g_watched[signo].kicked_ns.store(0, std::memory_order_relaxed);
}

int KickPendingSignals(pid_t main_tid, int64_t now_ns, const SignalKickPolicy& policy) {
  int kicked = 0;
  for (int signo = 1; signo < kMaxSignal; ++signo) {
    Watched& w = g_watched[signo];
    const int64_t arrived = w.arrived_ns.load(std::memory_order_relaxed);
    if (arrived == 0 || !w.active.load(std::memory_order_acquire)) continue;
    if (now_ns - arrived >= policy.give_up_ns) {
      // The Python handler cannot run: die by the signal, as the program would unprofiled.
      struct sigaction dfl = {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(signo, &dfl, nullptr);
      kill(getpid(), signo);
      continue;
    }
    if (now_ns - arrived < policy.first_after_ns) continue;
    const int64_t last = w.kicked_ns.load(std::memory_order_relaxed);
    if (last != 0 && now_ns - last < policy.retry_ns) continue;
    w.kicked_ns.store(now_ns, std::memory_order_relaxed);
    if (main_tid > 0 && syscall(SYS_tgkill, getpid(), main_tid, signo) == 0) ++kicked;
  }
  return kicked;
}

}  // namespace peakline::engine
