#include "session/sampling_session.h"

#include <algorithm>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "cpu/clock.h"
#include "cpu/cpu_signal_handler.h"
#include "cpu/native_thread_ids.h"
#include "cpu/thread_cpu_timer.h"
#include "hooks/allocation_hooks.h"
#include "python/python_frames.h"
#include "python/thread_states.h"
#include "session/own_threads.h"
#include "session/signal_watch.h"

namespace peakline::session {

using aggregate::MemoryAggregator;
using cpu::ArmThreadCpuTimer;
using cpu::CpuTickValue;
using cpu::CurrentTid;
using cpu::MonotonicNowNs;
using cpu::NativeThreadId;
using cpu::ThreadCpuTimeNs;
using cpu::ThreadRunDelayNs;
using cpu::ThreadSlot;
using python::ForeignCodeLooksAlive;
using python::ReadOtherThreadStack;
using python::ReadPythonStack;
using python::StackRead;
using python::kForeignFrame;
using transport::RawFrame;
using transport::SampleHeader;
using transport::SampleKind;
using transport::kFlagTruncated;
using transport::kMaxFrames;

namespace {

// Another Python thread's stack, read at a tick. With the GIL held the owner cannot push or
// pop frames, so it is read in place; a free-threaded build has no such guarantee (the
// thread runs on), so every frame is copied and the walk stops at the first unsound one.
StackRead ReadHeldThreadStack(PyThreadState* ts, RawFrame* out, int max) {
#ifdef Py_GIL_DISABLED
  return ReadOtherThreadStack(ts, out, max);
#else
  return ReadPythonStack(ts, out, max);
#endif
}

// Slots are pooled, never freed: a signal queued before its timer was deleted may still
// arrive carrying a slot's address, so that address must stay valid memory for the life of
// the process. The pool is bounded by the peak number of concurrently sampled threads.
// Guarded by the GIL (only the session registers and retires slots).
std::vector<ThreadSlot*>& SlotPool() {
  static auto* pool = new std::vector<ThreadSlot*>();
  return *pool;
}

ThreadSlot* TakeSlot(size_t ring_bytes) {
  auto& pool = SlotPool();
  for (size_t i = 0; i < pool.size(); ++i) {
    if (pool[i]->ring.capacity() == ring_bytes) {
      ThreadSlot* slot = pool[i];
      pool[i] = pool.back();
      pool.pop_back();
      return slot;
    }
  }
  return new ThreadSlot(ring_bytes);
}

// When the thread started, in clock ticks since boot (/proc/self/task/TID/stat field 22), or
// -1 if unknown.
int64_t ThreadStartTicks(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", static_cast<int>(tid));
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return -1;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  // Field 3 (state) is the first after ")": field 22 is 19 fields further on.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p + 1, ' ');
    if (p == nullptr) return -1;
  }
  return std::strtoll(p + 1, nullptr, 10);
}

// The ids of this process's threads now (/proc/self/task); empty if it cannot be read.
std::unordered_set<pid_t> LiveThreadIds() {
  std::unordered_set<pid_t> tids;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) {
      const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      if (tid > 0) tids.insert(tid);
    }
    closedir(dir);
  }
  return tids;
}

int64_t BoottimeTicksNow() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  const int64_t hz = sysconf(_SC_CLK_TCK);
  return static_cast<int64_t>(ts.tv_sec) * hz +
         static_cast<int64_t>(ts.tv_nsec) * hz / cpu::kNsPerSecond;
}

bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace

namespace {
std::atomic<uint32_t> g_sessions{0};
}  // namespace

SamplingSession::SamplingSession(const SamplingSessionConfig& config)
    : config_(config),
      resolver_(&table_),
      reported_(&table_, static_cast<PyObject*>(config.file_filter)),
      generation_(g_sessions.fetch_add(1, std::memory_order_relaxed) + 1) {
  excluded_tids_ = config_.excluded_tids;
  if (config_.memory) {
    memory_ = std::make_unique<MemoryAggregator>(
        &table_, &resolver_, &reported_, config_.start_ns,
        [this](pid_t tid, std::vector<uint32_t>* ids, const RawFrame* main_frames, int n_main) {
          StitchToMain(tid, ids, main_frames, n_main);
        },
        config_.memory_events);
  }
  if (config_.gpu) {
    gpu::NvmlPollerOptions options;
    options.on_thread_start = hooks::MarkCurrentThreadInternal;  // NVML's own mallocs
    std::unique_ptr<gpu::NvmlPoller> poller;
    std::string unavailable;  // why NVML is not used
    if (Result<std::unique_ptr<gpu::NvmlPoller>> opened = gpu::NvmlPoller::Open(options);
        opened.ok()) {
      poller = std::move(opened).value();
    } else {
      unavailable = opened.status().message();
    }
    gpu_ = std::make_unique<gpu::GpuAggregator>(&table_, std::move(poller), unavailable,
                                                static_cast<PyObject*>(config_.torch_probe));
  }
}

SamplingSession::~SamplingSession() {
  for (auto& [tid, slot] : slots_) {
    if (slot->armed) timer_delete(slot->timer);
    SlotPool().push_back(slot);
  }
}

void SamplingSession::Start() {
  start_ticks_ = BoottimeTicksNow();
  // The threads alive now: /proc's start times are in 10 ms clock ticks, too coarse to tell a
  // thread born just after the start (a program's first worker) from one born just before.
  initial_tids_ = LiveThreadIds();
  RegisterPythonThreads();
  if (config_.sample_native_threads) ScanNativeThreads(initial_tids_);
  initial_threads_registered_ = true;
  if (gpu_) gpu_->Start(MonotonicNowNs());
  if (memory_) memory_->StartStaging();
  {
    BlockSignalsForNewThreads no_signals;
    thread_ = std::thread([this] { Run(); });
    NameThread(thread_.native_handle(), "peakline-tick");
  }
  thread_started_ = true;
  // Until the thread has made its first allocation (its thread state): glibc gives a thread
  // its own malloc arena then, 64 MiB of address space, and that must be taken before the
  // program runs, not at some point after its first line (a program that caps its address
  // space with RLIMIT_AS would lose 64 MiB of its headroom). Bounded: a thread that cannot
  // start within a second does so later.
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!running_ && cv_.WaitUntil(&mu_, deadline)) {
  }
}

void SamplingSession::StopThread() {
  if (!thread_started_) return;
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  if (gpu_) gpu_->StopThread();
  if (memory_) memory_->StopStaging();
  thread_started_ = false;
}

void SamplingSession::StopTimers() {
  stopped_ = true;
  // No iterator of an operation suspended in a Python callback is invalidated: the walk
  // changes no entry of the table.
  for (auto& [tid, slot] : slots_) {
    if (slot->armed) {
      timer_delete(slot->timer);
      slot->armed = false;
    }
  }
}

void SamplingSession::Run() {
  NameThisThread("peakline-tick");
  own_tid_ = CurrentTid();
  hooks::MarkCurrentThreadInternal();
  PyThreadState* ts = PyThreadState_New(PyInterpreterState_Main());
  {
    MutexLock lock(&mu_);
    running_ = true;  // Start waits for it
  }
  cv_.NotifyAll();
  int64_t tick = 0;
  for (;;) {
    {
      MutexLock lock(&mu_);
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::nanoseconds(config_.tick_ns);
      // Until stopped or the tick is due (a wake-up may be spurious: the loop re-checks).
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
      if (stop_) break;
    }
    // Without the GIL: a signal whose Python handler has not run may need re-sending to a
    // main thread that went to sleep just after it arrived (session/signal_watch.h).
    KickPendingSignals(config_.main_tid, MonotonicNowNs());
    python::TakeGil(ts);
    if (busy_) {  // another thread is suspended half-way through an operation: next time
      ++stats_.skipped_ticks;
    } else {
      OwnerScope owner(this);
      Tick(/*measure_wait=*/true, config_.sample_native_threads && tick % 10 == 0);
    }
    python::DropGil();
    ++tick;
  }
  PyEval_RestoreThread(ts);  // for good: PyThreadState_DeleteCurrent releases it
  PyThreadState_Clear(ts);
  PyThreadState_DeleteCurrent();
}

void SamplingSession::Drain(bool measure_wait) {
  if (busy_ && owner_tid_ == CurrentTid()) {
    // Called from inside this thread's own operation: Python code run by one of its
    // callbacks stopped the profile (a SIGTERM handler writing the profile, a finalizer).
    // That operation cannot finish before we return, and waiting would deadlock: the last
    // interval's samples are left out instead.
    ++stats_.skipped_ticks;
    return;
  }
  // An operation suspended in a Python callback (a code object freed by a daemon thread, for
  // one) must finish before the last drain: it needs the GIL to do so. Once the interpreter
  // is finalizing, a daemon thread never gets the GIL back: nothing can resume then.
  while (busy_ && !InterpreterFinalizing()) {
    Py_BEGIN_ALLOW_THREADS
    struct timespec pause = {0, 1'000'000};
    nanosleep(&pause, nullptr);
    Py_END_ALLOW_THREADS
  }
  OwnerScope owner(this);
  Tick(measure_wait, /*scan_native=*/false);
  for (auto& [tid, slot] : slots_) SplitRunDelay(slot, /*force=*/true);  // the last reading
}

void SamplingSession::CatchUp() {
  if (busy_ || stopped_) {
    ++stats_.skipped_ticks;
    return;
  }
  OwnerScope owner(this);
  Tick(/*measure_wait=*/true, /*scan_native=*/false);
}

void SamplingSession::Exclude(pid_t tid) {
  excluded_tids_.insert(tid);
  auto it = slots_.find(tid);
  if (it == slots_.end() || busy_) return;  // busy: the next tick finds it excluded
  OwnerScope owner(this);
  Retire(it->second);
  if (!retired_.empty() && retired_.back().tid == tid) retired_.pop_back();
}

void SamplingSession::Tick(bool measure_wait, bool scan_native) {
  if (scan_native) ScanNativeThreads(LiveThreadIds());
  ++stats_.ticks;
  RegisterPythonThreads();
  main_stack_valid_ = false;
  // Samples first: each charges the off-CPU time before it to its own line (ProcessSample),
  // and the tick charges only what came after the last of them to the current line.
  for (auto& [tid, slot] : slots_) DrainRing(slot);
  ChargeExitTails();
  const int64_t now = MonotonicNowNs();
  if (measure_wait) {
    for (auto& [tid, slot] : slots_) {
      auto it = tstates_.find(tid);
      if (it != tstates_.end()) MeasureWait(slot, it->second, now);
    }
  }
  for (auto& [tid, slot] : slots_) SplitRunDelay(slot, /*force=*/false);
  if (memory_) {
    memory_->Drain();
    memory_->OnTick(now);
  }
  if (gpu_) {  // GPU figures go to the line the main thread is on
    gpu_->OnTick(now, [this] {
      MainThreadStack(&main_stack_);
      return table_.StackIndex(config_.main_tid, main_stack_.data(), main_stack_.size());
    });
  }
  MainThreadStack(&main_stack_);  // for the samples of the next interval
  stitch_stack_ = main_stack_;
  stitch_stack_valid_ = true;
  // The line the main thread is on (its innermost reported frame; the stack is leaf first):
  // where the parent waits while its pool workers work.
  uint32_t main_frame = 0;
  for (uint32_t id : main_stack_) {
    if (reported_.Reported(table_.frames()[id].file_id)) {
      main_frame = id + 1;
      break;
    }
  }
  activity_.NoteMainFrame(now, main_frame);
}

void SamplingSession::RegisterPythonThreads() {
  // First: on a free-threaded build the walk may wait for the list's lock, letting other
  // entries in (python/thread_states.h).
  const auto threads = python::ListThreadStates();
  tstates_.clear();
  for (const auto& [tid, ts] : threads) {
    if (tid == 0 || tid == own_tid_ || excluded_tids_.count(tid)) continue;
    tstates_[tid] = ts;
    if (finished_tids_.count(tid) || Queued(tid)) continue;  // Queued: its own slot waits
    auto it = slots_.find(tid);
    ThreadSlot* slot = it == slots_.end() ? Register(tid, true) : it->second;
    if (slot != nullptr) slot->python = true;
  }
  // Python thread states that went away: the OS thread may live on (a native thread that
  // called into Python and left), so a slot is retired only once its thread is gone.
  std::vector<ThreadSlot*> gone;
  for (auto& [tid, slot] : slots_) {
    if (tstates_.count(tid)) continue;
    slot->python = false;
    if (ThreadCpuTimeNs(tid) < 0 && !Queued(tid)) gone.push_back(slot);
  }
  for (ThreadSlot* slot : gone) Retire(slot);
  // A finished thread is forgotten once it is gone (its id may then be reused).
  for (auto it = finished_tids_.begin(); it != finished_tids_.end();) {
    const bool gone_for_good = !tstates_.count(*it) && ThreadCpuTimeNs(*it) < 0;
    it = gone_for_good ? finished_tids_.erase(it) : std::next(it);
  }
  // So is an excluded one (peakline's own): a thread of the program may get its id next.
  std::erase_if(excluded_tids_, [](pid_t tid) { return ThreadCpuTimeNs(tid) < 0; });
}

void SamplingSession::ScanNativeThreads(const std::unordered_set<pid_t>& alive) {
  if (alive.empty()) return;  // /proc unreadable (a process always has a thread): change nothing
  for (pid_t tid : alive) {
    if (tid != own_tid_ && !slots_.count(tid) && !IsGpuPoller(tid) && !finished_tids_.count(tid) &&
        !excluded_tids_.count(tid) && !Queued(tid)) {
      Register(tid, false);
    }
  }
  std::vector<ThreadSlot*> gone;
  for (auto& [tid, slot] : slots_) {
    if (!alive.count(tid) && !Queued(tid)) gone.push_back(slot);
  }
  for (ThreadSlot* slot : gone) Retire(slot);
}

ThreadSlot* SamplingSession::Register(pid_t tid, bool python, int64_t first_within_ns) {
  ThreadSlot* slot = NewSlot(tid, python, first_within_ns);
  if (slot != nullptr) slots_[tid] = slot;
  return slot;
}

ThreadSlot* SamplingSession::NewSlot(pid_t tid, bool python, int64_t first_within_ns) {
  if (stopped_) return nullptr;
  const int64_t cpu = ThreadCpuTimeNs(tid);
  if (cpu < 0) return nullptr;
  ThreadSlot* slot = TakeSlot(config_.ring_bytes);
  slot->Reset(tid);
  slot->python = python;
  slot->last_cpu_ns = cpu;
  // A thread born after the session started (a worker, a lazily created BLAS pool) ran for up
  // to a tick (ten for native threads) before this registration: all of that CPU is the
  // session's, so its first sample carries it. New: not alive at the start, or (its id reused)
  // born in a later clock tick.
  if (initial_threads_registered_) {
    if (!initial_tids_.count(tid) || ThreadStartTicks(tid) > start_ticks_) {
      slot->last_cpu_ns = 0;
      slot->last_system_ns = 0;
    }
  }
  slot->base_cpu_ns = slot->last_cpu_ns;
  slot->wait.Reset(MonotonicNowNs(), cpu);
  slot->run_delay.Reset(ThreadRunDelayNs(tid));
  // Random first expiry in (0, interval]: threads started together are not sampled in
  // lock-step with each other or with periodic work (xorshift; no libc rand state).
  seed_ ^= seed_ << 13;
  seed_ ^= seed_ >> 7;
  seed_ ^= seed_ << 17;
  const int64_t within = first_within_ns > 0 ? std::min(first_within_ns, config_.cpu_interval_ns)
                                            : config_.cpu_interval_ns;
  const int64_t first = 1 + static_cast<int64_t>(seed_ % static_cast<uint64_t>(within));
  if (ArmThreadCpuTimer(tid, config_.signo, CpuTickValue(slot), config_.cpu_interval_ns, first,
                        &slot->timer).ok()) {
    slot->armed = true;
  } else {
    ++stats_.timer_errors;
  }
  return slot;
}

void SamplingSession::Retire(ThreadSlot* slot) {
  if (slot->armed) {
    timer_delete(slot->timer);
    slot->armed = false;
  }
  DrainRing(slot);
  SplitRunDelay(slot, /*force=*/true);
  stats_.dropped_samples += static_cast<int64_t>(slot->dropped.load(std::memory_order_relaxed));
  retired_.push_back(
      ThreadSummary{slot->tid, slot->python, slot->cpu_ns, slot->wait_ns, slot->run_delay_ns});
  slots_.erase(slot->tid);
  SlotPool().push_back(slot);
}

void SamplingSession::MeasureWait(ThreadSlot* slot, PyThreadState* ts, int64_t now_ns) {
  const int64_t cpu = ThreadCpuTimeNs(slot->tid);
  if (cpu < 0) return;
  const int64_t off = slot->wait.Observe(now_ns, cpu);
  if (off <= 0) return;
  RawFrame frames[kMaxFrames];
  const StackRead r = ReadHeldThreadStack(ts, frames, kMaxFrames);
  stats_.invalid_frames += r.invalid;
  if (r.truncated) ++stats_.truncated_stacks;
  ResolveFrames(frames, r.nframes, &scratch_ids_);
  ChargeWait(slot, scratch_ids_, off, /*from_sample=*/false);
}

void SamplingSession::ChargeWait(ThreadSlot* slot, const std::vector<uint32_t>& ids,
                                 int64_t off_ns, bool from_sample) {
  const uint32_t index = table_.StackIndex(slot->tid, ids.data(), ids.size());
  aggregate::StackCounters& c = table_.counters(index);
  c.wait_ns += off_ns;
  ++c.wait_samples;
  slot->wait_ns += off_ns;
  slot->run_delay.Add(index, off_ns, from_sample);
  ++stats_.wait_samples;
}

void SamplingSession::SplitRunDelay(ThreadSlot* slot, bool force) {
  if (!slot->run_delay.DueForReading(force)) return;
  const int64_t moved =
      slot->run_delay.Split(ThreadRunDelayNs(slot->tid), [this](uint32_t stack, int64_t ns) {
        aggregate::StackCounters& c = table_.counters(stack);
        c.wait_ns -= ns;
        c.run_delay_ns += ns;
      });
  slot->wait_ns -= moved;
  slot->run_delay_ns += moved;
  ++stats_.run_delay_readings;
}

void SamplingSession::DrainRing(ThreadSlot* slot) {
  for (;;) {
    const size_t n = slot->ring.Read(record_, sizeof(record_));
    if (n == 0) break;
    if (n == SIZE_MAX || n < sizeof(SampleHeader)) {
      ++stats_.dropped_samples;
      continue;
    }
    SampleHeader header;
    std::memcpy(&header, record_, sizeof(header));
    if (sizeof(header) + header.nframes * sizeof(RawFrame) != n) {
      ++stats_.dropped_samples;
      continue;
    }
    ProcessSample(slot, header, reinterpret_cast<const RawFrame*>(record_ + sizeof(header)));
  }
}

void SamplingSession::ProcessSample(ThreadSlot* slot, const SampleHeader& header,
                                    const RawFrame* frames) {
  ++stats_.cpu_samples;
  stats_.invalid_frames += header.invalid_frames;
  if (header.flags & kFlagTruncated) ++stats_.truncated_stacks;
  // The thread's own frames, then (another thread's sample) the main thread's.
  int n_own = 0;
  while (n_own < header.nframes && frames[n_own].reserved != kForeignFrame) ++n_own;
  if (header.kind == SampleKind::kNoThread) n_own = 0;
  std::vector<uint32_t>* ids = &scratch_ids_;
  ResolveFrames(frames, n_own, ids);
  slot->cpu_ns += header.cpu_delta_ns;
  // Off-CPU time since the thread's previous observation (a sample or a tick) ends at this
  // sample: the thread was waiting (for a CPU, the GIL, I/O) to run the line it is on now.
  // Charged here rather than at the next tick, which may find the thread on a later line: a
  // bytecode that holds the GIL keeps the tick out until the thread has moved on.
  if (header.kind != SampleKind::kNoThread && header.wall_ns > 0) {
    const int64_t off = slot->wait.Observe(header.wall_ns, slot->base_cpu_ns + slot->cpu_ns);
    if (off > 0) ChargeWait(slot, *ids, off, /*from_sample=*/true);  // never stitched
  }
  activity_.AddCpu(header.wall_ns > 0 ? header.wall_ns : MonotonicNowNs(), header.cpu_delta_ns);
  StitchToMain(slot->tid, ids, frames + n_own, header.nframes - n_own);
  const uint32_t index = table_.StackIndex(slot->tid, ids->data(), ids->size());
  aggregate::StackCounters& c = table_.counters(index);
  const int64_t rest = header.cpu_delta_ns - header.system_delta_ns;
  if (header.kind == SampleKind::kPython) {
    c.cpu_python_ns += rest;
  } else {
    c.cpu_native_ns += rest;
  }
  c.cpu_system_ns += header.system_delta_ns;
  ++c.cpu_samples;
  slot->has_last_stack = true;
  slot->last_stack = index;
  slot->last_native = header.kind != SampleKind::kPython;
}

void SamplingSession::MainThreadStack(std::vector<uint32_t>* out) {
  if (main_stack_valid_) return;
  main_stack_valid_ = true;
  out->clear();
  auto it = tstates_.find(config_.main_tid);
  if (it == tstates_.end()) return;
  RawFrame frames[kMaxFrames];
  const StackRead r = ReadHeldThreadStack(it->second, frames, kMaxFrames);
  ResolveFrames(frames, r.nframes, out);
}

void SamplingSession::ResolveFrames(const RawFrame* frames, int n, std::vector<uint32_t>* out) {
  out->clear();
  for (int i = 0; i < n; ++i) {
    if (resolver_.IsDead(frames[i].code) ||
        (frames[i].reserved == kForeignFrame && !ForeignCodeLooksAlive(frames[i]))) {
      ++stats_.invalid_frames;
      continue;
    }
    out->push_back(resolver_.Resolve(const_cast<PyObject*>(static_cast<const PyObject*>(frames[i].code)),
                                     frames[i].lasti));
  }
}

void SamplingSession::StitchToMain(pid_t tid, std::vector<uint32_t>* ids,
                                   const RawFrame* main_frames, int n_main) {
  if (tid == config_.main_tid || reported_.AnyReported(*ids)) return;
  if (n_main > 0) {  // where the main thread was when the work happened
    ResolveFrames(main_frames, n_main, &main_ids_);
    if (!main_ids_.empty()) {
      ids->insert(ids->end(), main_ids_.begin(), main_ids_.end());
      return;
    }
  }
  // Not known (the main thread's stack could not be read then): its stack as of the previous
  // tick, as the work was done since then.
  if (!stitch_stack_valid_) {
    MainThreadStack(&main_stack_);
    stitch_stack_ = main_stack_;
    stitch_stack_valid_ = true;
  }
  ids->insert(ids->end(), stitch_stack_.begin(), stitch_stack_.end());
}

ThreadSlot* SamplingSession::SlotForTesting(pid_t tid) {
  auto it = slots_.find(tid);
  return it != slots_.end() ? it->second : Register(tid, /*python=*/false);
}

std::vector<ThreadSummary> SamplingSession::Threads() const {
  std::vector<ThreadSummary> out = retired_;
  for (const auto& [tid, slot] : slots_) {
    out.push_back(
        ThreadSummary{tid, slot->python, slot->cpu_ns, slot->wait_ns, slot->run_delay_ns});
  }
  return out;
}

int64_t SamplingSession::DroppedSamples() const {
  int64_t n = stats_.dropped_samples;
  for (const auto& [tid, slot] : slots_) {
    n += static_cast<int64_t>(slot->dropped.load(std::memory_order_relaxed));
  }
  return n;
}

}  // namespace peakline::session
