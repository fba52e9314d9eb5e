// NvmlLibrary: NVML loaded at run time. dlopen("libnvidia-ml.so.1") (or the file named by the
// environment variable PEAKLINE_NVML_LIBRARY, which the tests point at their stand-in
// library), dlsym of the entry points in gpu/nvml_api.h, nvmlInit_v2. No NVML header, no link
// dependency: a machine without the NVIDIA driver simply has no GPU columns.
//
// Errors are recoverable: Open() fails with a one-line reason; every query returns the raw
// nvmlReturn_t so that the caller can mark exactly that column unavailable.
//
// Thread safety: NVML itself is thread safe; this object is immutable after Open(). The
// library is never dlclose'd (NVML may keep internal threads running after nvmlShutdown, and
// unloading their code under them would crash); nvmlShutdown is called once, by the destructor.
#ifndef PEAKLINE_GPU_NVML_LIBRARY_H_
#define PEAKLINE_GPU_NVML_LIBRARY_H_

#include <memory>
#include <string>
#include <vector>

#include "gpu/nvml_api.h"
#include "status/status.h"

namespace peakline::gpu {

inline constexpr const char* kNvmlDefaultLibrary = "libnvidia-ml.so.1";
inline constexpr const char* kNvmlLibraryEnv = "PEAKLINE_NVML_LIBRARY";

class NvmlLibrary {
 public:
  // `path` empty: $PEAKLINE_NVML_LIBRARY if set, else libnvidia-ml.so.1. Fails saying why
  // ("libnvidia-ml.so.1 not loadable: …", "nvmlInit_v2: DRIVER_NOT_LOADED", "no NVIDIA
  // device", …).
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const std::vector<NvmlDevice>& devices() const { return devices_; }
  const std::vector<std::string>& names() const { return names_; }

  int Utilization(NvmlDevice device, NvmlUtilization* out) const;
  int Memory(NvmlDevice device, NvmlMemory* out) const;
  // Compute processes of `device` into `out` (resized): _v3, or _v2 where the driver predates
  // _v3 (symbol absent, or FUNCTION_NOT_FOUND / ARGUMENT_VERSION_MISMATCH, after which _v3 is
  // not tried again). Sizes the buffer with the count-0 query and retries if the list grew.
  // Not thread safe (the _v3 fallback flag): called from the poller thread only.
  int ComputeProcesses(NvmlDevice device, std::vector<NvmlProcessInfoV2>* out);

 private:
  NvmlLibrary() = default;

  void* handle_ = nullptr;
  NvmlShutdownFn shutdown_ = nullptr;
  NvmlDeviceGetUtilizationRatesFn utilization_ = nullptr;
  NvmlDeviceGetMemoryInfoFn memory_ = nullptr;
  NvmlDeviceGetComputeRunningProcessesV2Fn processes_v3_ = nullptr;
  NvmlDeviceGetComputeRunningProcessesV2Fn processes_v2_ = nullptr;
  std::vector<NvmlDevice> devices_;
  std::vector<std::string> names_;
};

}  // namespace peakline::gpu

#endif  // PEAKLINE_GPU_NVML_LIBRARY_H_
