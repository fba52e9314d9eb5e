// StackTable: the aggregated CPU/wait profile — interned strings, frames (file, function,
// line) and stacks, each stack with its time counters. Its size grows with the number of
// distinct line-level call paths of the program, not with run time.
//
// Not thread safe: owned by the sampling session (all access under the GIL, see
// session/sampling_session.h).
#ifndef PEAKLINE_AGGREGATE_STACK_TABLE_H_
#define PEAKLINE_AGGREGATE_STACK_TABLE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace peakline::aggregate {

struct FrameKey {
  uint32_t file_id;
  uint32_t function_id;
  int32_t first_lineno;
  int32_t lineno;
  bool operator==(const FrameKey&) const = default;
};

struct StackCounters {
  int64_t cpu_python_ns = 0;
  int64_t cpu_native_ns = 0;
  int64_t cpu_system_ns = 0;
  int64_t wait_ns = 0;       // off-CPU: sleep, I/O, locks, the GIL
  int64_t run_delay_ns = 0;  // off-CPU: runnable but not scheduled (cpu/thread_slot.h)
  int64_t cpu_samples = 0;
  int64_t wait_samples = 0;
  // Memory (sampled estimates, bytes). Frees are charged to the stack that allocated.
  int64_t alloc_python_bytes = 0;
  int64_t alloc_native_bytes = 0;
  int64_t free_bytes = 0;
  int64_t live_bytes = 0;
  int64_t copy_bytes = 0;
  int64_t alloc_samples = 0;
  // The estimated variance of live_bytes (bytes^2): the sum over its live sampled blocks of
  // w (w - s), w the block's weight and s its size (docs/sampling.md); ~0 for large blocks.
  double live_variance = 0;
  // Lazy peak snapshot: live_bytes and live_variance as they were when peak epoch
  // `peak_epoch` began.
  uint64_t peak_epoch = 0;
  int64_t live_at_epoch_start = 0;
  double variance_at_epoch_start = 0;
  // GPU (gpu/gpu_aggregator.h): charged to the main thread's stack once per tick.
  int64_t gpu_util_ns = 0;       // GPU busy time (utilisation × tick length)
  int64_t gpu_peak_bytes = 0;    // most GPU memory the process held while this stack ran
  int64_t gpu_alloc_bytes = 0;   // increases of the tracked GPU memory
  int64_t gpu_net_bytes = 0;     // increases minus decreases
  uint64_t gpu_peak_epoch = 0;   // lazy peak snapshot, as for memory above
  int64_t gpu_net_at_epoch_start = 0;
};

struct StackRow {
  pid_t tid;
  std::vector<uint32_t> frames;  // frame ids, leaf first
  StackCounters counters;
};

class StackTable {
 public:
  uint32_t InternString(std::string_view s);
  uint32_t InternFrame(const FrameKey& key);
  // The counters of (tid, frames[0..n)), created empty on first use.
  StackCounters& Stack(pid_t tid, const uint32_t* frames, size_t n) {
    return stacks_[StackIndex(tid, frames, n)].counters;
  }
  // Stable index of a stack (references into the table are not stable).
  uint32_t StackIndex(pid_t tid, const uint32_t* frames, size_t n);
  StackCounters& counters(uint32_t index) { return stacks_[index].counters; }

  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<FrameKey>& frames() const { return frames_; }
  const std::vector<StackRow>& stacks() const { return stacks_; }

 private:
  struct FrameHash {
    size_t operator()(const FrameKey& k) const;
  };
  struct StackKeyHash {
    size_t operator()(const std::pair<pid_t, std::vector<uint32_t>>& k) const;
  };

  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_ids_;
  std::vector<FrameKey> frames_;
  std::unordered_map<FrameKey, uint32_t, FrameHash> frame_ids_;
  std::vector<StackRow> stacks_;
  std::unordered_map<std::pair<pid_t, std::vector<uint32_t>>, uint32_t, StackKeyHash> stack_ids_;
  std::pair<pid_t, std::vector<uint32_t>> probe_;  // reused lookup key: no allocation per sample
};

}  // namespace peakline::aggregate

#endif  // PEAKLINE_AGGREGATE_STACK_TABLE_H_
