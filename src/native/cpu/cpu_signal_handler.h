// The CPU-timer signal handler: the hottest path of CPU profiling.
//
// It runs on the sampled thread itself, in signal context, so it is async-signal-safe: no
// malloc, no locks, no Python API that may take a lock or allocate, no stdio. It measures the
// thread's CPU time since its previous sample, asks the installed StackCapture for the
// interrupted Python stack and the Python/native verdict, and pushes one record into the
// thread's ring. If the ring is full the record is dropped ("not sampled") and the CPU time
// carries over to the thread's next sample, so totals stay exact.
//
// The sampling signal belongs to the program too. peakline picks a real-time signal nobody
// uses (CpuSamplingSignal), but the program may still install a handler for that number, reset
// it to SIG_DFL with every other signal, or send it to itself. So the program's sigaction
// calls for that number are redirected here (hooks/process_hooks.h) and recorded as the
// program's disposition (ProgramSignalAction) without touching peakline's handler, which
// therefore stays installed. The handler tells its own timer expiries (si_code SI_TIMER and a
// si_value token that only CpuTickValue hands out) from every other arrival of the signal,
// and passes the others on to the program's disposition: its handler (with its sa_mask and
// SA_RESETHAND/SA_NODEFER), nothing for SIG_IGN, death by the signal for SIG_DFL. The
// program's handler never sees a tick.
#ifndef PEAKLINE_CPU_CPU_SIGNAL_HANDLER_H_
#define PEAKLINE_CPU_CPU_SIGNAL_HANDLER_H_

#include <signal.h>

#include <cstdint>

#include "status/status.h"
#include "transport/sample_record.h"

namespace peakline::cpu {

struct ThreadSlot;

// Fills frames (leaf first, at most max_frames) and header->nframes/kind/flags/invalid_frames
// for the current thread, interrupted at pc. Must be async-signal-safe.
using StackCapture = void (*)(uintptr_t pc, transport::RawFrame* frames, int max_frames,
                              transport::SampleHeader* header);

// Installs the process-wide handler for signo (idempotent: the first call fixes the signal for
// the life of the process; a later call with another signo fails with EBUSY). The disposition
// signo had before becomes the program's (see above). Not signal-safe. A failure says
// "cannot install the sampling signal handler: <strerror>", with the errno value as its code.
Status InstallCpuSignalHandler(int signo, StackCapture capture);

// Sampling on/off switch read by the handler (relaxed). While off, the handler returns at
// once; the handler stays installed so that a late, already queued signal is harmless.
void SetCpuSamplingEnabled(bool enabled);

// Gives the sampling signal back to the program (peakline attach, when it detaches): applies
// the program's recorded disposition (ProgramSignalAction) to the kernel and forgets the
// signal, so that sigaction calls for it go to libc again and the next session picks a
// signal afresh. Only with sampling off and every timer deleted; a tick already queued for a
// thread would meet the program's disposition (SIG_DFL ends the process), so it first waits,
// up to wait_ms, until no thread of the process has the signal pending (/proc/self/task).
// Fails with code EBUSY (handler kept) if one still has, or with the errno value of a failed
// sigaction. Not signal-safe.
Status ReleaseCpuSignalHandler(int wait_ms);

// Spins until no handler invocation is running (call after SetCpuSamplingEnabled(false)).
void WaitForCpuHandlersIdle();

// Fork child only: handler invocations that were running on other threads at fork time
// will never finish here; forget them so WaitForCpuHandlersIdle does not spin forever.
void ResetCpuHandlersAfterFork();

// The signal peakline samples with: once the handler is installed, its signal; before that,
// the highest real-time signal (SIGRTMAX downwards) that has no handler, is not ignored and is
// not blocked in the calling thread; -1 if every one is taken. A real-time signal, so that the
// program's SIGPROF/SIGALRM handlers are untouched and each timer's expiries are counted,
// never merged silently.
int CpuSamplingSignal();

// The si_value a sampling timer for `slot` must carry: the handler takes a signal for a tick
// only with si_code SI_TIMER and a value from here. Registers the slot for the life of the
// process (slots are never freed). Not signal-safe. nullptr when the registry is full (65,536
// distinct slots).
void* CpuTickValue(ThreadSlot* slot);

// --- The program's view of the sampling signal (async-signal-safe) --------------------------

// True once the handler is installed and signo is the sampling signal.
bool IsCpuSamplingSignal(int signo);
// sigaction() on the sampling signal, as the program sees it: stores *act (if not null) as the
// program's disposition, reports the previous one in *old (if not null). Never changes the
// kernel's disposition.
void ProgramSignalAction(const struct sigaction* act, struct sigaction* old);

struct CpuSignalStatus {
  int signo;              // -1 before the handler is installed
  bool handler_intact;    // the kernel's disposition is still peakline's handler
  uint64_t forwarded;     // arrivals passed on to the program's disposition
};
// Not signal-safe (reads the kernel's disposition).
CpuSignalStatus GetCpuSignalStatus();

}  // namespace peakline::cpu

#endif  // PEAKLINE_CPU_CPU_SIGNAL_HANDLER_H_
