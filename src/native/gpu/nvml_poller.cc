#include "gpu/nvml_poller.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "cpu/clock.h"
#include "session/own_threads.h"

namespace peakline::gpu {

const char* GpuQueryName(GpuQuery query) {
  switch (query) {
    case GpuQuery::kUtilization: return "utilization";
    case GpuQuery::kMemory: return "memory";
    case GpuQuery::kProcesses: return "processes";
  }
  return "?";
}

bool ProcessVisible(unsigned pid) {
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%u", pid);
  return access(path, F_OK) == 0;
}

bool InNestedPidNamespace() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return false;
  char line[256];
  bool nested = false;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "NSpid:", 6) != 0) continue;
    int ids = 0;
    char* save = nullptr;
    for (char* tok = strtok_r(line + 6, " \t\n", &save); tok; tok = strtok_r(nullptr, " \t\n", &save)) ++ids;
    nested = ids > 1;
  }
  std::fclose(f);
  return nested;
}

Result<std::unique_ptr<NvmlPoller>> NvmlPoller::Open(const NvmlPollerOptions& options) {
  Result<std::unique_ptr<NvmlLibrary>> library = NvmlLibrary::Open(options.library_path);
  if (!library.ok()) return library.status();
  return std::unique_ptr<NvmlPoller>(new NvmlPoller(options, std::move(library).value()));
}

NvmlPoller::NvmlPoller(const NvmlPollerOptions& options, std::unique_ptr<NvmlLibrary> library)
    : options_(options), library_(std::move(library)) {
  pid_ = options_.pid != 0 ? options_.pid : getpid();
  pid_namespace_ = options_.pid_namespace < 0 ? InNestedPidNamespace() : options_.pid_namespace != 0;
}

NvmlPoller::~NvmlPoller() { Stop(); }

void NvmlPoller::Start() {
  if (thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_ = false;
  }
  {
    session::BlockSignalsForNewThreads no_signals;
    thread_ = std::thread([this] { Run(); });
    session::NameThread(thread_.native_handle(), "peakline-gpu");
  }
  // Until the thread has published its tid, the CPU sampler could take it for a user thread.
  while (thread_tid_.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
}

void NvmlPoller::Stop() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  thread_tid_.store(0, std::memory_order_relaxed);
}

void NvmlPoller::Run() {
  session::NameThisThread("peakline-gpu");
  if (options_.on_thread_start != nullptr) options_.on_thread_start();
  thread_tid_.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_relaxed);
  for (;;) {
    {
      MutexLock lock(&mu_);
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::nanoseconds(options_.interval_ns);
      // Until stopped or the poll is due (a wake-up may be spurious: the loop re-checks).
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
      if (stop_) return;
    }
    PollOnce();
  }
}

GpuReading NvmlPoller::PollOnce() {
  const GpuReading r = Read();
  MutexLock lock(&mu_);
  ++polls_;
  if (readings_.size() >= options_.max_buffered) {
    readings_.erase(readings_.begin());
    ++dropped_;
  }
  readings_.push_back(r);
  return r;
}

void NvmlPoller::Drain(std::vector<GpuReading>* out) {
  MutexLock lock(&mu_);
  out->insert(out->end(), readings_.begin(), readings_.end());
  readings_.clear();
}

GpuReading NvmlPoller::Read() {
  GpuReading r;
  r.t_ns = cpu::MonotonicNowNs();
  const std::vector<NvmlDevice>& devices = library_->devices();
  const size_t n = devices.size();

  // Per-process memory, and which devices this process uses.
  std::vector<bool> own(n, false);
  bool any_own = false, own_unknown = false, foreign = false, foreign_unseen = false;
  bool processes_failed = false;
  int64_t own_bytes = 0;
  for (size_t d = 0; d < n; ++d) {
    if (int rc = library_->ComputeProcesses(devices[d], &processes_); rc != kNvmlSuccess) {
      CountError(GpuQuery::kProcesses, rc);
      processes_failed = true;
      continue;
    }
    for (const NvmlProcessInfoV2& p : processes_) {
      if (static_cast<pid_t>(p.pid) != pid_) {
        foreign = true;
        if (!foreign_unseen) foreign_unseen = !ProcessVisible(p.pid);
        continue;
      }
      own[d] = any_own = true;
      if (p.usedGpuMemory == kNvmlValueNotAvailable) {
        own_unknown = true;
      } else {
        own_bytes += static_cast<int64_t>(p.usedGpuMemory);
      }
    }
  }

  // Utilisation of our devices (all devices when we do not know which are ours).
  int64_t util = 0;
  for (size_t d = 0; d < n; ++d) {
    if (any_own && !own[d]) continue;
    NvmlUtilization u{};
    if (int rc = library_->Utilization(devices[d], &u); rc != kNvmlSuccess) {
      CountError(GpuQuery::kUtilization, rc);
      continue;
    }
    util += u.gpu > 100 ? 100 : u.gpu;
    ++r.util_devices;
  }
  if (r.util_devices > 0) r.util_pct = static_cast<int32_t>(util);

  // No entry for us while other PIDs are listed: either we have no CUDA context yet, or the
  // driver speaks another PID namespace's language (containers, sandboxes). The latter when we
  // live in a nested namespace, or when a listed PID is not a process we can see at all.
  const bool container_mismatch = !any_own && foreign && (pid_namespace_ || foreign_unseen);
  if (!processes_failed && !own_unknown && !container_mismatch) {
    r.memory_bytes = own_bytes;  // 0 when we have no CUDA context (yet)
    r.memory_source = MemorySource::kProcess;
    return r;
  }
  int64_t used = 0;
  int ok = 0;
  for (size_t d = 0; d < n; ++d) {
    if (any_own && !own[d]) continue;
    NvmlMemory m{};
    if (int rc = library_->Memory(devices[d], &m); rc != kNvmlSuccess) {
      CountError(GpuQuery::kMemory, rc);
      continue;
    }
    used += static_cast<int64_t>(m.used);
    ++ok;
  }
  if (ok > 0) {
    r.memory_bytes = used;
    r.memory_source = MemorySource::kDevice;
  }
  return r;
}

void NvmlPoller::CountError(GpuQuery query, int code) {
  MutexLock lock(&mu_);
  ++errors_[{query, code}];
}

int64_t NvmlPoller::polls() const {
  MutexLock lock(&mu_);
  return polls_;
}

int64_t NvmlPoller::dropped() const {
  MutexLock lock(&mu_);
  return dropped_;
}

std::vector<std::pair<std::pair<GpuQuery, int>, int64_t>> NvmlPoller::Errors() const {
  MutexLock lock(&mu_);
  return {errors_.begin(), errors_.end()};
}

}  // namespace peakline::gpu
