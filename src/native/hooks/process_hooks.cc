#include "hooks/process_hooks.h"

#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <cstring>

#include "cpu/cpu_signal_handler.h"
#include "hooks/allocation_hooks.h"
#include "hooks/dlopen_search.h"
#include "hooks/symbol_patcher.h"

// The dlsym and dlvsym replacements start in assembly: glibc answers RTLD_DEFAULT and
// RTLD_NEXT lookups by the caller's address (its namespace, its place in the search order), so
// the real function must be reached with the caller's return address intact. The trampoline
// asks peakline_dl*sym_lookup (arguments preserved) for a hook to hand out; if there is none,
// the usual case, it tail-jumps to the real function, which then sees the original caller.
// Both are hidden and reached only through patched GOT slots or DlsymReplacementFor.
extern "C" {
__attribute__((visibility("hidden"))) void* peakline_real_dlsym = nullptr;
__attribute__((visibility("hidden"))) void* peakline_real_dlvsym = nullptr;
__attribute__((visibility("hidden"))) void* peakline_dlsym_lookup(void* handle, const char* name);
__attribute__((visibility("hidden"))) void* peakline_dlvsym_lookup(void* handle, const char* name,
                                                                   const char* version);
__attribute__((visibility("hidden"))) void* peakline_hook_dlsym(void* handle, const char* name);
__attribute__((visibility("hidden"))) void* peakline_hook_dlvsym(void* handle, const char* name,
                                                                 const char* version);
}

#if defined(__x86_64__)
// Three pushes after the return address leave the stack 16-byte aligned for the call.
#define PEAKLINE_DLSYM_TRAMPOLINE(hook, lookup, real)    \
  ".text\n"                                              \
  ".p2align 4\n"                                         \
  ".globl " #hook "\n"                                   \
  ".hidden " #hook "\n"                                  \
  ".type " #hook ", @function\n" #hook ":\n"             \
  "  endbr64\n"                                          \
  "  pushq %rdi\n"                                       \
  "  pushq %rsi\n"                                       \
  "  pushq %rdx\n"                                       \
  "  call " #lookup "\n"                                 \
  "  popq %rdx\n"                                        \
  "  popq %rsi\n"                                        \
  "  popq %rdi\n"                                        \
  "  testq %rax, %rax\n"                                 \
  "  jz 1f\n"                                            \
  "  ret\n"                                              \
  "1:\n"                                                 \
  "  jmp *" #real "(%rip)\n"                             \
  ".size " #hook ", .-" #hook "\n"
#elif defined(__aarch64__)
#define PEAKLINE_DLSYM_TRAMPOLINE(hook, lookup, real)    \
  ".text\n"                                              \
  ".p2align 4\n"                                         \
  ".globl " #hook "\n"                                   \
  ".hidden " #hook "\n"                                  \
  ".type " #hook ", %function\n" #hook ":\n"             \
  "  hint #34\n" /* bti c */                             \
  "  stp x29, x30, [sp, #-48]!\n"                        \
  "  mov x29, sp\n"                                      \
  "  stp x0, x1, [sp, #16]\n"                            \
  "  str x2, [sp, #32]\n"                                \
  "  bl " #lookup "\n"                                   \
  "  mov x16, x0\n"                                      \
  "  ldp x0, x1, [sp, #16]\n"                            \
  "  ldr x2, [sp, #32]\n"                                \
  "  ldp x29, x30, [sp], #48\n"                          \
  "  cbz x16, 1f\n"                                      \
  "  mov x0, x16\n"                                      \
  "  ret\n"                                              \
  "1:\n"                                                 \
  "  adrp x16, " #real "\n"                              \
  "  ldr x16, [x16, :lo12:" #real "]\n"                  \
  "  br x16\n"                                           \
  ".size " #hook ", .-" #hook "\n"
#endif

#ifdef PEAKLINE_DLSYM_TRAMPOLINE
asm(PEAKLINE_DLSYM_TRAMPOLINE(peakline_hook_dlsym, peakline_dlsym_lookup, peakline_real_dlsym));
asm(PEAKLINE_DLSYM_TRAMPOLINE(peakline_hook_dlvsym, peakline_dlvsym_lookup, peakline_real_dlvsym));
#endif

namespace peakline::hooks {
namespace {

using SignalHandler = void (*)(int);

struct RealFunctions {
  int (*sigaction)(int, const struct sigaction*, struct sigaction*);
  int (*sigaction2)(int, const struct sigaction*, struct sigaction*);  // __sigaction
  SignalHandler (*signal)(int, SignalHandler);
  SignalHandler (*bsd_signal)(int, SignalHandler);
  SignalHandler (*sysv_signal)(int, SignalHandler);
  SignalHandler (*sysv_signal2)(int, SignalHandler);  // __sysv_signal
  void* (*dlopen)(const char*, int);
};
RealFunctions g_real;
// Never destroyed: its slots stay patched. Atomic: dlsym on any thread reads it.
std::atomic<SymbolPatcher*> g_patcher{nullptr};

template <typename F>
F Real(F& f) {
  return __atomic_load_n(&f, __ATOMIC_RELAXED);
}

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// sigaction() through `real` (one of libc's two names for it), except for the sampling
// signal, whose disposition is the program's record (cpu::ProgramSignalAction).
int SigactionVia(SigactionFn& real, int signo, const struct sigaction* act,
                 struct sigaction* old) {
  if (cpu::IsCpuSamplingSignal(signo)) {
    cpu::ProgramSignalAction(act, old);
    return 0;
  }
  return Real(real)(signo, act, old);
}
int HookSigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  return SigactionVia(g_real.sigaction, signo, act, old);
}
int HookSigaction2(int signo, const struct sigaction* act, struct sigaction* old) {
  return SigactionVia(g_real.sigaction2, signo, act, old);
}

// signal() for the sampling signal with glibc's semantics: BSD (handler stays, restarted
// calls, the signal blocked in its handler) or System V (one shot, not blocked).
SignalHandler ProgramSignal(int signo, SignalHandler handler, bool sysv) {
  struct sigaction act, old;
  std::memset(&act, 0, sizeof(act));
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (sysv) {
    act.sa_flags = SA_RESETHAND | SA_NODEFER;
  } else {
    sigaddset(&act.sa_mask, signo);
    act.sa_flags = SA_RESTART;
  }
  cpu::ProgramSignalAction(&act, &old);
  return old.sa_handler;
}

using SignalFn = SignalHandler (*)(int, SignalHandler);

// signal() through `real` (one of libc's four names for it), except for the sampling signal.
SignalHandler SignalVia(SignalFn& real, int signo, SignalHandler handler, bool sysv) {
  if (cpu::IsCpuSamplingSignal(signo)) return ProgramSignal(signo, handler, sysv);
  return Real(real)(signo, handler);
}
SignalHandler HookSignal(int signo, SignalHandler handler) {
  return SignalVia(g_real.signal, signo, handler, false);
}
SignalHandler HookBsdSignal(int signo, SignalHandler handler) {
  return SignalVia(g_real.bsd_signal, signo, handler, false);
}
SignalHandler HookSysvSignal(int signo, SignalHandler handler) {
  return SignalVia(g_real.sysv_signal, signo, handler, true);
}
SignalHandler HookSysvSignal2(int signo, SignalHandler handler) {
  return SignalVia(g_real.sysv_signal2, signo, handler, true);
}

__attribute__((noinline)) void* HookDlopen(const char* file, int flags) {
  void* handle = DlopenAsCaller(Real(g_real.dlopen), file, flags, __builtin_return_address(0));
  if (handle != nullptr) PatchObjectsLoadedSince(g_patcher.load(std::memory_order_acquire));
  return handle;
}

}  // namespace

void* DlsymReplacementFor(void* real) {
  if (real == nullptr || !ProcessHooksInstalled()) return real;
  struct Pair {
    void* real;
    void* hook;
  };
  const auto pair = [](auto& real_fn, auto hook) {
    return Pair{reinterpret_cast<void*>(Real(real_fn)), reinterpret_cast<void*>(hook)};
  };
  const Pair pairs[] = {
      pair(g_real.sigaction, &HookSigaction),
      pair(g_real.sigaction2, &HookSigaction2),
      pair(g_real.signal, &HookSignal),
      pair(g_real.bsd_signal, &HookBsdSignal),
      pair(g_real.sysv_signal, &HookSysvSignal),
      pair(g_real.sysv_signal2, &HookSysvSignal2),
      pair(g_real.dlopen, &HookDlopen),
      {Real(peakline_real_dlsym), reinterpret_cast<void*>(&peakline_hook_dlsym)},
      {Real(peakline_real_dlvsym), reinterpret_cast<void*>(&peakline_hook_dlvsym)},
  };
  for (const Pair& p : pairs) {
    if (p.real == real) return p.hook;
  }
  return AllocationReplacementFor(real);
}

bool ProcessHooksInstalled() {
  const SymbolPatcher* patcher = g_patcher.load(std::memory_order_acquire);
  return patcher != nullptr && patcher->installed();
}

void StopProcessHooks() {
  SymbolPatcher* patcher = g_patcher.load(std::memory_order_acquire);
  if (patcher != nullptr && patcher->installed()) patcher->Uninstall();
}

Status StartProcessHooks(const void* self_addr) {
#ifndef PEAKLINE_DLSYM_TRAMPOLINE
  (void)self_addr;
  return Status::Error("the dlsym hook is not implemented for this architecture");
#else
  if (ProcessHooksInstalled()) return Status();
  static const Interposition kTable[] = {
      MakeInterposition("sigaction", &HookSigaction, &g_real.sigaction),
      MakeInterposition("__sigaction", &HookSigaction2, &g_real.sigaction2),
      MakeInterposition("signal", &HookSignal, &g_real.signal),
      MakeInterposition("bsd_signal", &HookBsdSignal, &g_real.bsd_signal),
      MakeInterposition("sysv_signal", &HookSysvSignal, &g_real.sysv_signal),
      MakeInterposition("__sysv_signal", &HookSysvSignal2, &g_real.sysv_signal2),
      MakeInterposition("dlopen", &HookDlopen, &g_real.dlopen),
      Interposition{"dlsym", reinterpret_cast<void*>(&peakline_hook_dlsym),
                    &peakline_real_dlsym},
      Interposition{"dlvsym", reinterpret_cast<void*>(&peakline_hook_dlvsym),
                    &peakline_real_dlvsym},
  };
  SymbolPatcher* patcher = g_patcher.load(std::memory_order_acquire);
  if (patcher == nullptr) {
    patcher = new SymbolPatcher();
    g_patcher.store(patcher, std::memory_order_release);
  }
  const void* skip[] = {self_addr};
  return patcher->Install(kTable, sizeof(kTable) / sizeof(kTable[0]), skip, 1);
#endif
}

}  // namespace peakline::hooks

namespace {

// The names DlsymReplacementFor may answer with a hook: the process hooks' and the
// allocation hooks' (see StartMemoryHooks). Any other name goes straight to the real dlsym.
bool MayBeHooked(const char* name) {
  static const char* const kNames[] = {
      "sigaction", "__sigaction", "signal", "bsd_signal", "sysv_signal", "__sysv_signal",
      "dlopen", "dlsym", "dlvsym", "malloc", "calloc", "realloc", "reallocarray", "free",
      "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc", "mmap", "mmap64",
      "munmap", "memcpy", "memmove", "mempcpy", "__memcpy_chk", "__memmove_chk",
      "__mempcpy_chk"};
  if (name == nullptr) return false;
  for (const char* n : kNames) {
    if (n[0] == name[0] && std::strcmp(n, name) == 0) return true;
  }
  return false;
}

}  // namespace

// RTLD_DEFAULT from here searches the global scope first, as it does for any caller, so a
// function found there that equals an original is what the caller would have got too.
extern "C" void* peakline_dlsym_lookup(void* handle, const char* name) {
  if (handle == RTLD_NEXT || !MayBeHooked(name) || !peakline::hooks::ProcessHooksInstalled()) {
    return nullptr;
  }
  using Dlsym = void* (*)(void*, const char*);
  void* f = reinterpret_cast<Dlsym>(__atomic_load_n(&peakline_real_dlsym, __ATOMIC_RELAXED))(
      handle, name);
  void* hook = peakline::hooks::DlsymReplacementFor(f);
  return hook != f ? hook : nullptr;
}

extern "C" void* peakline_dlvsym_lookup(void* handle, const char* name, const char* version) {
  if (handle == RTLD_NEXT || !MayBeHooked(name) || !peakline::hooks::ProcessHooksInstalled()) {
    return nullptr;
  }
  using Dlvsym = void* (*)(void*, const char*, const char*);
  void* f = reinterpret_cast<Dlvsym>(__atomic_load_n(&peakline_real_dlvsym, __ATOMIC_RELAXED))(
      handle, name, version);
  void* hook = peakline::hooks::DlsymReplacementFor(f);
  return hook != f ? hook : nullptr;
}
