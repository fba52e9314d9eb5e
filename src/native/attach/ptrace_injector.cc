#include "attach/ptrace_injector.h"

#include <elf.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <vector>

#include "attach/process_maps.h"
#include "cpu/clock.h"

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif

namespace peakline::attach {

namespace {

#if defined(__x86_64__)

// Kernel-internal results of an interrupted system call (include/linux/errno.h): the kernel
// restarts the call when the thread resumes without running a handler.
constexpr long kRestartResults[] = {-512 /*ERESTARTSYS*/, -513 /*ERESTARTNOINTR*/,
                                    -514 /*ERESTARTNOHAND*/, -516 /*ERESTART_RESTARTBLOCK*/};

// Blocking calls Python makes with the GIL released (Py_BEGIN_ALLOW_THREADS) and that hold no
// lock of libc's or the interpreter's while they block: sleeping, waiting for a lock, reading
// a file or a socket, waiting for a child. Stopped inside one of these (and not holding the
// GIL), the thread may run Python code at once.
bool BlocksWithoutLocks(long nr) {
  switch (nr) {
    case SYS_read: case SYS_readv: case SYS_pread64: case SYS_recvfrom: case SYS_recvmsg:
    case SYS_select: case SYS_pselect6: case SYS_poll: case SYS_ppoll:
    case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_nanosleep: case SYS_clock_nanosleep:
    case SYS_futex: case SYS_wait4: case SYS_waitid: case SYS_accept: case SYS_accept4:
    case SYS_pause: case SYS_rt_sigsuspend: case SYS_rt_sigtimedwait:
      return true;
    default:
      return false;
  }
}

Status Errno(const char* what) { return Status::FromErrno(errno, what); }

int64_t NowMs() { return cpu::MonotonicNowNs() / 1'000'000; }

// The target's addresses this file calls or reads.
struct Symbols {
  uint64_t add_pending_call = 0, run_simple_string = 0, gil_ensure = 0, gil_release = 0,
           gil_check = 0, version = 0, mmap = 0, munmap = 0;
  // PyAIter_Check: a function CPython 3.10 added (and later versions keep). With no Py_Version
  // beside it, the interpreter is 3.10 (Py_Version came in 3.11; 3.10 has no variable that
  // holds its version, only a string literal inside Py_GetVersion).
  bool has_310_api = false;
};

bool IsLibc(const std::string& path) {
  const std::string base = BaseName(path);
  return base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0 ||
         base.rfind("ld-musl-", 0) == 0;
}

std::string PermissionAdvice(pid_t pid) {
  std::string text = "not permitted to trace process " + std::to_string(pid);
  std::ifstream scope("/proc/sys/kernel/yama/ptrace_scope");
  int value = -1;
  if (scope >> value && value >= 1) {
    text += " (kernel.yama.ptrace_scope is " + std::to_string(value) +
            (value == 1 ? ": only a parent may trace; run as root, or set it to 0" :
                          ": tracing needs CAP_SYS_PTRACE (or is disabled)") + ")";
  } else {
    text += " (it must belong to the same user, or run peakline as root / with CAP_SYS_PTRACE; "
            "in a container add --cap-add=SYS_PTRACE)";
  }
  return text;
}

// Fills python_object and the interpreter's symbols; fails saying why not.
Status FindSymbols(pid_t pid, ProcessMaps* maps, Symbols* s, std::string* python_object) {
  if (Status loaded = maps->Load(pid); !loaded.ok()) {
    if (access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0) {
      return Status::Error("no process " + std::to_string(pid));
    }
    if (loaded.code() == EACCES || loaded.code() == EPERM) {
      return Status::Error(PermissionAdvice(pid), loaded.code());
    }
    return loaded;
  }
  std::vector<std::string> candidates;
  if (!maps->executable().empty()) candidates.push_back(maps->executable());
  for (const std::string& path : maps->Objects()) {
    if (BaseName(path).rfind("libpython3", 0) == 0) candidates.push_back(path);
  }
  for (const std::string& path : candidates) {
    auto pending = maps->SymbolAddress(path, "Py_AddPendingCall");
    if (!pending) continue;
    *python_object = path;
    s->add_pending_call = *pending;
    s->run_simple_string = maps->SymbolAddress(path, "PyRun_SimpleString").value_or(0);
    s->gil_ensure = maps->SymbolAddress(path, "PyGILState_Ensure").value_or(0);
    s->gil_release = maps->SymbolAddress(path, "PyGILState_Release").value_or(0);
    s->gil_check = maps->SymbolAddress(path, "PyGILState_Check").value_or(0);
    s->version = maps->SymbolAddress(path, "Py_Version").value_or(0);
    s->has_310_api = maps->SymbolAddress(path, "PyAIter_Check").has_value();
    break;
  }
  if (s->add_pending_call == 0) {
    return Status::Error("process " + std::to_string(pid) + " is not a CPython process (" +
                         (maps->executable().empty() ? std::string("?") : maps->executable()) +
                         " and its libraries define no Py_AddPendingCall)");
  }
  if (s->run_simple_string == 0 || s->gil_ensure == 0 || s->gil_release == 0 ||
      s->gil_check == 0) {
    return Status::Error(
        "process " + std::to_string(pid) + ": " + *python_object +
        " lacks part of the C API peakline needs (PyRun_SimpleString, PyGILState_*)");
  }
  for (const std::string& path : maps->Objects()) {
    if (!IsLibc(path)) continue;
    s->mmap = maps->SymbolAddress(path, "mmap").value_or(0);
    s->munmap = maps->SymbolAddress(path, "munmap").value_or(0);
    if (s->mmap != 0 && s->munmap != 0) break;
  }
  if (s->mmap == 0 || s->munmap == 0) {
    return Status::Error("process " + std::to_string(pid) +
                         ": cannot find mmap/munmap in its C library");
  }
  return Status();
}

bool ReadRemote(pid_t pid, uint64_t address, void* out, size_t n) {
  iovec local{out, n};
  iovec remote{reinterpret_cast<void*>(address), n};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

bool WriteRemote(pid_t pid, uint64_t address, const void* data, size_t n) {
  iovec local{const_cast<void*>(data), n};
  iovec remote{reinterpret_cast<void*>(address), n};
  if (process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n)) return true;
  // Fallback (e.g. process_vm_writev filtered by seccomp): word by word through ptrace.
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; i += sizeof(long)) {
    long word = 0;
    if (n - i < sizeof(long)) {
      errno = 0;
      word = ptrace(PTRACE_PEEKDATA, pid, address + i, nullptr);
      if (errno != 0) return false;
    }
    std::memcpy(&word, bytes + i, std::min(sizeof(long), n - i));
    if (ptrace(PTRACE_POKEDATA, pid, address + i, reinterpret_cast<void*>(word)) != 0) return false;
  }
  return true;
}

// Why a process cannot be traced, read before trying (clearer than EPERM alone).
Status AccessProblem(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status) return Status::Error("no process " + std::to_string(pid));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("TracerPid:", 0) == 0) {
      const long tracer = std::strtol(line.c_str() + 10, nullptr, 10);
      if (tracer != 0) {
        return Status::Error("process " + std::to_string(pid) + " is already traced by process " +
                             std::to_string(tracer) + " (a debugger or another profiler)");
      }
    }
  }
  return Status();
}

// The tracee: one stopped thread whose state is saved on stop and restored on Detach.
class Tracee {
 public:
  explicit Tracee(pid_t tid, int wait_ms) : tid_(tid), wait_ms_(wait_ms) {}

  Status Seize() {
    if (ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) {
      if (errno == EPERM) return Status::Error(PermissionAdvice(tid_), EPERM);
      if (errno == ESRCH) return Status::Error("no process " + std::to_string(tid_), ESRCH);
      return Errno("PTRACE_SEIZE");
    }
    seized_ = true;
    if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) return Errno("PTRACE_INTERRUPT");
    // Wait for the interrupt stop; a signal that arrives first is delivered as usual.
    for (;;) {
      int status = 0;
      if (Status stop = Wait(&status); !stop.ok()) return stop;
      const int event = status >> 16;
      const int sig = WSTOPSIG(status);
      if (event == PTRACE_EVENT_STOP) {
        if (sig != SIGTRAP) {
          return Status::Error("process " + std::to_string(tid_) +
                               " is stopped (job control); continue it first");
        }
        break;
      }
      if (ptrace(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(sig))) != 0) {
        return Errno("PTRACE_CONT");
      }
    }
    stopped_ = true;
    if (ptrace(PTRACE_GETREGS, tid_, nullptr, &saved_regs_) != 0) return Errno("PTRACE_GETREGS");
    xstate_.assign(64 * 1024, 0);
    iovec io{xstate_.data(), xstate_.size()};
    if (ptrace(PTRACE_GETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &io) == 0) {
      xstate_.resize(io.iov_len);
      have_xstate_ = true;
    } else if (ptrace(PTRACE_GETFPREGS, tid_, nullptr, &saved_fpregs_) != 0) {
      return Errno("PTRACE_GETFPREGS");
    }
    if (ptrace(PTRACE_GETSIGMASK, tid_, reinterpret_cast<void*>(sizeof(uint64_t)), &saved_mask_) != 0) {
      return Errno("PTRACE_GETSIGMASK");
    }
    // Every standard signal blocked, faults excepted; real-time signals as the program had
    // them: peakline's session, started on this thread in direct mode, picks its sampling
    // signal among the real-time signals the program does not block.
    uint64_t mask = saved_mask_ | 0xFFFFFFFFULL;
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS}) mask &= ~(1ULL << (sig - 1));
    if (ptrace(PTRACE_SETSIGMASK, tid_, reinterpret_cast<void*>(sizeof(uint64_t)), &mask) != 0) {
      return Errno("PTRACE_SETSIGMASK");
    }
    mask_changed_ = true;
    return Status();
  }

  const user_regs_struct& saved() const { return saved_regs_; }

  // Calls fn(args...) on the stopped thread; its rax in *result.
  Status Call(uint64_t fn, std::initializer_list<uint64_t> args, uint64_t* result,
              bool bounded) {
    user_regs_struct regs = saved_regs_;
    regs.orig_rax = static_cast<uint64_t>(-1);
    regs.rip = fn;
    regs.rax = 0;
    unsigned long long* slots[] = {&regs.rdi, &regs.rsi, &regs.rdx, &regs.rcx, &regs.r8, &regs.r9};
    size_t i = 0;
    for (uint64_t a : args) *slots[i++] = a;
    // Below the red zone (128 bytes) with room to spare, 16-byte aligned at the call.
    uint64_t sp = ((saved_regs_.rsp - 4096) & ~static_cast<uint64_t>(0xf)) - 8;
    const uint64_t zero = 0;
    if (!WriteRemote(tid_, sp, &zero, sizeof(zero))) return Errno("writing the target's stack");
    regs.rsp = sp;
    if (ptrace(PTRACE_SETREGS, tid_, nullptr, &regs) != 0) return Errno("PTRACE_SETREGS");
    if (ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) return Errno("PTRACE_CONT");
    for (;;) {
      int status = 0;
      if (Status stop = Wait(&status, bounded); !stop.ok()) return stop;
      const int event = status >> 16;
      const int sig = WSTOPSIG(status);
      if (event == PTRACE_EVENT_STOP) {  // job control stop meanwhile: keep going
        if (ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) return Errno("PTRACE_CONT");
        continue;
      }
      user_regs_struct now{};
      if (ptrace(PTRACE_GETREGS, tid_, nullptr, &now) != 0) return Errno("PTRACE_GETREGS");
      if (sig == SIGSEGV && now.rip == 0) {
        *result = now.rax;
        return Status();
      }
      char text[160];
      std::snprintf(text, sizeof(text), "the target got signal %d at 0x%llx inside an injected call",
                    sig, static_cast<unsigned long long>(now.rip));
      return Status::Error(text);
    }
  }

  // Restores the saved state and lets the thread go. Safe to call in any state.
  Status Detach() {
    Status error;
    if (stopped_) {
      if (mask_changed_ &&
          ptrace(PTRACE_SETSIGMASK, tid_, reinterpret_cast<void*>(sizeof(uint64_t)), &saved_mask_) != 0) {
        error = Errno("restoring the signal mask");
      }
      if (have_xstate_) {
        iovec io{xstate_.data(), xstate_.size()};
        if (ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &io) != 0) {
          error = Errno("restoring the vector registers");
        }
      } else if (ptrace(PTRACE_SETFPREGS, tid_, nullptr, &saved_fpregs_) != 0) {
        error = Errno("restoring the floating-point registers");
      }
      if (ptrace(PTRACE_SETREGS, tid_, nullptr, &saved_regs_) != 0) {
        error = Errno("restoring the registers");
      }
    }
    if (seized_ && ptrace(PTRACE_DETACH, tid_, nullptr, nullptr) != 0 && error.ok() &&
        errno != ESRCH) {
      error = Errno("PTRACE_DETACH");
    }
    seized_ = stopped_ = false;
    return error;
  }

 private:
  // Waits for the next stop of the tracee (at most wait_ms_ when bounded).
  Status Wait(int* status, bool bounded = true) {
    const int64_t deadline = NowMs() + wait_ms_;
    for (;;) {
      const pid_t r = waitpid(tid_, status, __WALL | WNOHANG);
      if (r == tid_) break;
      if (r < 0 && errno != EINTR) return Errno("waitpid");
      if (bounded && NowMs() > deadline) {
        return Status::Error("process " + std::to_string(tid_) + " did not stop within " +
                             std::to_string(wait_ms_) + " ms (uninterruptible sleep?)");
      }
      usleep(1000);
    }
    if (WIFEXITED(*status) || WIFSIGNALED(*status)) {
      seized_ = stopped_ = false;
      return Status::Error("process " + std::to_string(tid_) + " ended");
    }
    return Status();
  }

  pid_t tid_;
  int wait_ms_;
  bool seized_ = false, stopped_ = false, have_xstate_ = false, mask_changed_ = false;
  user_regs_struct saved_regs_{};
  user_fpregs_struct saved_fpregs_{};
  std::vector<unsigned char> xstate_;
  uint64_t saved_mask_ = 0;
};

// Blocks the signals that end a command-line program, for as long as it lives.
class TerminationSignalsBlocked {
 public:
  TerminationSignalsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~TerminationSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

Result<Injection> Inject(pid_t pid, std::string code, int wait_ms) {
  Injection out;
  ProcessMaps maps;
  Symbols sym;
  std::string python_object;
  if (Status found = FindSymbols(pid, &maps, &sym, &python_object); !found.ok()) return found;
  if (Status traceable = AccessProblem(pid); !traceable.ok()) return traceable;
  const size_t placeholder = code.find(kPagePlaceholder);
  const uint64_t length = ((code.size() + 1 + 4095) / 4096) * 4096;

  TerminationSignalsBlocked quiet;
  Tracee t(pid, wait_ms);
  // Every failure after the seize lets the thread go first; a failure to restore it is added.
  auto fail = [&t](const Status& why) -> Result<Injection> {
    const Status restore = t.Detach();
    if (restore.ok()) return why;
    return Status::Error(why.message() + "; " + restore.message(), why.code());
  };
  if (Status seized = t.Seize(); !seized.ok()) return fail(seized);

  const user_regs_struct& r = t.saved();
  const long nr = static_cast<long>(r.orig_rax);
  const long result = static_cast<long>(r.rax);
  bool interrupted = false;
  for (long x : kRestartResults) interrupted = interrupted || (nr >= 0 && result == x);
  bool direct = false;
  uint64_t value = 0;
  Status error;
  if (interrupted && BlocksWithoutLocks(nr)) {
    if (error = t.Call(sym.gil_check, {}, &value, true); !error.ok()) return fail(error);
    direct = static_cast<int>(value) == 0;
  }
  out.mode = direct ? "direct" : "pending-call";

  uint64_t page = 0;
  if (error = t.Call(sym.mmap, {0, length, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0},
                     &page, true);
      !error.ok()) {
    return fail(error);
  }
  if (page == 0 || page >= static_cast<uint64_t>(-4096)) {
    return fail(Status::Error("mmap failed in the target"));
  }
  out.page = page;
  if (placeholder != std::string::npos) {
    char text[32];
    std::snprintf(text, sizeof(text), "0x%016llx",
                  static_cast<unsigned long long>(direct ? 0 : page));
    code.replace(placeholder, std::strlen(kPagePlaceholder), text);
  }
  if (!WriteRemote(pid, page, code.c_str(), code.size() + 1)) {
    return fail(Errno("writing the code into the target"));
  }
  if (direct) {
    uint64_t gil_state = 0, ignored = 0;
    // Unbounded: PyGILState_Ensure waits for the GIL, and the code runs to its end (the
    // bootstrap only starts the session and a thread). Giving up half-way is not an option.
    if (error = t.Call(sym.gil_ensure, {}, &gil_state, false); !error.ok()) return fail(error);
    if (error = t.Call(sym.run_simple_string, {page}, &ignored, false); !error.ok()) {
      return fail(error);
    }
    if (error = t.Call(sym.gil_release, {gil_state}, &ignored, true); !error.ok()) {
      return fail(error);
    }
    if (error = t.Call(sym.munmap, {page, length}, &ignored, true); !error.ok()) {
      return fail(error);
    }
  } else {
    if (error = t.Call(sym.add_pending_call, {sym.run_simple_string, page}, &value, true);
        !error.ok()) {
      return fail(error);
    }
    if (static_cast<int>(value) != 0) {
      uint64_t ignored = 0;
      // The page goes back if it can; the queue being full is what the caller needs to know.
      (void)t.Call(sym.munmap, {page, length}, &ignored, true);
      return fail(Status::Error("the target's pending-call queue is full; try again"));
    }
  }
  if (error = t.Detach(); !error.ok()) return error;
  return out;
}

#endif  // __x86_64__

}  // namespace

Result<TargetInfo> ProbeTarget(pid_t pid) {
#if defined(__x86_64__)
  TargetInfo info;
  ProcessMaps maps;
  Symbols sym;
  if (Status found = FindSymbols(pid, &maps, &sym, &info.python_object); !found.ok()) return found;
  if (sym.version != 0) {
    unsigned long v = 0;
    if (!ReadRemote(pid, sym.version, &v, sizeof(v))) return Status::Error(PermissionAdvice(pid));
    info.version_hex = v;
  } else if (sym.has_310_api) {
    info.version_hex = kPython310VersionHex;
  }
  return info;
#else
  (void)pid;
  return Status::Error("attach is implemented for x86-64 Linux only");
#endif
}

Result<Injection> InjectPython(pid_t pid, const std::string& code, int wait_ms) {
#if defined(__x86_64__)
  return Inject(pid, code, wait_ms);
#else
  (void)pid, (void)code, (void)wait_ms;
  return Status::Error("attach is implemented for x86-64 Linux only");
#endif
}

Status ReleasePage(uint64_t address, uint64_t length) {
  if (munmap(reinterpret_cast<void*>(address), length) != 0) {
    return Status::FromErrno(errno, "munmap");
  }
  return Status();
}

}  // namespace peakline::attach
