#include "gpu/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace peakline::gpu {

const char* NvmlReturnName(int code) {
  switch (code) {
    case kNvmlSuccess: return "SUCCESS";
    case kNvmlErrorUninitialized: return "UNINITIALIZED";
    case kNvmlErrorInvalidArgument: return "INVALID_ARGUMENT";
    case kNvmlErrorNotSupported: return "NOT_SUPPORTED";
    case kNvmlErrorNoPermission: return "NO_PERMISSION";
    case kNvmlErrorAlreadyInitialized: return "ALREADY_INITIALIZED";
    case kNvmlErrorNotFound: return "NOT_FOUND";
    case kNvmlErrorInsufficientSize: return "INSUFFICIENT_SIZE";
    case kNvmlErrorInsufficientPower: return "INSUFFICIENT_POWER";
    case kNvmlErrorDriverNotLoaded: return "DRIVER_NOT_LOADED";
    case kNvmlErrorTimeout: return "TIMEOUT";
    case kNvmlErrorIrqIssue: return "IRQ_ISSUE";
    case kNvmlErrorLibraryNotFound: return "LIBRARY_NOT_FOUND";
    case kNvmlErrorFunctionNotFound: return "FUNCTION_NOT_FOUND";
    case kNvmlErrorCorruptedInforom: return "CORRUPTED_INFOROM";
    case kNvmlErrorGpuIsLost: return "GPU_IS_LOST";
    case kNvmlErrorResetRequired: return "RESET_REQUIRED";
    case kNvmlErrorOperatingSystem: return "OPERATING_SYSTEM";
    case kNvmlErrorLibRmVersionMismatch: return "LIB_RM_VERSION_MISMATCH";
    case kNvmlErrorInUse: return "IN_USE";
    case kNvmlErrorMemory: return "MEMORY";
    case kNvmlErrorNoData: return "NO_DATA";
    case kNvmlErrorVgpuEccNotSupported: return "VGPU_ECC_NOT_SUPPORTED";
    case kNvmlErrorInsufficientResources: return "INSUFFICIENT_RESOURCES";
    case kNvmlErrorFreqNotSupported: return "FREQ_NOT_SUPPORTED";
    case kNvmlErrorArgumentVersionMismatch: return "ARGUMENT_VERSION_MISMATCH";
    case kNvmlErrorDeprecated: return "DEPRECATED";
    case kNvmlErrorNotReady: return "NOT_READY";
    case kNvmlErrorGpuNotFound: return "GPU_NOT_FOUND";
    case kNvmlErrorInvalidState: return "INVALID_STATE";
    case kNvmlErrorUnknown: return "UNKNOWN";
    default: return "ERROR_OTHER";
  }
}

namespace {

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  std::string file = path;
  if (file.empty()) {
    const char* env = std::getenv(kNvmlLibraryEnv);
    file = env != nullptr && *env != '\0' ? env : kNvmlDefaultLibrary;
  }
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::Error(file + " not loadable: " + (err ? err : "unknown error"));
  }
  auto init = Symbol<NvmlInitFn>(handle, "nvmlInit_v2");
  auto count = Symbol<NvmlDeviceGetCountFn>(handle, "nvmlDeviceGetCount_v2");
  auto by_index = Symbol<NvmlDeviceGetHandleByIndexFn>(handle, "nvmlDeviceGetHandleByIndex_v2");
  auto name = Symbol<NvmlDeviceGetNameFn>(handle, "nvmlDeviceGetName");
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = handle;
  lib->shutdown_ = Symbol<NvmlShutdownFn>(handle, "nvmlShutdown");
  lib->utilization_ = Symbol<NvmlDeviceGetUtilizationRatesFn>(handle, "nvmlDeviceGetUtilizationRates");
  lib->memory_ = Symbol<NvmlDeviceGetMemoryInfoFn>(handle, "nvmlDeviceGetMemoryInfo");
  lib->processes_v3_ = Symbol<NvmlDeviceGetComputeRunningProcessesV2Fn>(
      handle, "nvmlDeviceGetComputeRunningProcesses_v3");
  lib->processes_v2_ = Symbol<NvmlDeviceGetComputeRunningProcessesV2Fn>(
      handle, "nvmlDeviceGetComputeRunningProcesses_v2");
  if (init == nullptr || count == nullptr || by_index == nullptr || lib->shutdown_ == nullptr) {
    lib->shutdown_ = nullptr;  // never initialised: nothing to shut down
    return Status::Error(file + " is not a usable NVML (nvmlInit_v2/nvmlDeviceGetCount_v2/"
                                "nvmlDeviceGetHandleByIndex_v2/nvmlShutdown missing)");
  }
  if (int rc = init(); rc != kNvmlSuccess) {
    lib->shutdown_ = nullptr;
    return Status::Error(std::string("nvmlInit_v2: ") + NvmlReturnName(rc));
  }
  unsigned n = 0;
  if (int rc = count(&n); rc != kNvmlSuccess) {
    // The destructor shuts NVML down.
    return Status::Error(std::string("nvmlDeviceGetCount_v2: ") + NvmlReturnName(rc));
  }
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice device = nullptr;
    if (by_index(i, &device) != kNvmlSuccess) continue;  // e.g. NO_PERMISSION on one device
    char text[kNvmlDeviceNameBufferSize] = {};
    if (name == nullptr || name(device, text, sizeof(text)) != kNvmlSuccess) text[0] = '\0';
    text[sizeof(text) - 1] = '\0';
    lib->devices_.push_back(device);
    lib->names_.emplace_back(text[0] != '\0' ? text : "NVIDIA GPU");
  }
  if (lib->devices_.empty()) {
    return Status::Error(n == 0 ? "no NVIDIA device" : "no NVIDIA device is accessible");
  }
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (shutdown_ != nullptr) shutdown_();
}

int NvmlLibrary::Utilization(NvmlDevice device, NvmlUtilization* out) const {
  return utilization_ != nullptr ? utilization_(device, out) : kNvmlErrorFunctionNotFound;
}

int NvmlLibrary::Memory(NvmlDevice device, NvmlMemory* out) const {
  return memory_ != nullptr ? memory_(device, out) : kNvmlErrorFunctionNotFound;
}

int NvmlLibrary::ComputeProcesses(NvmlDevice device, std::vector<NvmlProcessInfoV2>* out) {
  for (;;) {
    auto fn = processes_v3_ != nullptr ? processes_v3_ : processes_v2_;
    if (fn == nullptr) return kNvmlErrorFunctionNotFound;
    int rc = kNvmlSuccess;
    unsigned count = 0;
    // Size query, then the real call; the list may grow in between (a process starts), so a
    // second INSUFFICIENT_SIZE re-sizes, a few times at most.
    for (int attempt = 0; attempt < 4; ++attempt) {
      if (attempt == 0) {
        rc = fn(device, &count, nullptr);
        if (rc == kNvmlSuccess) {
          count = 0;
          break;
        }
        if (rc != kNvmlErrorInsufficientSize) break;
      }
      out->resize(count + 8);  // headroom for processes that start meanwhile
      count = static_cast<unsigned>(out->size());
      rc = fn(device, &count, out->data());
      if (rc != kNvmlErrorInsufficientSize) break;
    }
    if (fn == processes_v3_ &&
        (rc == kNvmlErrorFunctionNotFound || rc == kNvmlErrorArgumentVersionMismatch)) {
      processes_v3_ = nullptr;  // a driver that exports but does not implement _v3
      continue;
    }
    out->resize(rc == kNvmlSuccess ? count : 0);
    return rc;
  }
}

}  // namespace peakline::gpu
