// The profiling session of the process (one at a time), as the binding drives it: start it
// (CPU sampling always; memory hooks and GPU polling when asked), collect what it measured,
// stop it, and keep it consistent across threads and fork. StartProfiler builds the
// session/sampling_session.h object and installs the signal handler, the hooks and the
// code-object deallocation hook around it; StopProfiler takes them out in reverse order.
// Every function is called from Python with the GIL held (PEAKLINE_REQUIRES: python/gil.h).
// The binding also calls a few things outside this file directly (session/signal_watch.h,
// cpu/native_thread_ids.h, the dynamic-code locator in python/code_resolver.h, attach/).
#ifndef PEAKLINE_SESSION_PROFILER_H_
#define PEAKLINE_SESSION_PROFILER_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "python/gil.h"
#include "status/status.h"
#include "sync/thread_annotations.h"

namespace peakline::session {

struct ProfilerConfig {
  int64_t cpu_interval_ns = 10'000'000;
  int64_t tick_ns = 20'000'000;
  bool sample_native_threads = true;
  pid_t main_tid = 0;
  // call_opcodes[op]: op calls into a callable (CALL, PRECALL, CALL_FUNCTION_EX, and their
  // specialised forms). Interpreter time under such an op is native time (a C builtin such as
  // sorted() is running); under any other op it is Python time. Computed by Python from the
  // `dis`/`opcode` tables of the running interpreter.
  std::array<bool, 256> call_opcodes{};
  // Memory: allocation hooks, Python-domain wrappers and copy sampling.
  bool memory = false;
  int64_t memory_sampling_interval_bytes = 512 * 1024;
  int64_t copy_sampling_interval_bytes = 2 * 1024 * 1024;
  void* file_filter = nullptr;  // PyObject*: callable(filename) -> bool (borrowed)
  // GPU: NVML poller + PyTorch probe (gpu/gpu_aggregator.h; docs/gpu.md).
  bool gpu = false;
  void* torch_probe = nullptr;  // PyObject*: callable() -> None | (allocated, reserved) (borrowed)
};

// Plain data handed to the binding; shape documented in docs/internals-raw-samples.md.
struct Snapshot {
  struct Frame {
    std::string file, function;  // co_filename, co_qualname (3.10: co_name)
    int first_lineno, lineno;
  };
  std::vector<Frame> frames;  // interned: a frame's id is its index
  struct Stack {
    pid_t tid;
    std::vector<uint32_t> frames;  // leaf first
    int64_t cpu_python_ns, cpu_native_ns, cpu_system_ns, wait_ns, cpu_samples, wait_samples;
    int64_t run_delay_ns;
  };
  std::vector<Stack> stacks;
  struct Thread {
    pid_t tid;
    bool python;
    int64_t cpu_ns, wait_ns, run_delay_ns;
  };
  std::vector<Thread> threads;
  std::vector<std::pair<std::string, int64_t>> stats;
  // When the process used its CPU and which frame its main thread was on (time_buckets.h):
  // buckets of activity_width_ns from the session's start; frame -1 = no reported frame.
  int64_t activity_width_ns = 0;
  std::vector<std::pair<int64_t, int64_t>> activity;  // (cpu_ns, frame id or -1)
  struct MemoryStack {  // parallel to `stacks`
    int64_t alloc_python_bytes, alloc_native_bytes, free_bytes, live_bytes, live_at_peak_bytes,
        copy_bytes, alloc_samples;
    double live_at_peak_variance;  // bytes^2 (aggregate/stack_table.h)
    double live_variance;          // bytes^2: of live_bytes (now, or at the session's end)
  };
  std::vector<MemoryStack> memory_stacks;
  struct MemoryLine {
    std::string file;
    int lineno;
    int64_t live_bytes, live_at_peak_bytes;
    std::vector<std::pair<int64_t, int64_t>> timeline;  // (ns since start, bytes)
  };
  bool memory = false;
  std::vector<MemoryLine> memory_lines;
  std::vector<std::pair<int64_t, int64_t>> timeline;
  std::vector<std::pair<std::string, int64_t>> memory_stats;
  // GPU: present when gpu_requested; gpu_stacks parallel to `stacks` when gpu_measured.
  struct GpuStack {
    int64_t util_ns, peak_bytes, alloc_bytes, net_bytes, live_at_peak_bytes;
  };
  bool gpu_requested = false;
  bool gpu_measured = false;
  std::string gpu_unavailable;  // why NVML is not used ("" when it is)
  std::vector<std::string> gpu_devices;
  std::vector<GpuStack> gpu_stacks;
  std::vector<std::pair<std::string, int64_t>> gpu_stats;
  struct GpuError {
    std::string query, code;  // "utilization" | "memory" | "processes"; the NVML code's name
    int64_t polls;
  };
  std::vector<GpuError> gpu_errors;
};

// Fails with a one-line reason (already profiling, an interval under 1 ms, a frame layout
// this core does not know, no free real-time signal, a handler or hook that cannot be
// installed). A thread whose timer cannot be armed is not a failure: it is counted (stats
// "timer_errors") and left unsampled.
Status StartProfiler(const ProfilerConfig& config) PEAKLINE_REQUIRES(python::gil);
// Stops sampling and drains everything still queued. Fails when nothing is profiling.
Status StopProfiler() PEAKLINE_REQUIRES(python::gil);
bool ProfilerActive() PEAKLINE_REQUIRES(python::gil);
// After StopProfiler, for a process peakline attached to: takes out what a session leaves
// installed for the life of the process otherwise: the process hooks (sigaction family,
// dlopen, dlsym) and the sampling signal's handler (the program's disposition of that signal
// is applied again; cpu_signal_handler.h, ReleaseCpuSignalHandler). Fails saying why not (a
// session is running; a tick still pending after wait_ms: the handler is kept, harmless).
Status ReleaseProcess(int wait_ms) PEAKLINE_REQUIRES(python::gil);
// Called by a Python thread itself, GIL held (peakline wraps threading's thread bootstrap):
// ThreadStarted first thing, so its CPU timer runs from its birth instead of from the next
// tick; ThreadFinishing last thing, so the CPU it ran after its last sample (all of it, for a
// thread shorter than the sampling interval) is counted. When nothing is profiling they do
// nothing, except that ThreadStarted records the thread's kernel id (3.10: native_thread_ids.h).
void ThreadStarted() PEAKLINE_REQUIRES(python::gil);
void ThreadFinishing() PEAKLINE_REQUIRES(python::gil);
// Fork child only: called first thing after fork (os.register_at_fork(after_in_child=...)),
// GIL held, the only thread. The parent's session is still in this copy of memory but its
// tick thread and CPU timers are not: forget it (leaked, never destroyed: its std::thread is
// joinable and its mutexes may have been held by threads that are gone), take the memory
// hooks out and reset the fork-unsafe shared state, so that StartProfiler works again in the
// child. When nothing was profiling it only forgets the parent's own threads
// (ExcludeCurrentThread), which do not exist in the child.
void ResetAfterForkInChild() PEAKLINE_REQUIRES(python::gil);
// The data of the last stopped session (empty if none).
Snapshot CollectProfile() PEAKLINE_REQUIRES(python::gil);
// The running session's data so far, without stopping or resetting it (empty if nothing is
// profiling). GIL held, never from a hook or signal handler: it first drains what the threads
// queued since the last tick (as a tick does, unless an operation is suspended in a Python
// callback: then the figures are those of the last tick), then copies the aggregates. The
// counters keep counting; a later snapshot or the final profile includes everything again.
Snapshot CollectRunningProfile() PEAKLINE_REQUIRES(python::gil);
// Called by one of peakline's own Python threads (the snapshot writer, the live view) first
// thing, GIL held: it is never sampled, its waits are not measured and its allocations are
// not counted, in this session and every later one of this process (until the process forks).
void ExcludeCurrentThread() PEAKLINE_REQUIRES(python::gil);

}  // namespace peakline::session

#endif  // PEAKLINE_SESSION_PROFILER_H_
