// SamplingSession's operations and thread events: what runs on the program's own threads. A
// thread announcing its birth or its end (`_core.thread_started` / `_core.thread_finishing`,
// called from peakline's wrapper of threading's bootstrap, peakline/session.py) and a code
// object being freed each take the session as an operation (OwnerScope); while another
// operation is suspended in a Python callback they are queued instead, and that operation's
// owner completes them when it ends (EndOperation), in order. The tick and the samples are in
// sampling_session.cc.
#include <signal.h>
#include <sys/resource.h>

#include <cstring>
#include <utility>
#include <vector>

#include "cpu/clock.h"
#include "cpu/thread_cpu_timer.h"
#include "cpu/thread_exit_tail.h"
#include "python/python_frames.h"
#include "session/sampling_session.h"

namespace peakline::session {

using cpu::MonotonicNowNs;
using cpu::ThreadCpuTimeNs;
using cpu::ThreadSlot;
using python::FinishCodeDealloc;
using python::ReadPythonStack;
using python::StackRead;
using transport::RawFrame;
using transport::kMaxFrames;

void SamplingSession::ThreadStarted(pid_t tid) {
  if (stopped_) return;
  if (busy_) {
    // The operation under way may be walking slots_: its owner adds the slot when it ends
    // (EndOperation). The timer runs from now all the same: the samples wait in its ring.
    pending_thread_events_.push_back(ThreadEvent{
        .start = true, .tid = tid, .queued = true,
        .slot = NewSlot(tid, /*python=*/true, kFirstSampleWithinNs)});
    return;
  }
  OwnerScope owner(this);
  CompleteThreadStart(ThreadEvent{.start = true, .tid = tid});
}

void SamplingSession::CompleteThreadStart(const ThreadEvent& start) {
  const pid_t tid = start.tid;
  finished_tids_.erase(tid);
  auto it = slots_.find(tid);
  if (it != slots_.end()) Retire(it->second);  // an earlier thread with this id, not yet retired
  if (start.queued) {  // its slot, made and armed when it started (ThreadStarted)
    if (start.slot == nullptr) return;
    slots_[tid] = start.slot;
    if (stopped_ && start.slot->armed) {  // StopTimers has deleted the others' timers
      timer_delete(start.slot->timer);
      start.slot->armed = false;
    }
    return;
  }
  // Its first sample within its first 2 ms of CPU: a thread shorter than the interval (a
  // pool task of a few ms, and interpreters get faster) would otherwise go unsampled with
  // probability 1 - cpu/interval, and all of its CPU to threading's frames at its end instead
  // of the function it ran. Each sample charges the CPU since the previous one, so an early
  // first sample moves no time, it only names the function.
  Register(tid, /*python=*/true, kFirstSampleWithinNs);
}

void SamplingSession::ThreadFinishing(pid_t tid) {
  // Also while the session stops (after StopTimers): a thread that ends then (a pool the
  // program shut down on its way out) is accounted as it would be before, and its slot
  // retired.

  // No sample after this point: the signal stays blocked for the rest of this thread's life
  // (a few hundred instructions of threading's bookkeeping; a pending one dies with it).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, config_.signo);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ThreadEvent end{.start = false, .tid = tid, .cpu_ns = ThreadCpuTimeNs(tid)};
  rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) end.system_ns = cpu::TimevalNs(ru.ru_stime);
  // What it runs from here to its exit comes back as an exit tail (ChargeExitTails).
  cpu::ArmExitTail(generation_, end.cpu_ns, end.system_ns);
  if (busy_) {
    // Another operation is suspended in a Python callback (seen on 3.14 under load: the tick
    // in the file filter while a round of short threads starts and ends). Its owner completes
    // this end (EndOperation) with what only this thread can read: its times and stack now.
    RawFrame frames[kMaxFrames];
    const StackRead r = ReadPythonStack(PyThreadState_Get(), frames, kMaxFrames);
    end.queued = true;
    end.frames.assign(frames, frames + r.nframes);
    pending_thread_events_.push_back(std::move(end));
    return;
  }
  OwnerScope owner(this);
  CompleteThreadEnd(end);
}

void SamplingSession::CompleteThreadEnd(const ThreadEvent& end) {
  const pid_t tid = end.tid;
  // A thread that announced its start has a slot. One without (its start came while another
  // operation was suspended, and no tick has seen it since) was born in the session through
  // the same wrapper: all of its CPU is the session's.
  auto it = slots_.find(tid);
  ThreadSlot* slot = it == slots_.end() ? nullptr : it->second;
  if (slot != nullptr) {
    if (slot->armed) {
      timer_delete(slot->timer);
      slot->armed = false;
    }
    DrainRing(slot);
  }
  // The CPU since the last sample — all of it for a thread that never got one — goes to the
  // stack of its last sample, else to its stack at its end (threading's frames: stitched to
  // where the main thread is, typically the line that starts or joins it). So does what it
  // runs after this point (its exit tail).
  EndedThread ended{};
  if (slot != nullptr && slot->has_last_stack) {
    ended.stack = slot->last_stack;
    ended.native = slot->last_native;
  } else {
    RawFrame frames[kMaxFrames];
    const RawFrame* read = end.frames.data();
    int n = static_cast<int>(end.frames.size());
    if (!end.queued) {  // this is the thread itself: its stack is current
      n = ReadPythonStack(PyThreadState_Get(), frames, kMaxFrames).nframes;
      read = frames;
    }
    ResolveFrames(read, n, &scratch_ids_);
    if (!reported_.AnyReported(scratch_ids_)) {
      main_stack_valid_ = false;  // the main thread's stack now (GIL held: it cannot move)
      MainThreadStack(&main_stack_);
      scratch_ids_.insert(scratch_ids_.end(), main_stack_.begin(), main_stack_.end());
    }
    ended.stack = table_.StackIndex(tid, scratch_ids_.data(), scratch_ids_.size());
  }
  const int64_t cpu = end.cpu_ns;
  const int64_t rest = slot != nullptr ? cpu - slot->base_cpu_ns - slot->cpu_ns : cpu;
  if (cpu >= 0 && rest > 0) {
    int64_t system = 0;
    const int64_t last_system = slot != nullptr ? slot->last_system_ns : 0;
    if (end.system_ns >= 0 && last_system >= 0) {
      system = end.system_ns - last_system;
      system = system < 0 ? 0 : (system > rest ? rest : system);
    }
    ChargeThreadCpu(ended, rest, system);
    ++stats_.finished_threads;
    if (slot != nullptr) {
      slot->cpu_ns += rest;
    } else {
      retired_.push_back(ThreadSummary{tid, true, rest, 0, 0});
    }
  }
  finished_tids_.insert(tid);
  if (slot != nullptr) Retire(slot);
  if (!retired_.empty() && retired_.back().tid == tid) ended.summary = retired_.size() - 1;
  ended_threads_[tid] = ended;
}

void SamplingSession::ChargeThreadCpu(const EndedThread& ended, int64_t cpu_ns,
                                      int64_t system_ns) {
  aggregate::StackCounters& c = table_.counters(ended.stack);
  activity_.AddCpu(MonotonicNowNs(), cpu_ns);
  (ended.native ? c.cpu_native_ns : c.cpu_python_ns) += cpu_ns - system_ns;
  c.cpu_system_ns += system_ns;
}

void SamplingSession::ChargeExitTails() {
  stats_.dropped_exit_tails =
      static_cast<int64_t>(cpu::DroppedExitTails() - dropped_exit_tails_at_start_);
  cpu::ExitTail taken[64];
  for (size_t n; (n = cpu::TakeExitTails(taken, 64)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      if (taken[i].session == generation_) exit_tails_.push_back(taken[i]);
    }
  }
  // A tail whose end is not completed yet (still queued) waits for a later tick.
  size_t kept = 0;
  for (const cpu::ExitTail& tail : exit_tails_) {
    auto it = ended_threads_.find(tail.tid);
    if (it == ended_threads_.end()) {
      if (kept < kMaxWaitingExitTails) exit_tails_[kept++] = tail;
      continue;
    }
    const int64_t system = tail.system_ns < 0 ? 0 : tail.system_ns;
    ChargeThreadCpu(it->second, tail.cpu_ns, system);
    const size_t summary = it->second.summary;
    if (summary < retired_.size() && retired_[summary].tid == tail.tid) {
      retired_[summary].cpu_ns += tail.cpu_ns;
    }
    ++stats_.exit_tails;
    ended_threads_.erase(it);
  }
  exit_tails_.resize(kept);
}

bool SamplingSession::Queued(pid_t tid) const {
  for (const ThreadEvent& e : pending_thread_events_) {
    if (e.tid == tid) return true;
  }
  return false;
}

void SamplingSession::DrainAll() {
  bool pending = false;
  for (auto& [tid, slot] : slots_) pending |= !slot->ring.Empty();
  if (pending) {
    RegisterPythonThreads();  // tstates_ may be stale between ticks
    main_stack_valid_ = false;
    for (auto& [tid, slot] : slots_) DrainRing(slot);
  }
  if (memory_) memory_->Drain();
}

void SamplingSession::EndOperation() {
  // Free the code objects kept during the operation, in rounds: a drain or a deallocation can
  // run Python, which can free (keep) more. Still the owner throughout, so nothing else
  // enters; a program that kept freeing code faster than this would leave the rest to the
  // next operation.
  for (int round = 0; (!kept_codes_.empty() || !pending_thread_events_.empty()) && round < 16;
       ++round) {
    // Threads that started or ended meanwhile first, in order (before any kept code object
    // is freed: a queued stack may name one). Completing them can run Python too.
    std::vector<ThreadEvent> events;
    events.swap(pending_thread_events_);
    for (const ThreadEvent& e : events) {
      if (e.start) {
        CompleteThreadStart(e);
      } else {
        CompleteThreadEnd(e);
      }
    }
    std::vector<PyObject*> batch;
    batch.swap(kept_codes_);
    DrainAll();  // samples that name them resolve now, while the objects are intact
    for (PyObject* code : batch) resolver_.Forget(code);
    for (PyObject* code : batch) FinishCodeDealloc(code);
    // Samples taken during those deallocations may name them: drop those frames, then let
    // the addresses be reused (DrainAll costs a few loads when nothing is queued).
    DrainAll();
    for (PyObject* code : batch) resolver_.Revive(code);
  }
  busy_ = false;
}

bool SamplingSession::BeforeCodeFreed(PyObject* code) {
  // Kept, not freed by the interpreter now: the owner frees it in EndOperation(), after the
  // samples that name it are resolved. If another operation is suspended in a Python callback
  // (on this thread or another) that is the one; otherwise this call becomes the owner.
  kept_codes_.push_back(code);
  resolver_.MarkDying(code);
  if (busy_) {
    ++stats_.deferred_code_frees;
    return true;
  }
  OwnerScope owner(this);
  return true;
}

}  // namespace peakline::session
