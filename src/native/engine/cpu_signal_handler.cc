#include "engine/cpu_signal_handler.h"

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/thread_slot.h"

namespace peakline::engine {

namespace {

std::atomic<bool> g_enabled{false};
std::atomic<int> g_in_flight{0};  // handler invocations running now
std::atomic<StackCapture> g_capture{nullptr};
bool g_installed = false;

uintptr_t InterruptedPc(void* uctx) {
  auto* uc = static_cast<ucontext_t*>(uctx);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

int64_t ToNs(const timeval& tv) {
  return static_cast<int64_t>(tv.tv_sec) * 1000000000 + static_cast<int64_t>(tv.tv_usec) * 1000;
}

// Hot path. See the header for the contract.
void OnCpuTimer(int, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  // Dekker-style pairing with SetCpuSamplingEnabled(false) + WaitForCpuHandlersIdle(): the
  // handler announces itself, then reads the flag; the stopper clears the flag, then reads
  // the count. Both sides are seq_cst, so at least one sees the other: either this handler
  // sees sampling off, or the stopper waits for it.
  g_in_flight.fetch_add(1, std::memory_order_seq_cst);
  auto* slot = static_cast<ThreadSlot*>(info->si_value.sival_ptr);
  if (info->si_code == SI_TIMER && slot != nullptr &&
      g_enabled.load(std::memory_order_seq_cst)) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    const int64_t cpu_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    rusage ru;
    const int64_t system_ns = getrusage(RUSAGE_THREAD, &ru) == 0 ? ToNs(ru.ru_stime) : -1;

    SampleHeader header;
    header.cpu_delta_ns = cpu_ns - slot->last_cpu_ns;
    if (header.cpu_delta_ns < 0) header.cpu_delta_ns = 0;
    header.system_delta_ns = 0;
    if (slot->last_system_ns >= 0 && system_ns >= 0) {
      header.system_delta_ns = system_ns - slot->last_system_ns;
      if (header.system_delta_ns < 0) header.system_delta_ns = 0;
      if (header.system_delta_ns > header.cpu_delta_ns) header.system_delta_ns = header.cpu_delta_ns;
    }
    header.nframes = 0;
    header.kind = SampleKind::kNoThread;
    header.flags = 0;
    header.invalid_frames = 0;

    RawFrame frames[kMaxFrames];
    StackCapture capture = g_capture.load(std::memory_order_relaxed);
    if (capture != nullptr) capture(InterruptedPc(uctx), frames, kMaxFrames, &header);

    const uint32_t body = static_cast<uint32_t>(header.nframes) * sizeof(RawFrame);
    if (slot->ring.TryWrite(&header, sizeof(header), frames, body)) {
      slot->last_cpu_ns = cpu_ns;
      if (system_ns >= 0) slot->last_system_ns = system_ns;
      slot->samples.fetch_add(1, std::memory_order_relaxed);
    } else {
      slot->dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
  g_in_flight.fetch_sub(1, std::memory_order_release);
  errno = saved_errno;
}

}  // namespace

int CpuSamplingSignal() { return SIGRTMIN + 4; }

int InstallCpuSignalHandler(int signo, StackCapture capture) {
  g_capture.store(capture, std::memory_order_relaxed);
  if (g_installed) return 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnCpuTimer;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, nullptr) != 0) return errno;
  g_installed = true;
  return 0;
}

void WaitForCpuHandlersIdle() {
  while (g_in_flight.load(std::memory_order_seq_cst) != 0) sched_yield();
}

void ResetCpuHandlersAfterFork() { g_in_flight.store(0, std::memory_order_relaxed); }

void SetCpuSamplingEnabled(bool enabled) { g_enabled.store(enabled, std::memory_order_seq_cst); }

}  // namespace peakline::engine
