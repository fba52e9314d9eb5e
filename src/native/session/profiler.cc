#include "session/profiler.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <unordered_set>

#include "cpu/clock.h"
#include "cpu/cpu_signal_handler.h"
#include "cpu/native_thread_ids.h"
#include "cpu/thread_cpu_timer.h"
#include "cpu/thread_exit_tail.h"
#include "hooks/allocation_hooks.h"
#include "hooks/process_hooks.h"
#include "hooks/pymem_hooks.h"
#include "python/code_regions.h"
#include "python/main_stack_cache.h"
#include "python/python_frames.h"
#include "python/thread_states.h"
#include "session/sampling_session.h"

namespace peakline::session {

using aggregate::LineMemory;
using aggregate::MemoryAggregator;
using aggregate::TimePoint;
using cpu::CpuSamplingSignal;
using cpu::CpuSignalStatus;
using cpu::CurrentTid;
using cpu::GetCpuSignalStatus;
using cpu::InstallCpuSignalHandler;
using cpu::MonotonicNowNs;
using cpu::NativeThreadId;
using cpu::ReleaseCpuSignalHandler;
using cpu::RememberNativeThreadId;
using cpu::ResetCpuHandlersAfterFork;
using cpu::SetCpuSamplingEnabled;
using cpu::ThreadCpuTimeNs;
using cpu::WaitForCpuHandlersIdle;
using python::CodeRegion;
using python::CodeRegionMap;
using python::InstallCodeDeallocHook;
using python::MainStackCache;
using python::ReadOtherThreadStack;
using python::ReadPythonStack;
using python::SelfCheckFrameLayout;
using python::StackRead;
using python::UninstallCodeDeallocHook;
using transport::RawFrame;
using transport::SampleHeader;
using transport::SampleKind;
using transport::kFlagTruncated;

namespace {

// Read by the signal handler: written only while sampling is off (before the handler is
// enabled), so plain globals are enough.
CodeRegionMap g_regions;
bool g_call_opcodes[256];

// Plain pointers on purpose: a session still held at interpreter exit is leaked, never
// destroyed by a static destructor after Py_Finalize (it holds references).
SamplingSession* g_session PEAKLINE_GUARDED_BY(python::gil) = nullptr;
// The last stopped session, until the next start.
SamplingSession* g_finished PEAKLINE_GUARDED_BY(python::gil) = nullptr;
bool g_regions_ready PEAKLINE_GUARDED_BY(python::gil) = false;

// The main thread's state while a session runs (its Python stack is read by other threads'
// samples and events: python/python_frames.h, ReadOtherThreadStack). Set before sampling is
// enabled, cleared after the hooks and handlers are idle.
std::atomic<PyThreadState*> g_main_tstate{nullptr};

PyThreadState* FindThreadState(pid_t tid) {
  for (const auto& [id, ts] : python::ListThreadStates()) {
    if (id == tid) return ts;
  }
  return nullptr;
}

pid_t g_main_tid = 0;
MainStackCache g_main_stack;
// peakline's own Python threads (ExcludeCurrentThread), handed to every new session; those
// that have ended are dropped at the next start.
std::unordered_set<pid_t> g_excluded_tids PEAKLINE_GUARDED_BY(python::gil);

int ReadMainStack(void* ts, RawFrame* out, int max) {
  return ReadOtherThreadStack(static_cast<PyThreadState*>(ts), out, max).nframes;
}
int64_t MainCpuNs(void*) { return ThreadCpuTimeNs(g_main_tid); }

// How many frames a thread's own stack may take, leaving the main thread's part.
int OwnBudget(PyThreadState* ts, int max_frames) {
  const bool is_main = ts == g_main_tstate.load(std::memory_order_relaxed);
  return is_main ? max_frames : max_frames - MainStackCache::kFrames;
}

// A thread other than the main one: appends the main thread's stack as it is now (within
// MainStackCache's bounds), so that work of a thread without the user's frames is charged to
// where the main thread is at the moment of the work (the session uses them only then).
// Returns the frames appended.
int AppendMainThreadStack(PyThreadState* self, RawFrame* frames, int n, int max_frames) {
  PyThreadState* main = g_main_tstate.load(std::memory_order_relaxed);
  if (main == nullptr || main == self || n >= max_frames) return 0;
  return g_main_stack.Get(MonotonicNowNs(), frames + n, max_frames - n);
}

// StackCapture for Python threads: async-signal-safe (see python_frames.h).
void CapturePythonStack(uintptr_t pc, RawFrame* frames, int max_frames, SampleHeader* header) {
  header->wall_ns = MonotonicNowNs();
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == nullptr) {
    header->kind = SampleKind::kNoThread;
    header->nframes = static_cast<uint16_t>(AppendMainThreadStack(ts, frames, 0, max_frames));
    return;
  }
  // A worker keeps room for the main thread's stack.
  StackRead r = ReadPythonStack(ts, frames, OwnBudget(ts, max_frames), /*racy=*/true);
  r.nframes += AppendMainThreadStack(ts, frames, r.nframes, max_frames);
  header->nframes = static_cast<uint16_t>(r.nframes);
  header->invalid_frames = r.invalid;
  if (r.truncated) header->flags |= kFlagTruncated;
  bool native;
  switch (g_regions.Classify(pc)) {
    case CodeRegion::kEvalLoop:
      native = false;
      break;
    case CodeRegion::kOther:
      native = true;
      break;
    default:  // libpython outside the eval loop, or libc: what is the current op doing?
      native = r.top_opcode >= 0 && g_call_opcodes[r.top_opcode];
      break;
  }
  header->kind = native ? SampleKind::kNative : SampleKind::kPython;
}

// MemoryStackCapture: the allocating thread's own stack (same safety argument as above).
// Another thread's event also carries the main thread's stack (AppendMainThreadStack).
int CaptureMemoryStack(RawFrame* frames, int max_frames) {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  int n = 0;
  if (ts != nullptr) n = ReadPythonStack(ts, frames, OwnBudget(ts, max_frames)).nframes;
  return n + AppendMainThreadStack(ts, frames, n, max_frames);
}

bool g_memory_on = false;
int64_t g_start_ns = 0;
int64_t g_memory_interval = 0;
int64_t g_copy_interval = 0;

bool BeforeCodeFreed(PyObject* code) {
  python::AssumeGilHeld();  // the code-object deallocation hook (python/code_resolver.h)
  python::CoreSection section;
  // A cached reading of the main thread's stack may name this code object; once it is freed
  // such a reading would make other threads' records name freed memory.
  g_main_stack.Invalidate();
  return g_session != nullptr && g_session->BeforeCodeFreed(code);
}

// Fails saying what could not be located (a classification that silently degraded would
// report native time as Python time, so the failure is reported instead).
Status SetUpRegions() PEAKLINE_REQUIRES(python::gil) {
  if (g_regions_ready) return Status();
  // Order matters: the first matching range wins.
  if (!g_regions.AddSymbolContaining(reinterpret_cast<const void*>(&_PyEval_EvalFrameDefault),
                                     CodeRegion::kEvalLoop)) {
    return Status::Error(
        "cannot locate the interpreter's evaluation loop (_PyEval_EvalFrameDefault)");
  }
#if PY_VERSION_HEX < 0x030B0000
  // 3.10 calls a Python function through C: the callee's frame is built and released outside
  // the eval loop while the caller's current op is a call, which would count as a builtin
  // running (native). Measured with perf on a loop of small calls (3.10.13): these functions
  // take 21% of its time, and it read as 29% native instead of 0% as on 3.11 (3% with the
  // first six below). The trashcan helpers are frame_dealloc's; the deallocators of
  // containers use them too, a few instructions each. Static functions among them are found
  // only in a file that keeps its symbol table (pyenv builds do, most distribution packages
  // strip it): without it, that share stays native (docs/architecture.md).
  static constexpr const char* kPythonCallMachinery[] = {
      "_PyFunction_Vectorcall", "_PyEval_Vector", "_PyEval_MakeFrameVector",
      "_PyFrame_New_NoTrack", "frame_dealloc", "_Py_CheckFunctionResult",
      "_PyTrash_begin", "_PyTrash_end", "_PyTrash_cond"};
  (void)g_regions.AddFileSymbols(reinterpret_cast<const void*>(&_PyEval_EvalFrameDefault),
                                 kPythonCallMachinery, std::size(kPythonCallMachinery),
                                 CodeRegion::kEvalLoop);
#endif
  if (!g_regions.AddObjectContaining(reinterpret_cast<const void*>(&PyEval_EvalCode),
                                     CodeRegion::kInterpreter)) {
    return Status::Error("cannot locate the interpreter's code segment");
  }
  // peakline's own code (the allocation hooks run inside the program's allocations): time
  // there belongs to whatever the program's current op is doing, like libc's.
  if (!g_regions.AddObjectContaining(reinterpret_cast<const void*>(&StartProfiler),
                                     CodeRegion::kNeutral)) {
    return Status::Error("cannot locate peakline's own code segment");
  }
  // libc: qsort is not an IFUNC, so its address lies in libc itself.
  if (!g_regions.AddObjectContaining(reinterpret_cast<const void*>(&qsort), CodeRegion::kNeutral)) {
    return Status::Error("cannot locate libc's code segment");
  }
  // Runtime plumbing the interpreter itself runs through, classified by the current op like
  // libc. Optional: a missing one only means its time counts as native. The dynamic linker
  // matters most: a shared libpython (3.12+) reads its current thread state through
  // __tls_get_addr, 8% of a pure-Python float loop (perf, 3.12.1) that was reported as native.
  g_regions.AddObjectDefining("__tls_get_addr", CodeRegion::kNeutral);  // ld.so
  g_regions.AddObjectDefining("pow", CodeRegion::kNeutral);             // libm: float ** in bytecode
  g_regions.AddObjectDefining("pthread_getspecific", CodeRegion::kNeutral);  // libpthread, glibc < 2.34
  g_regions.AddVdso(CodeRegion::kNeutral);  // time.perf_counter() and friends
  g_regions_ready = true;
  return Status();
}

}  // namespace

Status StartProfiler(const ProfilerConfig& config) {
  if (g_session) return Status::Error("peakline is already profiling this process");
  if (config.cpu_interval_ns < 1'000'000) {
    return Status::Error("the CPU sampling interval must be at least 1 ms");
  }
#ifdef Py_GIL_DISABLED
  // Free-threaded build: the memory hooks' stack capture and the Python-domain wrappers rely
  // on the GIL (the session turns memory off there and says so; this is the backstop).
  if (config.memory) {
    return Status::Error("memory profiling is not available on free-threaded CPython");
  }
#endif
  if (Status frames = SelfCheckFrameLayout(); !frames.ok()) {
    return frames.WithContext("cannot read this interpreter's frames");
  }
  if (Status regions = SetUpRegions(); !regions.ok()) return regions;
  for (int i = 0; i < 256; ++i) g_call_opcodes[i] = config.call_opcodes[i];

  SamplingSessionConfig ac;
  static_cast<ProfilerConfig&>(ac) = config;
  ac.signo = CpuSamplingSignal();
  if (ac.signo < 0) {
    return Status::Error(
        "no free real-time signal for CPU sampling (every one is handled, ignored or blocked)");
  }
  ac.start_ns = MonotonicNowNs();
  // peakline's own threads that have ended are forgotten: the program's may reuse their ids.
  std::erase_if(g_excluded_tids, [](pid_t tid) { return cpu::ThreadCpuTimeNs(tid) < 0; });
  ac.excluded_tids = g_excluded_tids;
  g_start_ns = ac.start_ns;
  if (Status handler = InstallCpuSignalHandler(ac.signo, CapturePythonStack); !handler.ok()) {
    return handler;
  }
  // The program's own sigaction calls for the sampling signal are recorded, never applied
  // (process_hooks.h); they stay installed with the handler for the life of the process.
  Status process_hooks = hooks::StartProcessHooks(reinterpret_cast<const void*>(&StartProfiler));
  if (!process_hooks.ok()) {
    return process_hooks.WithContext("cannot install the signal and dlsym hooks");
  }
  // Before the session is set up: the walk may let other entries in (python/thread_states.h).
  PyThreadState* main_ts = FindThreadState(config.main_tid);
  // A finished session whose operation is still on some stack (stopped from inside one of
  // its own callbacks) is left alive: it resumes when that callback returns.
  if (g_finished != nullptr && !g_finished->busy()) delete g_finished;
  g_finished = nullptr;
  g_session = new SamplingSession(ac);
  g_main_tid = config.main_tid;
  g_main_stack.Reset(ReadMainStack, MainCpuNs, main_ts);
  g_main_tstate.store(main_ts, std::memory_order_relaxed);
  InstallCodeDeallocHook(BeforeCodeFreed);
  g_memory_on = config.memory;
  if (config.memory) {
    hooks::MemoryConfig mc;
    mc.alloc_mean_bytes = config.memory_sampling_interval_bytes;
    mc.copy_mean_bytes = config.copy_sampling_interval_bytes;
    g_memory_interval = mc.alloc_mean_bytes;
    g_copy_interval = mc.copy_mean_bytes;
    Status memory = hooks::StartMemoryHooks(mc, CaptureMemoryStack,
                                            reinterpret_cast<const void*>(&StartProfiler));
    if (!memory.ok()) {
      UninstallCodeDeallocHook();
      g_main_tstate.store(nullptr, std::memory_order_relaxed);
      delete g_session;
      g_session = nullptr;
      return memory.WithContext("cannot install the memory hooks");
    }
    hooks::InstallPyMemHooks();
  }
  SetCpuSamplingEnabled(true);
  g_session->Start();
  return Status();
}

Status StopProfiler() {
  if (!g_session) return Status::Error("peakline is not profiling");
  SetCpuSamplingEnabled(false);
  WaitForCpuHandlersIdle();
  if (g_memory_on) {
    hooks::UninstallPyMemHooks();
    hooks::StopMemoryHooks();
  }
  g_session->StopTimers();
  Py_BEGIN_ALLOW_THREADS
  g_session->StopThread();
  Py_END_ALLOW_THREADS
  g_main_tstate.store(nullptr, std::memory_order_relaxed);
  g_session->Drain(/*measure_wait=*/true);
  UninstallCodeDeallocHook();
  g_finished = g_session;
  g_session = nullptr;
  return Status();
}

bool ProfilerActive() { return g_session != nullptr; }

Status ReleaseProcess(int wait_ms) {
  if (g_session != nullptr) return Status::Error("a profiling session is running");
  hooks::StopProcessHooks();
  return ReleaseCpuSignalHandler(wait_ms);
}

void ThreadStarted() {
  RememberNativeThreadId(static_cast<unsigned long>(pthread_self()), CurrentTid());
  if (g_session != nullptr) g_session->ThreadStarted(CurrentTid());
}

void ThreadFinishing() {
  if (g_session != nullptr) g_session->ThreadFinishing(CurrentTid());
}

void ResetAfterForkInChild() {
  SetCpuSamplingEnabled(false);
  g_main_tstate.store(nullptr, std::memory_order_relaxed);
  ResetCpuHandlersAfterFork();
  cpu::ForgetExitTailsAfterFork();
  g_excluded_tids.clear();  // the parent's threads; none of them exists in the child
  if (g_session == nullptr) return;
  if (g_memory_on) {
    hooks::UninstallPyMemHooks();
    hooks::StopMemoryHooks();
    hooks::ForgetEventRingAfterFork();
    g_memory_on = false;
  }
  UninstallCodeDeallocHook();
  g_session = nullptr;   // leaked on purpose, see the header
  g_finished = nullptr;
}

namespace {

// Copies the aggregates of `session` (finished, or running with the GIL held and no operation
// of this thread under way): plain C++ data only, no call into Python, so nothing can change
// the tables while they are read.
Snapshot SnapshotOf(const SamplingSession* session) PEAKLINE_REQUIRES(python::gil);

}  // namespace

Snapshot CollectProfile() {
  if (!g_finished) return Snapshot{};
  return SnapshotOf(g_finished);
}

Snapshot CollectRunningProfile() {
  if (!g_session) return Snapshot{};
  g_session->CatchUp();
  return SnapshotOf(g_session);
}

void ExcludeCurrentThread() {
  hooks::MarkCurrentThreadInternal();
  const pid_t tid = CurrentTid();
  g_excluded_tids.insert(tid);
  if (g_session != nullptr) g_session->Exclude(tid);
}

namespace {

Snapshot SnapshotOf(const SamplingSession* session) {
  Snapshot snap;
  const SamplingSession* g_finished = session;  // the name the code below has always used
  const aggregate::StackTable& table = g_finished->table();
  const auto& strings = table.strings();
  for (const aggregate::FrameKey& f : table.frames()) {
    snap.frames.push_back(
        Snapshot::Frame{strings[f.file_id], strings[f.function_id], f.first_lineno, f.lineno});
  }
  for (const aggregate::StackRow& row : table.stacks()) {
    const aggregate::StackCounters& c = row.counters;
    snap.stacks.push_back(Snapshot::Stack{row.tid, row.frames, c.cpu_python_ns, c.cpu_native_ns,
                                          c.cpu_system_ns, c.wait_ns, c.cpu_samples,
                                          c.wait_samples, c.run_delay_ns});
  }
  for (const ThreadSummary& t : g_finished->Threads()) {
    snap.threads.push_back(Snapshot::Thread{t.tid, t.python, t.cpu_ns, t.wait_ns, t.run_delay_ns});
  }
  snap.activity_width_ns = g_finished->activity().width_ns();
  // A bucket that no tick fell in (ticks are 20 ms apart, give or take) keeps the line of
  // the last observation: the main thread was there until a tick saw otherwise.
  int64_t main_frame = -1;
  for (const aggregate::TimeBuckets::Bucket& b : g_finished->activity().Used()) {
    if (b.votes > 0) main_frame = static_cast<int64_t>(b.frame) - 1;
    snap.activity.emplace_back(b.cpu_ns, main_frame);
  }
  if (const MemoryAggregator* mem = g_finished->memory()) {
    snap.memory = true;
    for (const aggregate::StackRow& row : table.stacks()) {
      const aggregate::StackCounters& c = row.counters;
      snap.memory_stacks.push_back(Snapshot::MemoryStack{
          c.alloc_python_bytes, c.alloc_native_bytes, c.free_bytes, c.live_bytes,
          mem->LiveAtPeak(c), c.copy_bytes, c.alloc_samples, mem->LiveAtPeakVariance(c),
          c.live_variance});
    }
    for (const LineMemory& l : mem->lines()) {
      Snapshot::MemoryLine line{strings[l.file_id], l.lineno, l.live_bytes, mem->LiveAtPeak(l), {}};
      for (const TimePoint& p : l.timeline) line.timeline.emplace_back(p.t_ns, p.bytes);
      snap.memory_lines.push_back(std::move(line));
    }
    for (const TimePoint& p : mem->timeline()) snap.timeline.emplace_back(p.t_ns, p.bytes);
    const memory::HeapCounters& heap = hooks::Heap();
    const hooks::MemoryHookStats hs = hooks::HookStats();
    snap.memory_stats = {
        {"peak_bytes", heap.peak.load()},
        {"peak_time_ns", heap.peak_time_ns.load() > 0 ? heap.peak_time_ns.load() - g_start_ns : 0},
        {"live_end_bytes", heap.live.load()},
        {"sampling_interval_bytes", g_memory_interval},
        {"copy_sampling_interval_bytes", g_copy_interval},
        {"alloc_samples", static_cast<int64_t>(hs.alloc_samples)},
        {"free_samples", static_cast<int64_t>(hs.free_samples)},
        {"copy_samples", static_cast<int64_t>(hs.copy_samples)},
        {"dropped_events", static_cast<int64_t>(hs.dropped_events)},
        {"untracked_samples", static_cast<int64_t>(hs.untracked)},
        {"blas_buffer_bytes", hs.blas_buffer_bytes},
        {"blas_buffer_maps", hs.blas_buffer_maps},
        {"peak_events", mem->peak_events()},
        {"invalid_events", mem->invalid_events()},
        {"staged_events", static_cast<int64_t>(mem->stager().staged_records())},
    };
  }
  if (const gpu::GpuAggregator* g = g_finished->gpu()) {
    snap.gpu_requested = true;
    snap.gpu_measured = g->measured();
    snap.gpu_unavailable = g->unavailable();
    if (g->poller() != nullptr) {
      snap.gpu_devices = g->poller()->device_names();
      for (const auto& [key, n] : g->poller()->Errors()) {
        snap.gpu_errors.push_back(Snapshot::GpuError{gpu::GpuQueryName(key.first),
                                                     gpu::NvmlReturnName(key.second), n});
      }
    }
    if (snap.gpu_measured) {
      for (const aggregate::StackRow& row : table.stacks()) {
        const aggregate::StackCounters& c = row.counters;
        snap.gpu_stacks.push_back(Snapshot::GpuStack{c.gpu_util_ns, c.gpu_peak_bytes,
                                                     c.gpu_alloc_bytes, c.gpu_net_bytes,
                                                     g->LiveAtPeak(c)});
      }
    }
    const gpu::GpuStats& gs = g->stats();
    snap.gpu_stats = {
#define PEAKLINE_GPU_STATS_ENTRY(name, initial) {#name, gs.name},
        PEAKLINE_GPU_STATS(PEAKLINE_GPU_STATS_ENTRY)
#undef PEAKLINE_GPU_STATS_ENTRY
        {"poll_interval_ns", g->poller() ? g->poller()->interval_ns() : 0},
        {"dropped_readings", g->poller() ? g->poller()->dropped() : 0},
        {"pid_namespace", g->poller() && g->poller()->pid_namespace() ? 1 : 0},
    };
  }
  const SamplingSessionStats& s = g_finished->stats();
  const CpuSignalStatus signal_status = GetCpuSignalStatus();
  snap.stats = {
#define PEAKLINE_STATS_ENTRY(name) {#name, s.name},
                PEAKLINE_SAMPLING_SESSION_STATS(PEAKLINE_STATS_ENTRY)
#undef PEAKLINE_STATS_ENTRY
                {"dropped_samples", g_finished->DroppedSamples()},
                {"main_stack_readings", static_cast<int64_t>(g_main_stack.readings())},
                {"cpu_signal", signal_status.signo},
                {"cpu_signal_handler_replaced", signal_status.handler_intact ? 0 : 1},
                {"forwarded_signals", static_cast<int64_t>(signal_status.forwarded)},
                {"cpu_interval_ns", g_finished->config().cpu_interval_ns},
                {"tick_interval_ns", g_finished->config().tick_ns},
                // The session's time zero on CLOCK_MONOTONIC: every *_ns time above and the
                // memory timeline count from here (Python aligns phase intervals with it).
                {"start_monotonic_ns", g_finished->config().start_ns}};
  return snap;
}

}  // namespace

}  // namespace peakline::session
