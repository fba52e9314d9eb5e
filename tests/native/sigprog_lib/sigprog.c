// The "program" of process_hooks_test: its calls to sigaction, signal, sysv_signal and dlsym
// go through its own GOT, which StartProcessHooks patches (the test executable, which holds
// peakline's engine, is the object left unpatched).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>

int prog_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return sigaction(sig, act, old);
}

void (*prog_signal(int sig, void (*handler)(int)))(int) { return signal(sig, handler); }

void (*prog_sysv_signal(int sig, void (*handler)(int)))(int) { return sysv_signal(sig, handler); }

void* prog_dlsym(void* handle, const char* name) { return dlsym(handle, name); }

void* prog_dlvsym(void* handle, const char* name, const char* version) {
  return dlvsym(handle, name, version);
}

// RTLD_NEXT depends on the caller: from here it is "after this library".
void* prog_dlsym_next(const char* name) { return dlsym(RTLD_NEXT, name); }
