// MainStackCache: the main thread's Python stack as last read by another thread, shared by
// every thread's samples and memory events (session/profiler.cc, AppendMainThreadStack).
//
// Reading a running thread's stack safely costs about two system calls per frame
// (python_frames.h, ReadOtherThreadStack): tens of microseconds for a stack of 30 frames on a
// loaded machine, which a worker allocating gigabytes would pay on every sampled event. But
// a thread's stack cannot change while it does not run, and the main thread is usually
// blocked while workers do its work (a join, a ctypes call, a lock). So a reading is reused
//   * while the main thread's CPU clock has not moved since it was taken (exact: it did not
//     run), or
//   * for up to kRefreshNs after it was taken, whatever the main thread did meanwhile (the
//     bound on staleness when it runs alongside its workers, and on the cost: one reading
//     per kRefreshNs), and always for kTrustNs (no clock read at all).
//
// Lock-free and async-signal-safe: a seqlock with one writer at a time (a try-lock; a
// thread that finds another writing, or its own interrupted write, reads directly).
#ifndef PEAKLINE_PYTHON_MAIN_STACK_CACHE_H_
#define PEAKLINE_PYTHON_MAIN_STACK_CACHE_H_

#include <atomic>
#include <cstdint>
#include <cstring>

#include "transport/sample_record.h"

namespace peakline::python {

class MainStackCache {
 public:
  static constexpr int kFrames = 32;               // the main thread's part of a record
  static constexpr int64_t kTrustNs = 200'000;     // reused without a clock read
  static constexpr int64_t kRefreshNs = 5'000'000;  // reused at most this long if it ran

  // Reads the main thread's stack into out (at most max); async-signal-safe.
  using ReadFn = int (*)(void* ctx, transport::RawFrame* out, int max);
  // The main thread's CPU clock (ns), or -1.
  using CpuFn = int64_t (*)(void* ctx);

  // Not while any thread may call Get (session start and end).
  void Reset(ReadFn read, CpuFn cpu, void* ctx) {
    read_ = read;
    cpu_ = cpu;
    ctx_ = ctx;
    seq_.store(0, std::memory_order_relaxed);
    writing_.store(false, std::memory_order_relaxed);
    readings_.store(0, std::memory_order_relaxed);
  }

  // The main thread's stack (up to min(room, kFrames) frames, leaf first) as of now_ns within
  // the bounds above. Returns the number of frames.
  int Get(int64_t now_ns, transport::RawFrame* out, int room) {
    if (read_ == nullptr || room <= 0) return 0;
    const int want = room < kFrames ? room : kFrames;
    const uint32_t s1 = seq_.load(std::memory_order_acquire);
    if (s1 != 0 && (s1 & 1) == 0) {
      const int64_t at = read_ns_.load(std::memory_order_relaxed);
      const int64_t cpu_at = cpu_ns_.load(std::memory_order_relaxed);
      int n = n_.load(std::memory_order_relaxed);
      if (n > want) n = want;
      std::memcpy(out, frames_, static_cast<size_t>(n) * sizeof(transport::RawFrame));
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1 && now_ns >= at) {
        const int64_t age = now_ns - at;
        if (age < kTrustNs) return n;
        const int64_t cpu = cpu_(ctx_);
        if ((cpu >= 0 && cpu == cpu_at) || age < kRefreshNs) return n;
      }
    }
    if (writing_.exchange(true, std::memory_order_acquire)) {
      return read_(ctx_, out, want);  // another writer, or our own interrupted write
    }
    const int64_t cpu = cpu_(ctx_);  // before the read: a move during it shows next time
    seq_.fetch_add(1, std::memory_order_relaxed);  // odd: being written
    std::atomic_thread_fence(std::memory_order_release);
    const int n = read_(ctx_, frames_, kFrames);
    n_.store(n, std::memory_order_relaxed);
    read_ns_.store(now_ns, std::memory_order_relaxed);
    cpu_ns_.store(cpu, std::memory_order_relaxed);
    seq_.fetch_add(1, std::memory_order_release);  // even: complete
    writing_.store(false, std::memory_order_release);
    readings_.fetch_add(1, std::memory_order_relaxed);
    const int m = n < want ? n : want;
    std::memcpy(out, frames_, static_cast<size_t>(m) * sizeof(transport::RawFrame));
    return m;
  }

  // A code object is about to be freed: a reading taken before may name it, and must not be
  // handed out again (the session resolves the frames of a record after the code objects
  // it has seen die are freed). The next Get reads the stack afresh; a Get in progress
  // sees the sequence move and reads afresh too. Async-signal-safe.
  void Invalidate() {
    read_ns_.store(kNever, std::memory_order_relaxed);
    cpu_ns_.store(kNoCpu, std::memory_order_relaxed);
    seq_.fetch_add(2, std::memory_order_release);  // parity kept: a writer's odd stays odd
  }

  uint64_t readings() const { return readings_.load(std::memory_order_relaxed); }

 private:
  ReadFn read_ = nullptr;
  CpuFn cpu_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<uint32_t> seq_{0};  // 0: empty; odd: being written
  std::atomic<bool> writing_{false};
  std::atomic<int64_t> read_ns_{0};
  std::atomic<int64_t> cpu_ns_{0};
  std::atomic<int> n_{0};
  transport::RawFrame frames_[kFrames];
  std::atomic<uint64_t> readings_{0};
  // What Invalidate leaves: a reading older than any bound, at a CPU time no clock returns.
  static constexpr int64_t kNever = INT64_MIN / 2;
  static constexpr int64_t kNoCpu = -2;
};

}  // namespace peakline::python

#endif  // PEAKLINE_PYTHON_MAIN_STACK_CACHE_H_
