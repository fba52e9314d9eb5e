/* libfake_nvml.so: a stand-in for libnvidia-ml.so.1 with scripted answers, for testing peakline's
 * NVML poller on machines without an NVIDIA GPU (tests/native/gpu_*_test.cc,
 * tests/python/test_gpu.py). It exports the entry points peakline resolves (same names and C
 * signatures as NVML) plus a few `fake_nvml_*` control functions, callable from C or ctypes.
 *
 * Initial state comes from the environment, read by nvmlInit_v2 the first time it runs:
 *   FAKE_NVML_DEVICES        device count (default 1; 0 = driver with no device)
 *   FAKE_NVML_NAME           device name (default "Fake GPU")
 *   FAKE_NVML_UTIL           utilisation percent of every device (default 0)
 *   FAKE_NVML_MEM_TOTAL      bytes (default 16 GiB)
 *   FAKE_NVML_MEM_USED       device-wide used bytes (default 0)
 *   FAKE_NVML_PROC_PID       pid of the one listed compute process ("self" = the caller's pid;
 *                            unset = no process listed)
 *   FAKE_NVML_PROC_BYTES     that process's usedGpuMemory (default 0)
 *   FAKE_NVML_FAIL           "entry=code,entry=code": that entry point returns that nvmlReturn_t
 *                            (e.g. "nvmlDeviceGetUtilizationRates=3"; entry names as exported)
 *   FAKE_NVML_NO_V3          "1": nvmlDeviceGetComputeRunningProcesses_v3 answers
 *                            FUNCTION_NOT_FOUND (a pre-v3 driver)
 * Later changes: the fake_nvml_* setters. All state is guarded by one mutex: the poller thread
 * reads while the test (or the profiled script, through ctypes) writes.
 *
 * Process lists honour the NVML size protocol: *count smaller than the list (0 for the size
 * query) -> *count = list length, NVML_ERROR_INSUFFICIENT_SIZE. Elements are written with the
 * nvmlProcessInfo_v2_t layout for both _v2 and _v3. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_DEVICES 8
#define FAKE_MAX_PROCS 16
#define FAKE_MAX_FAILS 16

enum {
  kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
  kInsufficientSize = 7, kFunctionNotFound = 13
};

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} ProcessInfoV2;

typedef struct {
  char name[96];
  unsigned int util;
  unsigned long long mem_total, mem_used;
  int nprocs;
  unsigned int pids[FAKE_MAX_PROCS];
  unsigned long long proc_bytes[FAKE_MAX_PROCS];
} FakeDevice;

typedef struct {
  char entry[64];
  int code;
} Failure;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_configured = 0;
static int g_init_count = 0;
static int g_ndevices = 1;
static int g_no_v3 = 0;
static FakeDevice g_devices[FAKE_MAX_DEVICES];
static Failure g_fails[FAKE_MAX_FAILS];
static int g_nfails = 0;
static long g_calls_v3 = 0, g_calls_v2 = 0, g_calls_util = 0;

static unsigned long long EnvU64(const char* name, unsigned long long fallback) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : fallback;
}

static void AddFailure(const char* entry, int code) {
  for (int i = 0; i < g_nfails; ++i) {
    if (strcmp(g_fails[i].entry, entry) == 0) {
      g_fails[i].code = code;
      return;
    }
  }
  if (g_nfails < FAKE_MAX_FAILS) {
    snprintf(g_fails[g_nfails].entry, sizeof(g_fails[g_nfails].entry), "%s", entry);
    g_fails[g_nfails].code = code;
    ++g_nfails;
  }
}

static void ConfigureLocked(void) {
  if (g_configured) return;
  g_configured = 1;
  g_ndevices = (int)EnvU64("FAKE_NVML_DEVICES", 1);
  if (g_ndevices > FAKE_MAX_DEVICES) g_ndevices = FAKE_MAX_DEVICES;
  const char* name = getenv("FAKE_NVML_NAME");
  const char* pid = getenv("FAKE_NVML_PROC_PID");
  for (int d = 0; d < FAKE_MAX_DEVICES; ++d) {
    FakeDevice* dev = &g_devices[d];
    snprintf(dev->name, sizeof(dev->name), "%s", name && *name ? name : "Fake GPU");
    dev->util = (unsigned)EnvU64("FAKE_NVML_UTIL", 0);
    dev->mem_total = EnvU64("FAKE_NVML_MEM_TOTAL", 16ULL << 30);
    dev->mem_used = EnvU64("FAKE_NVML_MEM_USED", 0);
    dev->nprocs = 0;
    if (pid && *pid) {
      dev->pids[0] = strcmp(pid, "self") == 0 ? (unsigned)getpid() : (unsigned)strtoul(pid, NULL, 10);
      dev->proc_bytes[0] = EnvU64("FAKE_NVML_PROC_BYTES", 0);
      dev->nprocs = 1;
    }
  }
  g_no_v3 = EnvU64("FAKE_NVML_NO_V3", 0) != 0;
  const char* fails = getenv("FAKE_NVML_FAIL");
  if (fails) {
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", fails);
    char* save = NULL;
    for (char* item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
      char* eq = strchr(item, '=');
      if (!eq) continue;
      *eq = '\0';
      AddFailure(item, atoi(eq + 1));
    }
  }
}

/* The scripted error of `entry`, or kSuccess. Call with g_mu held. */
static int FailureLocked(const char* entry) {
  ConfigureLocked();
  for (int i = 0; i < g_nfails; ++i) {
    if (strcmp(g_fails[i].entry, entry) == 0) return g_fails[i].code;
  }
  return kSuccess;
}

/* Common prologue: lock, scripted failure, initialised, valid device. */
static int EnterDevice(const char* entry, void* device, FakeDevice** out) {
  pthread_mutex_lock(&g_mu);
  int rc = FailureLocked(entry);
  if (rc == kSuccess && g_init_count == 0) rc = kUninitialized;
  if (rc == kSuccess) {
    FakeDevice* dev = (FakeDevice*)device;
    if (dev < g_devices || dev >= g_devices + g_ndevices) rc = kInvalidArgument;
    *out = dev;
  }
  if (rc != kSuccess) pthread_mutex_unlock(&g_mu);
  return rc;
}

/* ---- NVML entry points ---------------------------------------------------------------- */

FAKE_EXPORT int nvmlInit_v2(void) {
  pthread_mutex_lock(&g_mu);
  int rc = FailureLocked("nvmlInit_v2");
  if (rc == kSuccess) ++g_init_count;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

FAKE_EXPORT int nvmlShutdown(void) {
  pthread_mutex_lock(&g_mu);
  int rc = g_init_count > 0 ? kSuccess : kUninitialized;
  if (g_init_count > 0) --g_init_count;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

FAKE_EXPORT int nvmlDeviceGetCount_v2(unsigned int* count) {
  pthread_mutex_lock(&g_mu);
  int rc = FailureLocked("nvmlDeviceGetCount_v2");
  if (rc == kSuccess && g_init_count == 0) rc = kUninitialized;
  if (rc == kSuccess && !count) rc = kInvalidArgument;
  if (rc == kSuccess) *count = (unsigned)g_ndevices;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

FAKE_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  pthread_mutex_lock(&g_mu);
  int rc = FailureLocked("nvmlDeviceGetHandleByIndex_v2");
  if (rc == kSuccess && g_init_count == 0) rc = kUninitialized;
  if (rc == kSuccess && (!device || index >= (unsigned)g_ndevices)) rc = kInvalidArgument;
  if (rc == kSuccess) *device = &g_devices[index];
  pthread_mutex_unlock(&g_mu);
  return rc;
}

FAKE_EXPORT int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  FakeDevice* dev;
  int rc = EnterDevice("nvmlDeviceGetName", device, &dev);
  if (rc != kSuccess) return rc;
  if (!name || strlen(dev->name) + 1 > length) {
    rc = kInsufficientSize;
  } else {
    memcpy(name, dev->name, strlen(dev->name) + 1);
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

FAKE_EXPORT int nvmlDeviceGetUtilizationRates(void* device, unsigned int* utilization) {
  FakeDevice* dev;
  int rc = EnterDevice("nvmlDeviceGetUtilizationRates", device, &dev);
  if (rc != kSuccess) return rc;
  ++g_calls_util;
  utilization[0] = dev->util;  /* nvmlUtilization_t {gpu, memory} */
  utilization[1] = dev->util / 2;
  pthread_mutex_unlock(&g_mu);
  return kSuccess;
}

FAKE_EXPORT int nvmlDeviceGetMemoryInfo(void* device, unsigned long long* memory) {
  FakeDevice* dev;
  int rc = EnterDevice("nvmlDeviceGetMemoryInfo", device, &dev);
  if (rc != kSuccess) return rc;
  memory[0] = dev->mem_total;  /* nvmlMemory_t {total, free, used} */
  memory[1] = dev->mem_total - dev->mem_used;
  memory[2] = dev->mem_used;
  pthread_mutex_unlock(&g_mu);
  return kSuccess;
}

static int Processes(const char* entry, void* device, unsigned int* count, ProcessInfoV2* infos) {
  FakeDevice* dev;
  int rc = EnterDevice(entry, device, &dev);
  if (rc != kSuccess) return rc;
  if (!count) {
    rc = kInvalidArgument;
  } else if (*count < (unsigned)dev->nprocs) {
    *count = (unsigned)dev->nprocs;
    rc = kInsufficientSize;
  } else if (dev->nprocs > 0 && !infos) {
    rc = kInvalidArgument;
  } else {
    for (int i = 0; i < dev->nprocs; ++i) {
      infos[i].pid = dev->pids[i];
      infos[i].usedGpuMemory = dev->proc_bytes[i];
      infos[i].gpuInstanceId = 0xFFFFFFFFu;
      infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    *count = (unsigned)dev->nprocs;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

FAKE_EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                        ProcessInfoV2* infos) {
  pthread_mutex_lock(&g_mu);
  ConfigureLocked();
  ++g_calls_v3;
  const int no_v3 = g_no_v3;
  pthread_mutex_unlock(&g_mu);
  if (no_v3) return kFunctionNotFound;
  return Processes("nvmlDeviceGetComputeRunningProcesses_v3", device, count, infos);
}

FAKE_EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(void* device, unsigned int* count,
                                                        ProcessInfoV2* infos) {
  pthread_mutex_lock(&g_mu);
  ++g_calls_v2;
  pthread_mutex_unlock(&g_mu);
  return Processes("nvmlDeviceGetComputeRunningProcesses_v2", device, count, infos);
}

/* ---- control ---------------------------------------------------------------------------- */

static FakeDevice* DeviceLocked(int index) {
  ConfigureLocked();
  return index >= 0 && index < FAKE_MAX_DEVICES ? &g_devices[index] : NULL;
}

FAKE_EXPORT void fake_nvml_set_utilization(int device, unsigned int gpu_pct) {
  pthread_mutex_lock(&g_mu);
  FakeDevice* dev = DeviceLocked(device);
  if (dev) dev->util = gpu_pct;
  pthread_mutex_unlock(&g_mu);
}

FAKE_EXPORT void fake_nvml_set_memory(int device, unsigned long long used_bytes,
                                      unsigned long long total_bytes) {
  pthread_mutex_lock(&g_mu);
  FakeDevice* dev = DeviceLocked(device);
  if (dev) {
    dev->mem_used = used_bytes;
    dev->mem_total = total_bytes;
  }
  pthread_mutex_unlock(&g_mu);
}

/* Sets (adds, or updates) the usedGpuMemory of `pid` on `device`; pid 0 = the caller's pid. */
FAKE_EXPORT void fake_nvml_set_process(int device, unsigned int pid, unsigned long long bytes) {
  pthread_mutex_lock(&g_mu);
  FakeDevice* dev = DeviceLocked(device);
  if (pid == 0) pid = (unsigned)getpid();
  if (dev) {
    int i = 0;
    while (i < dev->nprocs && dev->pids[i] != pid) ++i;
    if (i < FAKE_MAX_PROCS) {
      dev->pids[i] = pid;
      dev->proc_bytes[i] = bytes;
      if (i == dev->nprocs) ++dev->nprocs;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

FAKE_EXPORT void fake_nvml_clear_processes(int device) {
  pthread_mutex_lock(&g_mu);
  FakeDevice* dev = DeviceLocked(device);
  if (dev) dev->nprocs = 0;
  pthread_mutex_unlock(&g_mu);
}

FAKE_EXPORT void fake_nvml_set_device_count(int count) {
  pthread_mutex_lock(&g_mu);
  ConfigureLocked();
  g_ndevices = count < 0 ? 0 : count > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : count;
  pthread_mutex_unlock(&g_mu);
}

FAKE_EXPORT void fake_nvml_set_no_v3(int no_v3) {
  pthread_mutex_lock(&g_mu);
  ConfigureLocked();
  g_no_v3 = no_v3;
  pthread_mutex_unlock(&g_mu);
}

/* `entry` returns `code` from now on; code 0 removes the failure. */
FAKE_EXPORT void fake_nvml_fail(const char* entry, int code) {
  pthread_mutex_lock(&g_mu);
  ConfigureLocked();
  AddFailure(entry, code);
  pthread_mutex_unlock(&g_mu);
}

/* Back to the environment's state, failures and counters cleared (for in-process tests). */
FAKE_EXPORT void fake_nvml_reset(void) {
  pthread_mutex_lock(&g_mu);
  g_configured = 0;
  g_nfails = 0;
  g_init_count = 0;
  g_calls_v3 = g_calls_v2 = g_calls_util = 0;
  ConfigureLocked();
  pthread_mutex_unlock(&g_mu);
}

/* How often an entry point was called ("v3", "v2", "util"), and the init reference count. */
FAKE_EXPORT long fake_nvml_calls(const char* what) {
  pthread_mutex_lock(&g_mu);
  long n = strcmp(what, "v3") == 0 ? g_calls_v3 : strcmp(what, "v2") == 0 ? g_calls_v2
         : strcmp(what, "util") == 0 ? g_calls_util : strcmp(what, "init") == 0 ? g_init_count : -1;
  pthread_mutex_unlock(&g_mu);
  return n;
}
