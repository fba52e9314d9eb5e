// Per-thread CPU-time timers: a POSIX timer on one thread's CPU clock that delivers a signal
// to that very thread (SIGEV_THREAD_ID). Samples are then proportional to each thread's own
// CPU time; a process-wide setitimer mis-attributes across threads by up to 2x.
//
// Thread safety: every function may be called from any thread; none is called from a signal
// handler.
#ifndef PEAKLINE_CPU_THREAD_CPU_TIMER_H_
#define PEAKLINE_CPU_THREAD_CPU_TIMER_H_

#include <sys/types.h>
#include <time.h>

#include <cstdint>

#include "status/status.h"

namespace peakline::cpu {

// The CPU-time clock of any thread of this process, by kernel thread id (Linux encoding, the
// same one glibc's pthread_getcpuclockid uses).
inline clockid_t ThreadCpuClock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
}

// CPU time consumed so far by thread tid, in ns; -1 if the thread no longer exists.
int64_t ThreadCpuTimeNs(pid_t tid);

// Time thread tid has spent runnable but not running (the kernel's run delay:
// /proc/self/task/TID/schedstat, second field), in ns; -1 if unreadable (thread gone, or a
// kernel without schedstat). Opens, reads and closes the file: a few microseconds.
int64_t ThreadRunDelayNs(pid_t tid);

pid_t CurrentTid();

// Creates and arms a timer on thread tid's CPU clock that sends signo to tid every
// interval_ns of that thread's CPU time, the first expiry after first_ns. sival is handed to
// the handler in siginfo->si_value. A failure carries the errno value of timer_create or
// timer_settime as its code.
Status ArmThreadCpuTimer(pid_t tid, int signo, void* sival, int64_t interval_ns,
                         int64_t first_ns, timer_t* out);

}  // namespace peakline::cpu

#endif  // PEAKLINE_CPU_THREAD_CPU_TIMER_H_
