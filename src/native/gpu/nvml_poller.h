// NvmlPoller: a background thread that reads NVML a few times a second and queues GpuReadings
// for the sampling session. NVML calls take tens of microseconds to milliseconds (they may
// enter the kernel driver), so they never run on a sampling path: Scalene calls NVML on every CPU sample
// (scalene_profiler.py → scalene_nvidia_gpu.py); we poll at 10 Hz instead, and the session's
// 20 ms tick picks the readings up (docs/gpu.md).
//
// One reading covers every accessible device:
//   * util_pct: sum of nvmlDeviceGetUtilizationRates().gpu over the devices this process has a
//     compute context on, or over all devices when that is not known (several busy GPUs can
//     sum past 100: the unit is "GPUs busy", like CPU time over several cores);
//   * memory_bytes: this process's GPU memory, the sum of its usedGpuMemory entries in
//     nvmlDeviceGetComputeRunningProcesses_v3 (or _v2) — MemorySource::kProcess. When the
//     per-process figure is unknown (the query fails, usedGpuMemory is NOT_AVAILABLE, or the
//     driver lists only foreign PIDs while we live in a PID namespace: containers see host
//     PIDs) the device-wide used memory of nvmlDeviceGetMemoryInfo stands in,
//     marked MemorySource::kDevice (it includes other processes). An absent entry means "no
//     CUDA context yet" (0 bytes, kProcess) unless the listed PIDs look foreign: we are in a
//     nested PID namespace, or a listed PID is no process visible to us.
// Every NVML error makes only its own column unknown for that reading (-1 / kNone) and is
// counted per (column, code); a lost GPU or a driver unloaded mid-run never stops the program.
//
// Thread safety: readings_, dropped_ and the error counts are guarded by mu_ (not a hot path:
// 10 pushes and ~50 drains a second). The NVML library object is used by the poller thread
// only once Start() has run (PollOnce() before Start() or after Stop() is fine).
#ifndef PEAKLINE_GPU_NVML_POLLER_H_
#define PEAKLINE_GPU_NVML_POLLER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/nvml_api.h"
#include "gpu/nvml_library.h"
#include "status/status.h"
#include "sync/mutex.h"
#include "sync/thread_annotations.h"

namespace peakline::gpu {

enum class MemorySource : uint8_t {
  kNone = 0,     // unknown
  kProcess = 1,  // this process's own usedGpuMemory
  kDevice = 2,   // device-wide used memory (per-process unknown), other processes included
};

struct GpuReading {
  int64_t t_ns = 0;             // CLOCK_MONOTONIC
  int32_t util_pct = -1;        // -1: unavailable
  int32_t util_devices = 0;     // devices summed into util_pct
  int64_t memory_bytes = -1;    // -1: unavailable
  MemorySource memory_source = MemorySource::kNone;
};

// The NVML queries whose failures are reported, one "column" each.
enum class GpuQuery : uint8_t { kUtilization = 0, kMemory = 1, kProcesses = 2 };
const char* GpuQueryName(GpuQuery query);  // "utilization", "memory", "processes"

struct NvmlPollerOptions {
  std::string library_path;              // "" = $PEAKLINE_NVML_LIBRARY or libnvidia-ml.so.1
  int64_t interval_ns = 100'000'000;     // 10 Hz
  pid_t pid = 0;                         // 0 = getpid()
  int pid_namespace = -1;                // -1 = detect (/proc/self/status NSpid), 0/1 = forced
  size_t max_buffered = 1024;            // readings kept when nobody drains (oldest dropped)
  void (*on_thread_start)() = nullptr;   // run first on the poller thread (e.g. mark it internal)
};

class NvmlPoller {
 public:
  // Fails saying why when NVML or a device is missing (see NvmlLibrary::Open).
  static Result<std::unique_ptr<NvmlPoller>> Open(const NvmlPollerOptions& options);
  ~NvmlPoller();  // stops the thread
  NvmlPoller(const NvmlPoller&) = delete;
  NvmlPoller& operator=(const NvmlPoller&) = delete;

  void Start();
  void Stop();
  // One synchronous poll: queues a reading and returns it (tests; the baseline at start).
  GpuReading PollOnce();
  // Moves every queued reading to `out` (appended, oldest first). Takes mu_.
  void Drain(std::vector<GpuReading>* out);

  const std::vector<std::string>& device_names() const { return library_->names(); }
  bool pid_namespace() const { return pid_namespace_; }
  int64_t interval_ns() const { return options_.interval_ns; }
  // The poller thread's kernel tid while it runs, else 0 (the CPU sampler skips it).
  pid_t thread_tid() const { return thread_tid_.load(std::memory_order_relaxed); }
  int64_t polls() const;
  int64_t dropped() const;
  // ((query, nvmlReturn_t) -> number of polls that failed so), sorted.
  std::vector<std::pair<std::pair<GpuQuery, int>, int64_t>> Errors() const;

 private:
  NvmlPoller(const NvmlPollerOptions& options, std::unique_ptr<NvmlLibrary> library);
  GpuReading Read();
  void CountError(GpuQuery query, int code);
  void Run() PEAKLINE_EXCLUDES(mu_);

  const NvmlPollerOptions options_;
  std::unique_ptr<NvmlLibrary> library_;
  pid_t pid_ = 0;
  bool pid_namespace_ = false;
  std::vector<NvmlProcessInfoV2> processes_;  // poller thread only (reused buffer)

  mutable Mutex mu_;
  CondVar cv_;  // rung by Stop
  bool stop_ PEAKLINE_GUARDED_BY(mu_) = false;
  std::vector<GpuReading> readings_ PEAKLINE_GUARDED_BY(mu_);
  int64_t polls_ PEAKLINE_GUARDED_BY(mu_) = 0;
  int64_t dropped_ PEAKLINE_GUARDED_BY(mu_) = 0;
  std::map<std::pair<GpuQuery, int>, int64_t> errors_ PEAKLINE_GUARDED_BY(mu_);
  std::thread thread_;
  std::atomic<pid_t> thread_tid_{0};
};

// True when this process lives in a nested PID namespace (the last "NSpid:" line of
// /proc/self/status lists more than one id): NVML then reports PIDs we cannot match.
bool InNestedPidNamespace();
// /proc/<pid> exists: a process of our PID namespace.
bool ProcessVisible(unsigned pid);

}  // namespace peakline::gpu

#endif  // PEAKLINE_GPU_NVML_POLLER_H_
