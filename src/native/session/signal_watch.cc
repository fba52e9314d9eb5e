#include "session/signal_watch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "cpu/clock.h"

namespace peakline::session {

namespace {

constexpr int kMaxSignal = 65;

// An arrival is one word, so that a fork child can tell its own from its parent's without a
// reset at fork: a reset in the child's atfork handler would race with a signal landing in
// the child at once (Pool.terminate right after the fork), which CPython then also forgets
// (it clears its pending signals after fork), leaving the child blocked on its queue forever.
// (pid << 42) | (milliseconds since boot & kPeriodMask): pids fit in 22 bits (pid_max <= 2^22),
// 42 bits of milliseconds cover 139 years.
constexpr int kPidShift = 42;
constexpr uint64_t kPeriodMask = (uint64_t{1} << kPidShift) - 1;

struct Watched {
  std::atomic<bool> active{false};
  struct sigaction previous;             // written only while `active` is false
  std::atomic<uint64_t> arrival{0};      // first unhandled arrival in this process, 0 = none
  std::atomic<int64_t> kicked_ns{0};     // last re-send
};
Watched g_watched[kMaxSignal];

uint64_t PidOf(uint64_t arrival) { return arrival >> kPidShift; }

void OnSignal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (signo > 0 && signo < kMaxSignal) {
    Watched& w = g_watched[signo];
    const auto pid = static_cast<uint64_t>(getpid());
    uint64_t seen = w.arrival.load(std::memory_order_relaxed);
    if (seen == 0 || PidOf(seen) != pid) {  // none yet, or the parent's: this one counts
      const uint64_t now_ms = static_cast<uint64_t>(cpu::MonotonicNowNs() / 1'000'000) & kPeriodMask;
      w.arrival.compare_exchange_strong(seen, (pid << kPidShift) | (now_ms == 0 ? 1 : now_ms),
                                        std::memory_order_relaxed);
    }
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

// This process's arrival time in ns, or 0 when none (or only the parent's, in a fork child).
int64_t ArrivedNs(const Watched& w) {
  const uint64_t a = w.arrival.load(std::memory_order_relaxed);
  if (a == 0 || PidOf(a) != static_cast<uint64_t>(getpid())) return 0;
  return static_cast<int64_t>(a & kPeriodMask) * 1'000'000;
}

// In a fork child: the parent's re-send times mean nothing here (its arrivals are told apart
// by pid and left alone, so that an arrival in the child is never lost to a reset).
void ForgetKicks() {
  for (Watched& w : g_watched) w.kicked_ns.store(0, std::memory_order_relaxed);
}

}  // namespace

Status WatchSignal(int signo) {
  auto fail = [signo](int err) {
    return Status::FromErrno(err, "cannot watch signal " + std::to_string(signo));
  };
  if (signo <= 0 || signo >= kMaxSignal) return fail(EINVAL);
  static const int atfork = pthread_atfork(nullptr, nullptr, ForgetKicks);
  (void)atfork;
  Watched& w = g_watched[signo];
  struct sigaction current;
  if (sigaction(signo, nullptr, &current) != 0) return fail(errno);
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == OnSignal) return Status();
  if (!(current.sa_flags & SA_SIGINFO) &&
      (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    return fail(EINVAL);
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
    return fail(err);
  }
  return Status();
}

void SignalHandled(int signo) {
  if (signo <= 0 || signo >= kMaxSignal) return;
  g_watched[signo].arrival.store(0, std::memory_order_relaxed);
  g_watched[signo].kicked_ns.store(0, std::memory_order_relaxed);
}

int KickPendingSignals(pid_t main_tid, int64_t now_ns, const SignalKickPolicy& policy) {
  int kicked = 0;
  for (int signo = 1; signo < kMaxSignal; ++signo) {
    Watched& w = g_watched[signo];
    const int64_t arrived = ArrivedNs(w);
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

}  // namespace peakline::session
