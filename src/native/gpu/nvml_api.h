// The slice of the NVML C API that peakline calls, declared here from NVIDIA's public NVML API
// reference (docs.nvidia.com/deploy/nvml-api) so that building peakline needs no CUDA toolkit
// and no NVIDIA header. Only the types and entry points listed below are used; all of them are
// resolved at run time with dlsym (gpu/nvml_library.h), never linked.
//
// ABI notes (these are the pitfalls the struct versions exist for):
// * nvmlReturn_t and the enums are C enums: `int` on every Linux ABI NVML ships for.
// * nvmlProcessInfo_v2_t (pid, usedGpuMemory, gpuInstanceId, computeInstanceId; 24 bytes with
//   the padding after pid) is the element type of BOTH ..._v2 and ..._v3 of
//   nvmlDeviceGetComputeRunningProcesses. The unsuffixed v1 entry point fills the 16-byte
//   nvmlProcessInfo_v1_t instead; reading a v1 buffer with the v2 layout (or the reverse)
//   gives swapped/garbage fields, so each entry point is paired with its
//   own struct below and the sizes are checked at compile time.
// * usedGpuMemory is NVML_VALUE_NOT_AVAILABLE (all bits set) when the driver cannot tell
//   (Windows WDDM, some vGPU/MIG set-ups, missing privileges).
#ifndef PEAKLINE_GPU_NVML_API_H_
#define PEAKLINE_GPU_NVML_API_H_

#include <cstdint>

namespace peakline::gpu {

// nvmlReturn_t values (NVML API reference, "Error reporting").
enum NvmlReturn : int {
  kNvmlSuccess = 0,
  kNvmlErrorUninitialized = 1,
  kNvmlErrorInvalidArgument = 2,
  kNvmlErrorNotSupported = 3,
  kNvmlErrorNoPermission = 4,
  kNvmlErrorAlreadyInitialized = 5,
  kNvmlErrorNotFound = 6,
  kNvmlErrorInsufficientSize = 7,
  kNvmlErrorInsufficientPower = 8,
  kNvmlErrorDriverNotLoaded = 9,
  kNvmlErrorTimeout = 10,
  kNvmlErrorIrqIssue = 11,
  kNvmlErrorLibraryNotFound = 12,
  kNvmlErrorFunctionNotFound = 13,
  kNvmlErrorCorruptedInforom = 14,
  kNvmlErrorGpuIsLost = 15,
  kNvmlErrorResetRequired = 16,
  kNvmlErrorOperatingSystem = 17,
  kNvmlErrorLibRmVersionMismatch = 18,
  kNvmlErrorInUse = 19,
  kNvmlErrorMemory = 20,
  kNvmlErrorNoData = 21,
  kNvmlErrorVgpuEccNotSupported = 22,
  kNvmlErrorInsufficientResources = 23,
  kNvmlErrorFreqNotSupported = 24,
  kNvmlErrorArgumentVersionMismatch = 25,
  kNvmlErrorDeprecated = 26,
  kNvmlErrorNotReady = 27,
  kNvmlErrorGpuNotFound = 28,
  kNvmlErrorInvalidState = 29,
  kNvmlErrorUnknown = 999,
};

// NVML_DEVICE_NAME_V2_BUFFER_SIZE: enough for every device name.
inline constexpr unsigned kNvmlDeviceNameBufferSize = 96;
// NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

struct NvmlDeviceOpaque;                   // struct nvmlDevice_st
using NvmlDevice = NvmlDeviceOpaque*;      // nvmlDevice_t

struct NvmlUtilization {  // nvmlUtilization_t: percent of the last sample period (1/6 s to 1 s)
  unsigned int gpu;       // a kernel was running
  unsigned int memory;    // device memory was being read or written
};

struct NvmlMemory {  // nvmlMemory_t (v1), bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlProcessInfoV1 {  // nvmlProcessInfo_v1_t: unsuffixed ...GetComputeRunningProcesses
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

struct NvmlProcessInfoV2 {  // nvmlProcessInfo_v2_t: ..._v2 and ..._v3
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // MIG only, else all bits set
  unsigned int computeInstanceId;  // MIG only, else all bits set
};

static_assert(sizeof(NvmlUtilization) == 8);
static_assert(sizeof(NvmlMemory) == 24);
static_assert(sizeof(NvmlProcessInfoV1) == 16);
static_assert(sizeof(NvmlProcessInfoV2) == 24);

// Entry points (all `extern "C"` in libnvidia-ml.so.1, returning nvmlReturn_t).
extern "C" {
using NvmlInitFn = int (*)();                                           // nvmlInit_v2
using NvmlShutdownFn = int (*)();                                       // nvmlShutdown
using NvmlDeviceGetCountFn = int (*)(unsigned int* count);              // nvmlDeviceGetCount_v2
using NvmlDeviceGetHandleByIndexFn = int (*)(unsigned int index,        // ..._v2
                                             NvmlDevice* device);
using NvmlDeviceGetNameFn = int (*)(NvmlDevice device, char* name, unsigned int length);
using NvmlDeviceGetUtilizationRatesFn = int (*)(NvmlDevice device, NvmlUtilization* utilization);
using NvmlDeviceGetMemoryInfoFn = int (*)(NvmlDevice device, NvmlMemory* memory);
using NvmlDeviceGetComputeRunningProcessesV2Fn =  // _v2 and _v3: NvmlProcessInfoV2 elements
    int (*)(NvmlDevice device, unsigned int* info_count, NvmlProcessInfoV2* infos);
}

// "NOT_SUPPORTED" for kNvmlErrorNotSupported, …; "ERROR_<n>" for codes not listed above.
const char* NvmlReturnName(int code);

}  // namespace peakline::gpu

#endif  // PEAKLINE_GPU_NVML_API_H_
