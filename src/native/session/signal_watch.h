// SignalWatch: makes sure the Python handler of a terminating signal gets to run.
//
// peakline handles SIGTERM in Python (write what was measured, then die by SIGTERM; see
// peakline/cli/run.py and peakline/child.py). CPython's C-level handler only records the
// signal; the Python handler runs when the main thread next checks, and that check happens
// when a blocking call fails with EINTR. If the signal lands just before the main thread
// blocks (a Pool worker about to sem_wait() for its next task), nothing ever wakes it: the
// unprofiled process would have died on the spot, the profiled one hangs forever. Seen: about
// 1 in 100 runs of `with Pool(2, fork)`.
//
// WatchSignal wraps CPython's C handler so that each arrival is time-stamped. The tick thread
// calls KickPendingSignals (without the GIL): while a watched signal has arrived and its Python
// handler has not reported in (SignalHandled), it re-sends the signal to the main thread every
// `retry_ns`, which interrupts whatever call it blocked in. If the handler still has not run
// after `give_up_ns` (the main thread stuck in native code that never returns to Python), the
// process dies by the signal, as it would have unprofiled; that run's profile is lost.
//
// The wrapper is async-signal-safe (one clock read, atomic stores, the chained handler).
#ifndef PEAKLINE_SESSION_SIGNAL_WATCH_H_
#define PEAKLINE_SESSION_SIGNAL_WATCH_H_

#include <sys/types.h>

#include <cstdint>

#include "status/status.h"

namespace peakline::session {

// Wraps the current handler of `signo` (which must be a handler, not SIG_DFL/SIG_IGN).
// Fails with "cannot watch signal N: <strerror>" and the errno value as its code (EINVAL for
// no handler). The wrapper goes away by itself when the program (or CPython) installs another
// handler. A fork child forgets the arrivals its parent recorded.
Status WatchSignal(int signo);
// The Python handler of `signo` has started: no more re-sending.
void SignalHandled(int signo);

struct SignalKickPolicy {
  int64_t first_after_ns = 50'000'000;   // leave the handler this long to run by itself
  int64_t retry_ns = 100'000'000;
  int64_t give_up_ns = 5'000'000'000;
};
// Returns the number of signals re-sent.
int KickPendingSignals(pid_t main_tid, int64_t now_ns, const SignalKickPolicy& policy = {});

}  // namespace peakline::session

#endif  // PEAKLINE_SESSION_SIGNAL_WATCH_H_
