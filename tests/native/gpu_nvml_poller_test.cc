// NvmlPoller and NvmlLibrary against libfake_nvml.so (tests/native/fake_nvml/fake_nvml.c), whose
// answers the tests script through its fake_nvml_* control functions. Deterministic: every
// reading here comes from a synchronous PollOnce() except in the thread tests, which only
// check counts with wide margins.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/nvml_api.h"
#include "gpu/nvml_library.h"
#include "gpu/nvml_poller.h"

namespace peakline::gpu {
namespace {

struct Fake {
  void (*reset)();
  void (*set_utilization)(int, unsigned);
  void (*set_memory)(int, unsigned long long, unsigned long long);
  void (*set_process)(int, unsigned, unsigned long long);
  void (*clear_processes)(int);
  void (*set_device_count)(int);
  void (*set_no_v3)(int);
  void (*fail)(const char*, int);
  long (*calls)(const char*);
};

class NvmlPollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(PEAKLINE_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    f_.reset = Sym<decltype(f_.reset)>("fake_nvml_reset");
    f_.set_utilization = Sym<decltype(f_.set_utilization)>("fake_nvml_set_utilization");
    f_.set_memory = Sym<decltype(f_.set_memory)>("fake_nvml_set_memory");
    f_.set_process = Sym<decltype(f_.set_process)>("fake_nvml_set_process");
    f_.clear_processes = Sym<decltype(f_.clear_processes)>("fake_nvml_clear_processes");
    f_.set_device_count = Sym<decltype(f_.set_device_count)>("fake_nvml_set_device_count");
    f_.set_no_v3 = Sym<decltype(f_.set_no_v3)>("fake_nvml_set_no_v3");
    f_.fail = Sym<decltype(f_.fail)>("fake_nvml_fail");
    f_.calls = Sym<decltype(f_.calls)>("fake_nvml_calls");
    f_.reset();
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }
  template <typename T>
  T Sym(const char* name) {
    void* p = dlsym(handle_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<T>(p);
  }
  std::unique_ptr<NvmlPoller> Open(int pid_namespace = 0, size_t max_buffered = 1024) {
    NvmlPollerOptions o;
    o.library_path = PEAKLINE_FAKE_NVML_PATH;
    o.pid_namespace = pid_namespace;
    o.max_buffered = max_buffered;
    Result<std::unique_ptr<NvmlPoller>> p = NvmlPoller::Open(o);
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok()) return nullptr;
    return std::move(p).value();
  }
  int64_t ErrorCount(const NvmlPoller& p, GpuQuery q, int code) {
    for (const auto& [key, n] : p.Errors()) {
      if (key.first == q && key.second == code) return n;
    }
    return 0;
  }

  void* handle_ = nullptr;
  Fake f_{};
};

TEST_F(NvmlPollerTest, MissingLibraryIsAReasonNotACrash) {
  NvmlPollerOptions o;
  o.library_path = "/nonexistent/libnvidia-ml.so.1";
  const std::string why = NvmlPoller::Open(o).status().message();
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
}

TEST_F(NvmlPollerTest, LibraryWithoutNvmlSymbolsIsRejected) {
  const std::string why = NvmlLibrary::Open("libc.so.6").status().message();
  EXPECT_NE(why.find("not a usable NVML"), std::string::npos) << why;
}

TEST_F(NvmlPollerTest, EnvironmentVariableNamesTheLibrary) {
  setenv(kNvmlLibraryEnv, PEAKLINE_FAKE_NVML_PATH, 1);
  Result<std::unique_ptr<NvmlLibrary>> lib = NvmlLibrary::Open("");
  unsetenv(kNvmlLibraryEnv);
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  ASSERT_NE(lib.value(), nullptr);
  EXPECT_EQ(lib.value()->names(), std::vector<std::string>{"Fake GPU"});
}

TEST_F(NvmlPollerTest, InitFailuresAndNoDeviceGiveReasons) {
  const std::pair<int, const char*> cases[] = {
      {kNvmlErrorDriverNotLoaded, "DRIVER_NOT_LOADED"}, {kNvmlErrorNoPermission, "NO_PERMISSION"},
      {kNvmlErrorLibRmVersionMismatch, "LIB_RM_VERSION_MISMATCH"}, {kNvmlErrorUnknown, "UNKNOWN"}};
  for (const auto& [code, name] : cases) {
    f_.reset();
    f_.fail("nvmlInit_v2", code);
    EXPECT_EQ(NvmlLibrary::Open(PEAKLINE_FAKE_NVML_PATH).status().message(),
              std::string("nvmlInit_v2: ") + name);
  }
  f_.reset();
  f_.set_device_count(0);
  EXPECT_EQ(NvmlLibrary::Open(PEAKLINE_FAKE_NVML_PATH).status().message(), "no NVIDIA device");
  EXPECT_EQ(f_.calls("init"), 0) << "nvmlShutdown must balance nvmlInit_v2";
  f_.reset();
  f_.fail("nvmlDeviceGetHandleByIndex_v2", kNvmlErrorNoPermission);
  EXPECT_EQ(NvmlLibrary::Open(PEAKLINE_FAKE_NVML_PATH).status().message(),
            "no NVIDIA device is accessible");
  f_.reset();
  f_.fail("nvmlDeviceGetCount_v2", kNvmlErrorGpuIsLost);
  EXPECT_EQ(NvmlLibrary::Open(PEAKLINE_FAKE_NVML_PATH).status().message(),
            "nvmlDeviceGetCount_v2: GPU_IS_LOST");
}

TEST_F(NvmlPollerTest, ReadsScriptedUtilisationAndOwnProcessMemory) {
  f_.set_utilization(0, 73);
  f_.set_memory(0, 5ULL << 30, 16ULL << 30);
  f_.set_process(0, 0, 3ULL << 30);  // pid 0 = this process
  auto p = Open();
  const GpuReading r = p->PollOnce();
  EXPECT_EQ(r.util_pct, 73);
  EXPECT_EQ(r.util_devices, 1);
  EXPECT_EQ(r.memory_bytes, int64_t{3} << 30);
  EXPECT_EQ(r.memory_source, MemorySource::kProcess);
  EXPECT_GT(r.t_ns, 0);
  // Size query (count 0 -> INSUFFICIENT_SIZE) and then the real call, both on _v3.
  EXPECT_EQ(f_.calls("v3"), 2);
  EXPECT_EQ(f_.calls("v2"), 0);
  EXPECT_EQ(p->device_names(), std::vector<std::string>{"Fake GPU"});
}

TEST_F(NvmlPollerTest, FallsBackToV2WhenV3IsMissing) {
  f_.set_no_v3(1);
  f_.set_process(0, 0, 1ULL << 20);
  auto p = Open();
  EXPECT_EQ(p->PollOnce().memory_bytes, int64_t{1} << 20);
  EXPECT_EQ(p->PollOnce().memory_bytes, int64_t{1} << 20);
  EXPECT_EQ(f_.calls("v3"), 1) << "_v3 is not retried once it answered FUNCTION_NOT_FOUND";
  EXPECT_EQ(f_.calls("v2"), 4);
  EXPECT_TRUE(p->Errors().empty());
}

TEST_F(NvmlPollerTest, NoEntryForUsOutsideAPidNamespaceMeansNoContextYet) {
  f_.set_memory(0, 7ULL << 30, 16ULL << 30);
  f_.set_process(0, 1, 7ULL << 30);  // someone else, visible to us (pid 1 always exists)
  auto p = Open(/*pid_namespace=*/0);
  const GpuReading r = p->PollOnce();
  EXPECT_EQ(r.memory_bytes, 0);
  EXPECT_EQ(r.memory_source, MemorySource::kProcess);
}

TEST_F(NvmlPollerTest, ContainerPidMismatchFallsBackToDeviceWideMemory) {
  f_.set_memory(0, 7ULL << 30, 16ULL << 30);
  f_.set_process(0, 999999, 6ULL << 30);  // our host pid, which we cannot recognise
  auto p = Open(/*pid_namespace=*/1);
  EXPECT_TRUE(p->pid_namespace());
  const GpuReading r = p->PollOnce();
  EXPECT_EQ(r.memory_bytes, int64_t{7} << 30);
  EXPECT_EQ(r.memory_source, MemorySource::kDevice);
  EXPECT_EQ(r.util_devices, 1);
}

TEST_F(NvmlPollerTest, ListedPidThatIsNoVisibleProcessMeansAMismatch) {
  // Outside a nested namespace too: a sandbox (gVisor) or a container without NSpid shows the
  // driver's PIDs, which name no process we can see.
  unsigned unseen = 4'000'000;
  while (ProcessVisible(unseen)) ++unseen;
  f_.set_memory(0, 7ULL << 30, 16ULL << 30);
  f_.set_process(0, unseen, 6ULL << 30);
  auto p = Open(/*pid_namespace=*/0);
  const GpuReading r = p->PollOnce();
  EXPECT_EQ(r.memory_bytes, int64_t{7} << 30);
  EXPECT_EQ(r.memory_source, MemorySource::kDevice);
}

TEST_F(NvmlPollerTest, UnavailableProcessMemoryFallsBackToDeviceWide) {
  f_.set_memory(0, 2ULL << 30, 16ULL << 30);
  f_.set_process(0, 0, kNvmlValueNotAvailable);
  auto p = Open();
  const GpuReading r = p->PollOnce();
  EXPECT_EQ(r.memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(r.memory_source, MemorySource::kDevice);
}

TEST_F(NvmlPollerTest, ProcessListThatGrowsBetweenSizeQueryAndCallIsReRead) {
  for (unsigned pid = 100; pid < 112; ++pid) f_.set_process(0, pid, 1);  // 12 > the headroom
  f_.set_process(0, 0, 42);
  auto p = Open();
  EXPECT_EQ(p->PollOnce().memory_bytes, 42);
}

TEST_F(NvmlPollerTest, UtilisationCountsOnlyTheDevicesWeUse) {
  f_.set_device_count(3);
  f_.set_utilization(0, 90);
  f_.set_utilization(1, 40);
  f_.set_utilization(2, 90);
  f_.set_process(1, 0, 1000);
  auto p = Open();
  EXPECT_EQ(p->device_names().size(), 3u);
  GpuReading r = p->PollOnce();
  EXPECT_EQ(r.util_pct, 40);
  EXPECT_EQ(r.util_devices, 1);
  EXPECT_EQ(r.memory_bytes, 1000);
  f_.clear_processes(1);  // unknown which device is ours: all of them, summed
  r = p->PollOnce();
  EXPECT_EQ(r.util_pct, 220);
  EXPECT_EQ(r.util_devices, 3);
}

// Every NVML error code, on every query, makes that column unknown and nothing else.
TEST_F(NvmlPollerTest, SurvivesEveryErrorCodeOnEveryQuery) {
  const int codes[] = {kNvmlErrorUninitialized, kNvmlErrorInvalidArgument, kNvmlErrorNotSupported,
                       kNvmlErrorNoPermission, kNvmlErrorNotFound, kNvmlErrorInsufficientSize,
                       kNvmlErrorInsufficientPower, kNvmlErrorDriverNotLoaded, kNvmlErrorTimeout,
                       kNvmlErrorIrqIssue, kNvmlErrorLibraryNotFound, kNvmlErrorFunctionNotFound,
                       kNvmlErrorCorruptedInforom, kNvmlErrorGpuIsLost, kNvmlErrorResetRequired,
                       kNvmlErrorOperatingSystem, kNvmlErrorLibRmVersionMismatch, kNvmlErrorInUse,
                       kNvmlErrorMemory, kNvmlErrorNoData, kNvmlErrorArgumentVersionMismatch,
                       kNvmlErrorNotReady, kNvmlErrorGpuNotFound, kNvmlErrorInvalidState,
                       kNvmlErrorUnknown, 12345};
  for (int code : codes) {
    SCOPED_TRACE(NvmlReturnName(code));
    // Utilisation fails: memory still read.
    f_.reset();
    f_.set_utilization(0, 50);
    f_.set_process(0, 0, 777);
    auto p = Open();
    f_.fail("nvmlDeviceGetUtilizationRates", code);
    GpuReading r = p->PollOnce();
    EXPECT_EQ(r.util_pct, -1);
    EXPECT_EQ(r.memory_bytes, 777);
    EXPECT_EQ(ErrorCount(*p, GpuQuery::kUtilization, code), 1);
    // Per-process query fails on both versions: device-wide memory stands in.
    f_.fail("nvmlDeviceGetUtilizationRates", 0);
    f_.set_memory(0, 5000, 10000);
    f_.fail("nvmlDeviceGetComputeRunningProcesses_v3", code);
    f_.fail("nvmlDeviceGetComputeRunningProcesses_v2", code);
    r = p->PollOnce();
    EXPECT_EQ(r.util_pct, 50);
    EXPECT_EQ(r.memory_source, MemorySource::kDevice);
    EXPECT_EQ(r.memory_bytes, 5000);
    // ... and device-wide memory fails too: memory unknown, utilisation still read.
    f_.fail("nvmlDeviceGetMemoryInfo", code);
    r = p->PollOnce();
    EXPECT_EQ(r.util_pct, 50);
    EXPECT_EQ(r.memory_bytes, -1);
    EXPECT_EQ(r.memory_source, MemorySource::kNone);
    EXPECT_GE(ErrorCount(*p, GpuQuery::kMemory, code), 1);
    EXPECT_GE(ErrorCount(*p, GpuQuery::kProcesses, code), 1);
  }
}

TEST_F(NvmlPollerTest, ThreadPollsUntilStoppedAndSurvivesALostGpu) {
  f_.set_utilization(0, 30);
  NvmlPollerOptions o;
  o.library_path = PEAKLINE_FAKE_NVML_PATH;
  o.interval_ns = 10'000'000;
  Result<std::unique_ptr<NvmlPoller>> opened = NvmlPoller::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<NvmlPoller> p = std::move(opened).value();
  p->Start();
  EXPECT_NE(p->thread_tid(), 0);
  EXPECT_NE(p->thread_tid(), getpid());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (const char* entry : {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo",
                            "nvmlDeviceGetComputeRunningProcesses_v3",
                            "nvmlDeviceGetComputeRunningProcesses_v2"}) {
    f_.fail(entry, kNvmlErrorGpuIsLost);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  p->Stop();
  EXPECT_EQ(p->thread_tid(), 0);
  std::vector<GpuReading> readings;
  p->Drain(&readings);
  ASSERT_GE(readings.size(), 4u);  // ~20 expected at 100 Hz; 4 even on a loaded machine
  EXPECT_EQ(readings.front().util_pct, 30);
  EXPECT_EQ(readings.back().util_pct, -1);
  EXPECT_EQ(readings.back().memory_bytes, -1);
  for (size_t i = 1; i < readings.size(); ++i) EXPECT_GE(readings[i].t_ns, readings[i - 1].t_ns);
  EXPECT_GE(ErrorCount(*p, GpuQuery::kUtilization, kNvmlErrorGpuIsLost), 1);
  const int64_t polls = p->polls();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(p->polls(), polls) << "no polling after Stop()";
  p->Drain(&readings);
}

TEST_F(NvmlPollerTest, BufferKeepsTheNewestReadings) {
  auto p = Open(0, /*max_buffered=*/4);
  for (int i = 0; i < 10; ++i) {
    f_.set_utilization(0, static_cast<unsigned>(i));
    p->PollOnce();
  }
  std::vector<GpuReading> readings;
  p->Drain(&readings);
  ASSERT_EQ(readings.size(), 4u);
  EXPECT_EQ(readings.front().util_pct, 6);
  EXPECT_EQ(readings.back().util_pct, 9);
  EXPECT_EQ(p->dropped(), 6);
  readings.clear();
  p->Drain(&readings);
  EXPECT_TRUE(readings.empty());
}

TEST(NvmlApiTest, ReturnNames) {
  EXPECT_STREQ(NvmlReturnName(kNvmlErrorNotSupported), "NOT_SUPPORTED");
  EXPECT_STREQ(NvmlReturnName(kNvmlErrorGpuIsLost), "GPU_IS_LOST");
  EXPECT_STREQ(NvmlReturnName(4242), "ERROR_OTHER");
}

}  // namespace
}  // namespace peakline::gpu
