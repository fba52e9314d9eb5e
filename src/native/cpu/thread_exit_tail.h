// The CPU a thread spends after it announced its end (SamplingSession::ThreadFinishing): the
// rest of threading's bootstrap, the interpreter tearing the thread's state down, and other
// libraries' thread-exit destructors. No sample sees it (the thread blocked its sampling
// signal when it announced its end, and it is gone before the next tick could read its
// clock): ~0.07 ms per thread with the GIL, ~0.25 ms on a free-threaded build, a tenth of the
// CPU of a program whose threads live ~1 ms each.
//
// The ending thread arms a thread-specific-data destructor (ArmExitTail), which runs after
// the interpreter has finished with the thread; it reads the thread's CPU clock once more and
// leaves the difference in a fixed table that the session's owner empties (TakeExitTails)
// and charges where it charged the thread's end.
//
// Thread safety: ArmExitTail on the ending thread; the destructor on that thread as it exits
// (no allocation, no lock: atomics on a static table); TakeExitTails and
// ForgetExitTailsAfterFork by one thread at a time (the session's owner, the fork child).
#ifndef PEAKLINE_CPU_THREAD_EXIT_TAIL_H_
#define PEAKLINE_CPU_THREAD_EXIT_TAIL_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace peakline::cpu {

// What one thread ran after its announced end.
struct ExitTail {
  pid_t tid;
  uint32_t session;    // the session that was told of the end (ArmExitTail)
  int64_t cpu_ns;      // CPU time from the announced end to the destructor
  int64_t system_ns;   // of which in the kernel; -1 if not known
};

// On the ending thread: its CPU and system time at its announced end (system -1: unknown).
// Its exit then leaves one ExitTail for `session`. False if the destructor could not be set
// (the tail is then not measured).
bool ArmExitTail(uint32_t session, int64_t cpu_ns, int64_t system_ns);

// Moves up to `max` tails left so far into `out`, returns how many. Tails are left in the
// order threads exit, whatever their session; the caller drops those of other sessions.
size_t TakeExitTails(ExitTail* out, size_t max);

// Tails the table had no room for (their thread's CPU after its end is not counted).
uint64_t DroppedExitTails();

// In a fork child: the parent's tails are the parent's.
void ForgetExitTailsAfterFork();

}  // namespace peakline::cpu

#endif  // PEAKLINE_CPU_THREAD_EXIT_TAIL_H_
