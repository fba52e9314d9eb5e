// SamplingSession: one profiling session's thread registry and its background (tick) thread,
// which turns the raw samples and memory events into the StackTable and the memory tables.
//
// Every tick (default 20 ms) it takes the GIL once and
//   1. registers new Python threads (arming a CPU timer for each) and retires finished ones;
//   2. measures each Python thread's off-CPU time since the last tick (wall delta minus CPU
//      delta) and charges it, as wait time, to that thread's current stack — read directly,
//      which is safe because no other thread can push or pop frames while we hold the GIL —
//      then splits the run delay (runnable, not scheduled) off the wait charged since the
//      last tick, from the kernel's per-thread counter (RunDelayMeter, thread_slot.h);
//   3. drains every thread's ring and resolves (code, offset) pairs to lines.
// Every 10th tick it also scans /proc/self/task for native threads (BLAS, torch workers) and
// arms timers for them; their CPU is charged to the main thread's current stack.
//
// Guarded by the GIL: the slot table, the resolver and the stack table are touched only with
// the GIL held (the tick, the final Drain() in Stop, and the code-dealloc hook).
//
// But holding the GIL is not enough on its own: processing calls back into Python (the file
// filter, the torch probe), and Python code may hand the GIL to another thread half-way. So
// one operation at a time owns the session (busy_). While it is suspended in a callback:
//   * the tick thread skips its tick;
//   * a code object freed by any thread is kept intact, not deallocated yet (see
//     InstallCodeDeallocHook): the owner drains the samples that may name it when it is done,
//     then forgets and frees it (EndOperation) — as it does for the objects freed while
//     nothing was suspended;
//   * Drain() (from Stop) waits, without the GIL, until the owner is done — unless the owner
//     is the calling thread itself (a signal handler or finalizer run by one of its callbacks
//     stopped the profile): then the final drain is skipped, as waiting would never end.
// Code that calls into Python therefore never holds a reference or iterator into the tables
// across the call: see ReportedFiles.
#ifndef PEAKLINE_SESSION_SAMPLING_SESSION_H_
#define PEAKLINE_SESSION_SAMPLING_SESSION_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aggregate/memory_aggregator.h"
#include "aggregate/reported_files.h"
#include "aggregate/stack_table.h"
#include "aggregate/time_buckets.h"
#include "cpu/thread_cpu_timer.h"
#include "cpu/thread_exit_tail.h"
#include "cpu/thread_slot.h"
#include "gpu/gpu_aggregator.h"
#include "python/code_resolver.h"
#include "python/gil.h"
#include "session/profiler.h"
#include "sync/mutex.h"
#include "sync/thread_annotations.h"
#include "transport/mpsc_ring.h"
#include "transport/sample_record.h"

namespace peakline::session {

// What the binding asked for (profiler.h), plus what StartProfiler settles for the session.
struct SamplingSessionConfig : ProfilerConfig {
  size_t ring_bytes = 128 * 1024;  // each thread's sample ring
  int signo = 0;                   // the sampling signal (cpu_signal_handler.h, CpuSamplingSignal)
  int64_t start_ns = 0;            // the session's time zero, on CLOCK_MONOTONIC
  // The memory events' ring; nullptr: the allocation hooks' (aggregate/memory_aggregator.h).
  // Set only by unit tests, which feed synthetic events (tests/native/session_harness.h).
  transport::MpscRing* memory_events = nullptr;
  std::unordered_set<pid_t> excluded_tids;  // peakline's own Python threads: never registered
};

// The session's counters, declared once: X(name) for each expands to the struct's field and to
// the entry of the profile's sampling statistics under the same name (session/profiler.cc,
// SnapshotOf). dropped_samples is apart: the statistics add the live slots' drops to it
// (DroppedSamples).
#define PEAKLINE_SAMPLING_SESSION_STATS(X)                                                  \
  X(cpu_samples)                                                                            \
  X(wait_samples)                                                                           \
  X(invalid_frames)                                                                         \
  X(truncated_stacks)                                                                       \
  X(ticks)                                                                                  \
  X(timer_errors)                                                                           \
  X(skipped_ticks)       /* the tick found another operation suspended in Python */        \
  X(deferred_code_frees) /* code objects freed while an operation was suspended */          \
  X(finished_threads)    /* threads whose CPU after their last sample was added */          \
  X(exit_tails)          /* threads whose CPU after their announced end was added */        \
  X(dropped_exit_tails)  /* such tails lost: the table was full (cpu/thread_exit_tail.h) */  \
  X(run_delay_readings)  /* reads of a thread's schedstat (SplitRunDelay) */

struct SamplingSessionStats {
#define PEAKLINE_STATS_FIELD(name) int64_t name = 0;
  PEAKLINE_SAMPLING_SESSION_STATS(PEAKLINE_STATS_FIELD)
#undef PEAKLINE_STATS_FIELD
  int64_t dropped_samples = 0;  // by retired slots
};

struct ThreadSummary {
  pid_t tid;
  bool python;
  int64_t cpu_ns;
  int64_t wait_ns;       // off-CPU time less run delay: sleep, I/O, locks, the GIL
  int64_t run_delay_ns;  // runnable but not scheduled (thread_slot.h, RunDelayMeter)
};

class SamplingSession {
 public:
  explicit SamplingSession(const SamplingSessionConfig& config);
  ~SamplingSession();

  // GIL held. Registers the calling thread's interpreter threads and starts the tick thread;
  // returns once it runs (its malloc arena taken before the program goes on), or after 1 s.
  void Start() PEAKLINE_REQUIRES(python::gil) PEAKLINE_EXCLUDES(mu_);
  // The stop, in three steps (session/profiler.cc, StopProfiler):
  // GIL held: from now on no thread is registered (no new timer: a thread's start is not
  // recorded, its end still is) and no catch-up tick runs; every timer is deleted.
  void StopTimers() PEAKLINE_REQUIRES(python::gil);
  // Called WITHOUT the GIL, after StopTimers: stops and joins the tick thread and the GPU and
  // memory staging threads. It touches nothing the GIL guards: a Python thread may hold the
  // GIL meanwhile (and start a thread, or snapshot the profile).
  void StopThread();
  // GIL held: final wait measurement and drain of everything still queued.
  void Drain(bool measure_wait) PEAKLINE_REQUIRES(python::gil);
  // GIL held, session running (a snapshot): an extra tick now, so that the tables hold what
  // the threads queued up to this moment. Skipped while an operation is under way (suspended
  // in a Python callback, maybe on this very thread): the tables then stand as of the last
  // tick, which is consistent (no operation holds references into them across a callback).
  void CatchUp() PEAKLINE_REQUIRES(python::gil);
  // GIL held: thread tid is peakline's own (profiler.h, ExcludeCurrentThread). Never
  // registered from now on; a slot it already has is retired and left out of Threads().
  void Exclude(pid_t tid) PEAKLINE_REQUIRES(python::gil);

  aggregate::StackTable& table() { return table_; }
  const aggregate::StackTable& table() const { return table_; }
  const aggregate::MemoryAggregator* memory() const { return memory_.get(); }
  const gpu::GpuAggregator* gpu() const { return gpu_.get(); }
  const SamplingSessionStats& stats() const { return stats_; }
  // An operation is under way (maybe suspended).
  bool busy() const PEAKLINE_REQUIRES(python::gil) { return busy_; }
  const SamplingSessionConfig& config() const { return config_; }
  std::vector<ThreadSummary> Threads() const PEAKLINE_REQUIRES(python::gil);
  // When the process used its CPU and which line its main thread was on (time_buckets.h).
  const aggregate::TimeBuckets& activity() const { return activity_; }
  int64_t DroppedSamples() const PEAKLINE_REQUIRES(python::gil);

  // GIL held, on thread tid itself (profiler.h, ThreadStarted / ThreadFinishing). While
  // another operation is suspended in a Python callback (its loops may be walking slots_),
  // the event is queued with what only the thread itself can read at that moment (its CPU
  // time, its system time, its stack) and that operation completes it when it ends
  // (EndOperation): a thread that ends then still has its CPU counted to its end.
  void ThreadStarted(pid_t tid) PEAKLINE_REQUIRES(python::gil);
  void ThreadFinishing(pid_t tid) PEAKLINE_REQUIRES(python::gil);

  // GIL held, from the code-object deallocation hook. Keeps the object (returns true): the
  // operation that owns the session — this call, or one suspended in a Python callback —
  // resolves every pending sample while the object is intact, then frees it
  // (EndOperation).
  bool BeforeCodeFreed(PyObject* code) PEAKLINE_REQUIRES(python::gil);

  // Unit tests only (tests/native/session_harness.h), GIL held: thread tid's slot, registered
  // now if it has none; nullptr if tid is not a live thread of this process. The test writes
  // synthetic sample records into its ring, as the signal handler would, and the next tick
  // (or the operation a code object's deallocation starts) drains them.
  cpu::ThreadSlot* SlotForTesting(pid_t tid) PEAKLINE_REQUIRES(python::gil);
  // Unit tests only, GIL held: whether thread tid is excluded (Exclude, or the config's list).
  bool ExcludedForTesting(pid_t tid) const PEAKLINE_REQUIRES(python::gil) {
    return excluded_tids_.count(tid) != 0;
  }

 private:
  // One operation (a tick, the final drain, a code-object free) owns the session for its
  // lifetime; the GIL is held throughout, except inside the Python callbacks it makes.
  class OwnerScope {
   public:
    explicit OwnerScope(SamplingSession* a) PEAKLINE_REQUIRES(python::gil) : a_(a) {
      a_->busy_ = true;
      a_->owner_tid_ = cpu::CurrentTid();
    }
    ~OwnerScope() PEAKLINE_REQUIRES(python::gil) { a_->EndOperation(); }
    OwnerScope(const OwnerScope&) = delete;
    OwnerScope& operator=(const OwnerScope&) = delete;

   private:
    SamplingSession* a_;
  };
  // Frees the code objects kept meanwhile, each after draining the samples that may name it,
  // then gives up ownership.
  void EndOperation() PEAKLINE_REQUIRES(python::gil);
  void DrainAll() PEAKLINE_REQUIRES(python::gil);

  // A thread's start or end as ThreadStarted / ThreadFinishing saw it on that thread.
  struct ThreadEvent {
    bool start = false;
    pid_t tid = 0;
    int64_t cpu_ns = -1;     // end: the thread's CPU time then
    int64_t system_ns = -1;  // end: its system CPU time then (-1: not known)
    bool queued = false;                      // completed later, on another thread
    std::vector<transport::RawFrame> frames{};  // end, when queued: its stack then
    cpu::ThreadSlot* slot = nullptr;          // start, when queued: its slot, timer armed
  };
  // Owner only. The work of ThreadStarted / ThreadFinishing; `queued`: done later by the owner
  // of the operation that was under way (EndOperation), on another thread.
  void CompleteThreadStart(const ThreadEvent& start) PEAKLINE_REQUIRES(python::gil);
  void CompleteThreadEnd(const ThreadEvent& end) PEAKLINE_REQUIRES(python::gil);
  // Where a thread's end was charged (CompleteThreadEnd): its exit tail goes there too.
  struct EndedThread {
    uint32_t stack = 0;
    bool native = false;
    size_t summary = SIZE_MAX;  // its entry in retired_
  };
  void ChargeThreadCpu(const EndedThread& ended, int64_t cpu_ns, int64_t system_ns)
      PEAKLINE_REQUIRES(python::gil);
  // Owner only: the CPU threads ran between their announced end and their exit
  // (cpu/thread_exit_tail.h), each to where its end went.
  void ChargeExitTails() PEAKLINE_REQUIRES(python::gil);
  static constexpr size_t kMaxWaitingExitTails = 4096;
  // An event of thread tid waits in pending_thread_events_: no tick registers or retires a
  // slot for it until then (its own slot, if any, is in the event).
  bool Queued(pid_t tid) const PEAKLINE_REQUIRES(python::gil);
  // A thread that announced its start gets its first sample within this much CPU.
  static constexpr int64_t kFirstSampleWithinNs = 2'000'000;

  // The tick thread: takes the GIL every tick_ns (TakeGil), until StopThread.
  void Run() PEAKLINE_EXCLUDES(mu_);
  // Owner only. scan_native: also look for new native threads.
  void Tick(bool measure_wait, bool scan_native) PEAKLINE_REQUIRES(python::gil);
  void RegisterPythonThreads() PEAKLINE_REQUIRES(python::gil);
  // Registers the threads in `alive` not yet known, retires known ones not in it.
  void ScanNativeThreads(const std::unordered_set<pid_t>& alive) PEAKLINE_REQUIRES(python::gil);
  bool IsGpuPoller(pid_t tid) const {  // peakline's own NVML thread: never sampled
    return gpu_ && gpu_->poller() && gpu_->poller()->thread_tid() == tid;
  }
  // first_within_ns > 0: the first expiry falls in (0, first_within_ns] instead of (0, interval]
  // (a thread announced at its birth: see ThreadStarted).
  cpu::ThreadSlot* Register(pid_t tid, bool python, int64_t first_within_ns = 0)
      PEAKLINE_REQUIRES(python::gil);
  // Register's slot, timer armed, not yet in slots_ (nullptr: stopped, or the thread is gone).
  // Touches no table: safe while another operation is suspended in a callback.
  cpu::ThreadSlot* NewSlot(pid_t tid, bool python, int64_t first_within_ns)
      PEAKLINE_REQUIRES(python::gil);
  void Retire(cpu::ThreadSlot* slot) PEAKLINE_REQUIRES(python::gil);
  void MeasureWait(cpu::ThreadSlot* slot, PyThreadState* ts, int64_t now_ns);
  // Charges off_ns of off-CPU time to the thread's own stack `ids` (wait is never stitched),
  // and notes it for the run-delay split. from_sample: by one of its samples (it ran).
  void ChargeWait(cpu::ThreadSlot* slot, const std::vector<uint32_t>& ids, int64_t off_ns,
                  bool from_sample);
  // Moves the run delay part of the off-CPU time charged since the last reading from wait to
  // run delay (RunDelayMeter), on the stacks it was charged to. Reads the thread's schedstat
  // only when something was charged, and a blocked thread's only every 10th tick unless
  // forced (its end, the session's end).
  void SplitRunDelay(cpu::ThreadSlot* slot, bool force);
  void DrainRing(cpu::ThreadSlot* slot);
  void ProcessSample(cpu::ThreadSlot* slot, const transport::SampleHeader& header,
                     const transport::RawFrame* frames);
  void MainThreadStack(std::vector<uint32_t>* out);
  void ResolveFrames(const transport::RawFrame* frames, int n, std::vector<uint32_t>* out);
  // Work of a thread other than the main one, with no reported frame on its stack, is
  // charged to the main thread's stack: appended to `ids` as its callers. main_frames: the
  // main thread's stack read when the work happened (kForeignFrame frames); without them,
  // its stack at the previous tick.
  void StitchToMain(pid_t tid, std::vector<uint32_t>* ids, const transport::RawFrame* main_frames,
                    int n_main);

  const SamplingSessionConfig config_;
  aggregate::StackTable table_;
  python::CodeResolver resolver_;
  aggregate::ReportedFiles reported_;
  std::unique_ptr<aggregate::MemoryAggregator> memory_;
  std::unique_ptr<gpu::GpuAggregator> gpu_;
  SamplingSessionStats stats_;

  // Live and retired-but-draining slots.
  std::unordered_map<pid_t, cpu::ThreadSlot*> slots_ PEAKLINE_GUARDED_BY(python::gil);
  std::unordered_map<pid_t, PyThreadState*> tstates_;  // refreshed every tick
  std::vector<ThreadSummary> retired_;
  pid_t own_tid_ = 0;
  // peakline's own Python threads.
  std::unordered_set<pid_t> excluded_tids_ PEAKLINE_GUARDED_BY(python::gil);
  int64_t start_ticks_ = 0;                  // session start, clock ticks since boot
  bool initial_threads_registered_ = false;  // later registrations are of new threads
  std::unordered_set<pid_t> initial_tids_;   // the threads alive at the session's start
  // Threads that reported their end (ThreadFinishing) and may still be alive for a moment:
  // not registered again (a new slot would count their CPU from birth a second time).
  std::unordered_set<pid_t> finished_tids_;
  // Threads whose end is charged and whose exit tail has not come yet; the tails taken
  // whose end is not charged yet. Both owner only.
  std::unordered_map<pid_t, EndedThread> ended_threads_;
  std::vector<cpu::ExitTail> exit_tails_;
  // This session among the process's sessions (an exit tail names the session it is for).
  const uint32_t generation_;
  // The process's count of dropped exit tails when this session started.
  const uint64_t dropped_exit_tails_at_start_ = cpu::DroppedExitTails();
  uint64_t seed_ = 0x2545F4914F6CDD1DULL;

  std::vector<uint32_t> scratch_ids_;
  std::vector<uint32_t> main_ids_;
  std::vector<uint32_t> main_stack_;
  aggregate::TimeBuckets activity_{config_.start_ns, config_.tick_ns};
  bool main_stack_valid_ = false;
  std::vector<uint32_t> stitch_stack_;  // the main thread's stack at the previous tick
  bool stitch_stack_valid_ = false;
  alignas(8) uint8_t record_[transport::kMaxRecordBytes];

  bool busy_ PEAKLINE_GUARDED_BY(python::gil) = false;  // an operation owns the session
  pid_t owner_tid_ PEAKLINE_GUARDED_BY(python::gil) = 0;  // the thread of that operation
  // Freed while busy_: refcount 0, not yet deallocated.
  std::vector<PyObject*> kept_codes_ PEAKLINE_GUARDED_BY(python::gil);
  // Thread starts and ends announced while busy_, in order (ThreadStarted / ThreadFinishing).
  std::vector<ThreadEvent> pending_thread_events_ PEAKLINE_GUARDED_BY(python::gil);

  Mutex mu_;
  CondVar cv_;  // rung by StopThread, and by the thread once running
  bool stop_ PEAKLINE_GUARDED_BY(mu_) = false;
  bool running_ PEAKLINE_GUARDED_BY(mu_) = false;  // the thread has its thread state
  bool stopped_ PEAKLINE_GUARDED_BY(python::gil) = false;  // after StopTimers: no new timers
  std::atomic<bool> thread_started_{false};
  std::thread thread_;
};

}  // namespace peakline::session

#endif  // PEAKLINE_SESSION_SAMPLING_SESSION_H_
