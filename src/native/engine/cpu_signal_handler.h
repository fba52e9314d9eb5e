// The CPU-timer signal handler: the hottest path of CPU profiling.
//
// It runs on the sampled thread itself, in signal context, so it is async-signal-safe: no
// malloc, no locks, no Python API that may take a lock or allocate, no stdio. It measures the
// thread's CPU time since its previous sample, asks the installed StackCapture for the
// interrupted Python stack and the Python/native verdict, and pushes one record into the
// thread's ring. If the ring is full the record is dropped ("not sampled") and the CPU time
// carries over to the thread's next sample, so totals stay exact.
#ifndef PEAKLINE_ENGINE_CPU_SIGNAL_HANDLER_H_
#define PEAKLINE_ENGINE_CPU_SIGNAL_HANDLER_H_

#include <cstdint>

#include "engine/sample_record.h"

namespace peakline::engine {

// Fills frames (leaf first, at most max_frames) and header->nframes/kind/flags/invalid_frames
// for the current thread, interrupted at pc. Must be async-signal-safe.
using StackCapture = void (*)(uintptr_t pc, RawFrame* frames, int max_frames,
                              SampleHeader* header);

// Installs the process-wide handler for signo (idempotent). Not signal-safe. Returns 0 or an
// errno value.
[[nodiscard]] int InstallCpuSignalHandler(int signo, StackCapture capture);

// Sampling on/off switch read by the handler (relaxed). While off, the handler returns at
// once; the handler stays installed so that a late, already queued signal is harmless.
void SetCpuSamplingEnabled(bool enabled);

// Spins until no handler invocation is running (call after SetCpuSamplingEnabled(false)).
void WaitForCpuHandlersIdle();

// Fork child only: handler invocations that were running on other threads at fork time
// will never finish here; forget them so WaitForCpuHandlersIdle does not spin forever.
void ResetCpuHandlersAfterFork();

// The signal peakline uses: a real-time signal, so that programs' own SIGPROF/SIGALRM
// handlers are untouched and each timer's expiries are counted, never merged silently.
int CpuSamplingSignal();

}  // namespace peakline::engine

#endif  // PEAKLINE_ENGINE_CPU_SIGNAL_HANDLER_H_
