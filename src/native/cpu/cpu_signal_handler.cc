#include "cpu/cpu_signal_handler.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/clock.h"
#include "cpu/thread_slot.h"

namespace peakline::cpu {

using transport::RawFrame;
using transport::SampleHeader;
using transport::SampleKind;
using transport::kMaxFrames;

namespace {

std::atomic<bool> g_enabled{false};
std::atomic<int> g_in_flight{0};  // handler invocations running now
std::atomic<StackCapture> g_capture{nullptr};
std::atomic<int> g_signo{-1};     // set once, when the handler is installed

// --- Tick tokens ----------------------------------------------------------------------------
// A timer's si_value is (key << 32) | index+1 of its slot here. The key is random per process,
// so a program's own timer (or sigqueue) on this signal is never taken for a tick, and the
// handler never dereferences a value it did not hand out. Append-only: slots live forever.
constexpr uint32_t kMaxTargets = 1 << 16;
// Zero-initialised BSS: pages never touched cost nothing.
std::atomic<ThreadSlot*> g_targets[kMaxTargets];
std::atomic<uint32_t> g_ntargets{0};
std::atomic<uint64_t> g_key{0};  // set when the first token is handed out

ThreadSlot* TickSlot(const siginfo_t* info) {
  if (info->si_code != SI_TIMER) return nullptr;
  const auto v = reinterpret_cast<uintptr_t>(info->si_value.sival_ptr);
  const uint64_t key = g_key.load(std::memory_order_relaxed);
  if (key == 0 || (static_cast<uint64_t>(v) >> 32) != key) return nullptr;
  const uint32_t index = static_cast<uint32_t>(v);
  if (index == 0 || index > g_ntargets.load(std::memory_order_acquire)) return nullptr;
  return g_targets[index - 1].load(std::memory_order_relaxed);
}

// --- The program's disposition of the sampling signal ---------------------------------------
// Immutable records published through one atomic pointer; a writer takes the next record of
// a small ring. A reader (the handler) copies the record it loaded; it could only read a torn
// record if kRecords further sigaction calls on this one signal ran during that copy.
constexpr uint32_t kRecords = 32;
struct sigaction g_records[kRecords];
std::atomic<uint32_t> g_next_record{1};
std::atomic<const struct sigaction*> g_program{&g_records[0]};  // [0]: SIG_DFL until installed
std::atomic<uint64_t> g_forwarded{0};

void PublishProgramAction(const struct sigaction& act, struct sigaction* old) {
  struct sigaction* rec =
      &g_records[g_next_record.fetch_add(1, std::memory_order_relaxed) % kRecords];
  std::memcpy(rec, &act, sizeof(act));
  const struct sigaction* prev = g_program.exchange(rec, std::memory_order_acq_rel);
  if (old != nullptr) std::memcpy(old, prev, sizeof(*old));
}

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

void OnCpuTimer(int signo, siginfo_t* info, void* uctx);

// A signal that is not one of our ticks: what the program asked for, as the kernel would do
// it. Rare (the program or another process sends the signal), so a few system calls are fine.
void ForwardToProgram(int signo, siginfo_t* info, void* uctx) {
  struct sigaction act;
  std::memcpy(&act, g_program.load(std::memory_order_acquire), sizeof(act));
  g_forwarded.fetch_add(1, std::memory_order_relaxed);
  const auto handler = reinterpret_cast<uintptr_t>(act.sa_handler);  // same storage as sa_sigaction
  if (handler == reinterpret_cast<uintptr_t>(SIG_IGN)) return;
  if (handler == reinterpret_cast<uintptr_t>(SIG_DFL)) {
    // A real-time signal's default action is to terminate: die by it, as unprofiled. It is
    // blocked until this handler returns, then delivered with the default disposition.
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(signo, &dfl, nullptr);
    syscall(SYS_tgkill, getpid(), static_cast<pid_t>(syscall(SYS_gettid)), signo);
    return;
  }
  if (act.sa_flags & SA_RESETHAND) {
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    PublishProgramAction(dfl, nullptr);
  }
  // The mask the kernel would have set for the program's handler: the interrupted mask plus
  // sa_mask, plus the signal itself unless SA_NODEFER. Our return restores uc_sigmask.
  sigset_t mask;
  std::memcpy(&mask, &static_cast<ucontext_t*>(uctx)->uc_sigmask, sizeof(mask));
  sigorset(&mask, &mask, &act.sa_mask);
  if (act.sa_flags & SA_NODEFER) {
    sigdelset(&mask, signo);
  } else {
    sigaddset(&mask, signo);
  }
  pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  if (act.sa_flags & SA_SIGINFO) {
    act.sa_sigaction(signo, info, uctx);
  } else {
    act.sa_handler(signo);
  }
}

// Hot path. See the header for the contract.
void OnCpuTimer(int signo, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  // Dekker-style pairing with SetCpuSamplingEnabled(false) + WaitForCpuHandlersIdle(): the
  // handler announces itself, then reads the flag; the stopper clears the flag, then reads
  // the count. Both sides are seq_cst, so at least one sees the other: either this handler
  // sees sampling off, or the stopper waits for it.
  g_in_flight.fetch_add(1, std::memory_order_seq_cst);
  ThreadSlot* slot = TickSlot(info);
  if (slot == nullptr) {
    g_in_flight.fetch_sub(1, std::memory_order_release);
    errno = saved_errno;
    ForwardToProgram(signo, info, uctx);  // may not return (siglongjmp); holds nothing
    return;
  }
  if (g_enabled.load(std::memory_order_seq_cst)) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    const int64_t cpu_ns = TimespecNs(ts);
    rusage ru;
    const int64_t system_ns = getrusage(RUSAGE_THREAD, &ru) == 0 ? TimevalNs(ru.ru_stime) : -1;

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

bool IsFree(int signo, const sigset_t& blocked) {
  struct sigaction cur;
  if (sigaction(signo, nullptr, &cur) != 0) return false;
  return reinterpret_cast<uintptr_t>(cur.sa_handler) == reinterpret_cast<uintptr_t>(SIG_DFL) &&
         sigismember(&blocked, signo) == 0;
}

}  // namespace

int CpuSamplingSignal() {
  const int installed = g_signo.load(std::memory_order_acquire);
  if (installed > 0) return installed;
  sigset_t blocked;
  sigemptyset(&blocked);
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  for (int s = SIGRTMAX; s >= SIGRTMIN; --s) {
    if (IsFree(s, blocked)) return s;
  }
  return -1;
}

void* CpuTickValue(ThreadSlot* slot) {
  uint64_t key = g_key.load(std::memory_order_relaxed);
  if (key == 0) {
    uint64_t x = static_cast<uint64_t>(MonotonicNowNs()) ^ (static_cast<uint64_t>(getpid()) << 20) ^
                 reinterpret_cast<uintptr_t>(&g_key);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    key = (x & 0xFFFFFFFFULL) | 1;  // never 0
    g_key.store(key, std::memory_order_relaxed);
  }
  const uint32_t n = g_ntargets.load(std::memory_order_relaxed);
  uint32_t index = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (g_targets[i].load(std::memory_order_relaxed) == slot) {
      index = i + 1;
      break;
    }
  }
  if (index == 0) {
    if (n >= kMaxTargets) return nullptr;
    g_targets[n].store(slot, std::memory_order_relaxed);
    g_ntargets.store(n + 1, std::memory_order_release);
    index = n + 1;
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>((key << 32) | index));
}

Status InstallCpuSignalHandler(int signo, StackCapture capture) {
  constexpr const char* kWhat = "cannot install the sampling signal handler";
  g_capture.store(capture, std::memory_order_relaxed);
  const int installed = g_signo.load(std::memory_order_acquire);
  if (installed > 0) return installed == signo ? Status() : Status::FromErrno(EBUSY, kWhat);
  if (signo < SIGRTMIN || signo > SIGRTMAX) return Status::FromErrno(EINVAL, kWhat);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnCpuTimer;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction before;
  if (sigaction(signo, &sa, &before) != 0) return Status::FromErrno(errno, kWhat);
  PublishProgramAction(before, nullptr);
  g_signo.store(signo, std::memory_order_release);
  return Status();
}

bool IsCpuSamplingSignal(int signo) {
  return signo > 0 && signo == g_signo.load(std::memory_order_acquire);
}

void ProgramSignalAction(const struct sigaction* act, struct sigaction* old) {
  if (act != nullptr) {
    PublishProgramAction(*act, old);
  } else if (old != nullptr) {
    std::memcpy(old, g_program.load(std::memory_order_acquire), sizeof(*old));
  }
}

CpuSignalStatus GetCpuSignalStatus() {
  CpuSignalStatus s{g_signo.load(std::memory_order_acquire), false,
                    g_forwarded.load(std::memory_order_relaxed)};
  if (s.signo > 0) {
    struct sigaction cur;
    s.handler_intact = sigaction(s.signo, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
                       cur.sa_sigaction == OnCpuTimer;
  }
  return s;
}

namespace {

// Whether some thread of this process has signo pending (its own or the process's queue).
bool PendingAnywhere(int signo) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return false;
  bool pending = false;
  const uint64_t bit = 1ULL << (signo - 1);
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char path[320];
    std::snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) continue;
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strncmp(line, "SigPnd:", 7) == 0 || std::strncmp(line, "ShdPnd:", 7) == 0) {
        if (std::strtoull(line + 7, nullptr, 16) & bit) pending = true;
      }
    }
    std::fclose(f);
    if (pending) break;
  }
  closedir(dir);
  return pending;
}

}  // namespace

Status ReleaseCpuSignalHandler(int wait_ms) {
  auto kept = [] {
    return Status::Error("a sampling signal is still pending; its handler stays (inert)", EBUSY);
  };
  const int signo = g_signo.load(std::memory_order_acquire);
  if (signo <= 0) return Status();
  if (g_enabled.load(std::memory_order_seq_cst)) return kept();
  for (int waited = 0; PendingAnywhere(signo); waited += 5) {
    if (waited >= wait_ms) return kept();
    usleep(5000);
  }
  WaitForCpuHandlersIdle();
  // From here the sigaction hooks pass this signal to libc; then the program's last wish is
  // applied (a sigaction call racing with this may be overwritten by the recorded one).
  g_signo.store(-1, std::memory_order_release);
  struct sigaction program;
  std::memcpy(&program, g_program.load(std::memory_order_acquire), sizeof(program));
  if (sigaction(signo, &program, nullptr) != 0) {
    return Status::FromErrno(errno, "cannot restore the sampling signal");
  }
  std::memset(&g_records[0], 0, sizeof(g_records[0]));  // SIG_DFL until the next install
  g_program.store(&g_records[0], std::memory_order_release);
  return Status();
}

void WaitForCpuHandlersIdle() {
  while (g_in_flight.load(std::memory_order_seq_cst) != 0) sched_yield();
}

void ResetCpuHandlersAfterFork() { g_in_flight.store(0, std::memory_order_relaxed); }

void SetCpuSamplingEnabled(bool enabled) { g_enabled.store(enabled, std::memory_order_seq_cst); }

}  // namespace peakline::cpu
