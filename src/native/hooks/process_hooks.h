// Hooks that stay for the life of the process once a session has started: the sigaction
// family, dlopen, dlsym and dlvsym, patched into every loaded object's GOT by their own
// SymbolPatcher (symbol_patcher.h), next to the allocation hooks' patcher.
//
// sigaction, __sigaction, signal, bsd_signal, sysv_signal, __sysv_signal. Calls for peakline's
// sampling signal (cpu/cpu_signal_handler.h) are the program's business: they are recorded
// as the program's disposition and answered from it, so the program sees exactly what it
// asked for while peakline's handler stays installed (the handler passes every arrival that
// is not a tick on to that disposition). Every other signal goes to libc untouched. Python's
// signal.signal ends in sigaction, so Python programs are covered. Not covered: a raw
// rt_sigaction system call, libc's calls to itself (sigset, sigvec, ...), code linked without
// dynamic relocations for these names; GetCpuSignalStatus reports the handler replaced.
//
// dlopen: libraries loaded later are patched by both patchers (and resolve a bare name with
// their caller's RUNPATH, hooks/dlopen_search.h).
//
// dlsym, dlvsym: a pointer handed out by dlsym bypasses every GOT (ctypes, cffi's ABI mode,
// JITs). When the symbol found is the very function a hook forwards to (the allocator family
// and copy functions while memory hooks count; the functions above always), the hook is
// returned instead. Such a pointer outlives the session: the hooks forward to the real
// function for ever and count only while a session counts. glibc answers RTLD_DEFAULT and
// RTLD_NEXT by the caller's address, so every lookup that gets no hook (any other name, any
// RTLD_NEXT lookup: interposers that wrap malloc keep finding the next definition) ends in a
// tail jump to the real function with the caller's return address intact.
//
// Not a hot path: sigaction and dlopen may allocate in the patcher. The sigaction hooks are
// async-signal-safe for the sampling signal.
#ifndef PEAKLINE_HOOKS_PROCESS_HOOKS_H_
#define PEAKLINE_HOOKS_PROCESS_HOOKS_H_

#include "status/status.h"

namespace peakline::hooks {

// Installs the process hooks (once; later calls succeed at once). self_addr: an address
// inside peakline's own extension, never patched. GIL held, never from a hook.
Status StartProcessHooks(const void* self_addr);
bool ProcessHooksInstalled();
// Takes the process hooks out of every GOT (peakline attach, when it detaches: the process is
// left as it was). Pointers dlsym handed out meanwhile keep working: the hooks forward to the
// real functions. StartProcessHooks installs them again. GIL held, never from a hook.
void StopProcessHooks();

// The hook to hand out for `real` (a function dlsym found), or `real` itself. For tests.
void* DlsymReplacementFor(void* real);

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_PROCESS_HOOKS_H_
