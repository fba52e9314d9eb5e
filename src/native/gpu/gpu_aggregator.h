// GpuAggregator: turns NVML readings (gpu/nvml_poller.h) and PyTorch's CUDA allocator counters
// into per-stack GPU figures. Driven by session::SamplingSession once per tick (20 ms), GIL held.
//
// Each tick it charges to the MAIN thread's current stack (the line the program is on):
//   * gpu_util_ns += utilisation × tick length, with the latest NVML utilisation (sum over the
//     process's devices, so "GPU-seconds busy"). CUDA kernels run asynchronously: the line that
//     launched a kernel has usually moved on when the GPU is busy with it, so busy time piles up
//     on the lines that wait for the GPU (synchronisation points: .item(), .cpu(), printing a
//     tensor, cudaDeviceSynchronize) and on whatever the CPU runs meanwhile. docs/gpu.md.
//   * gpu_peak_bytes = max(GPU memory the process held during the tick): NVML's per-process
//     figure (device-wide where that is unknown) or PyTorch's reserved bytes, whichever is
//     larger.
//   * the change of the "tracked" GPU memory since the last tick: PyTorch's allocated bytes
//     (torch.cuda.memory_allocated over all devices) once PyTorch has initialised CUDA, else the
//     NVML figure. Increases add to gpu_alloc_bytes; every change adds to gpu_net_bytes. Peak
//     attribution is the memory aggregator's lazy epoch scheme: a new maximum of the tracked
//     total starts an epoch, and the first change of a stack in an epoch saves its value from
//     before; gpu_live_at_peak = saved value if the stack changed after the last peak, else its
//     current value.
//
// PyTorch is read through `torch_probe`, a Python callable (peakline.gpu_torch) that returns
// None or (allocated_bytes, reserved_bytes); peakline never imports torch itself.
//
// Guarded by the GIL (like aggregate::MemoryAggregator); the poller has its own lock.
#ifndef PEAKLINE_GPU_GPU_AGGREGATOR_H_
#define PEAKLINE_GPU_GPU_AGGREGATOR_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aggregate/stack_table.h"
#include "gpu/nvml_poller.h"
#include "python/gil.h"
#include "sync/thread_annotations.h"

namespace peakline::gpu {

// The GPU counters, declared once: X(name, initial value) for each expands to the struct's
// field and to the entry of the profile's GPU statistics under the same name
// (session/profiler.cc, SnapshotOf).
#define PEAKLINE_GPU_STATS(X)                                                               \
  X(readings, 0)                /* NVML readings consumed */                                \
  X(util_readings, 0)           /* ... with a utilisation value */                          \
  X(process_memory_readings, 0) /* ... with this process's own memory */                    \
  X(device_memory_readings, 0)  /* ... with device-wide memory standing in */               \
  X(busy_ns, 0)                 /* sum of utilisation x time (GPU-ns) */                    \
  X(util_observed_ns, 0)        /* sum of time x devices, where utilisation was known */    \
  X(peak_bytes, -1)             /* max memory held (NVML, or torch reserved), -1 unknown */ \
  X(torch_ticks, 0)             /* ticks on which the torch probe answered */               \
  X(torch_probe_errors, 0)      /* probe raised or returned something else */               \
  X(tracked_peak_bytes, -1)     /* max of the tracked series */

struct GpuStats {
#define PEAKLINE_GPU_STATS_FIELD(name, initial) int64_t name = initial;
  PEAKLINE_GPU_STATS(PEAKLINE_GPU_STATS_FIELD)
#undef PEAKLINE_GPU_STATS_FIELD
};

class GpuAggregator {
 public:
  // `poller` may be null (no NVML: then `unavailable` says why); `torch_probe` may be null.
  GpuAggregator(aggregate::StackTable* table, std::unique_ptr<NvmlPoller> poller,
                std::string unavailable, PyObject* torch_probe);
  ~GpuAggregator();  // GIL held (drops the probe reference)

  // GIL held: baseline readings, then the poller thread starts.
  void Start(int64_t now_ns) PEAKLINE_REQUIRES(python::gil);
  // Without the GIL: stops the poller thread (readings still queued are drained later).
  void StopThread();
  // GIL held, once per tick. `main_stack` returns the StackTable index of the main thread's
  // current stack; it is called at most once, after every Python call of the tick.
  void OnTick(int64_t now_ns, const std::function<uint32_t()>& main_stack)
      PEAKLINE_REQUIRES(python::gil);

  int64_t LiveAtPeak(const aggregate::StackCounters& c) const {
    return c.gpu_peak_epoch == epoch_ ? c.gpu_net_at_epoch_start : c.gpu_net_bytes;
  }
  const NvmlPoller* poller() const { return poller_.get(); }
  const std::string& unavailable() const { return unavailable_; }
  const GpuStats& stats() const { return stats_; }
  // Anything measured at all: a device was found, or PyTorch answered.
  bool measured() const { return poller_ != nullptr || stats_.torch_ticks > 0; }

 private:
  bool ProbeTorch(int64_t* allocated, int64_t* reserved);

  aggregate::StackTable* table_;
  std::unique_ptr<NvmlPoller> poller_;
  const std::string unavailable_;
  PyObject* torch_probe_;  // strong reference or null

  std::vector<GpuReading> readings_;  // reused
  int64_t last_tick_ns_ = 0;
  int32_t util_pct_ = -1;  // latest reading
  int32_t util_devices_ = 0;
  int64_t nvml_bytes_ = -1;
  bool tracking_torch_ = false;
  int64_t last_tracked_ = -1;  // -1: no baseline yet
  uint64_t epoch_ = 1;
  GpuStats stats_;
};

}  // namespace peakline::gpu

#endif  // PEAKLINE_GPU_GPU_AGGREGATOR_H_
