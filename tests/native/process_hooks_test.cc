// The process hooks (hooks/process_hooks.h), installed for real in this test process.
//
// StartProcessHooks is told that this executable is peakline's own object, so the engine
// linked into it calls libc directly, as in the extension; libpeakline_sigprog.so
// (sigprog_lib/sigprog.c) plays the program, whose sigaction/signal/dlsym calls go through
// its patched GOT.
#include "hooks/process_hooks.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "cpu/cpu_signal_handler.h"
#include "hooks/allocation_hooks.h"

extern "C" {
int prog_sigaction(int sig, const struct sigaction* act, struct sigaction* old);
void (*prog_signal(int sig, void (*handler)(int)))(int);
void (*prog_sysv_signal(int sig, void (*handler)(int)))(int);
void* prog_dlsym(void* handle, const char* name);
void* prog_dlvsym(void* handle, const char* name, const char* version);
void* prog_dlsym_next(const char* name);
}

namespace peakline::hooks {
namespace {

const void* SelfAddress() { return reinterpret_cast<const void*>(&SelfAddress); }

std::atomic<int> g_calls{0};
void CountingHandler(int) { g_calls.fetch_add(1); }

int StackDepthCapture(transport::RawFrame*, int) { return 0; }

class ProcessHooksTest : public testing::Test {
 protected:
  void SetUp() override {
    signo_ = cpu::CpuSamplingSignal();
    ASSERT_GT(signo_, 0);
    ASSERT_TRUE(cpu::InstallCpuSignalHandler(signo_, nullptr).ok());
    const Status started = StartProcessHooks(SelfAddress());
    ASSERT_TRUE(started.ok()) << started.message();
    ASSERT_TRUE(ProcessHooksInstalled());
  }
  int signo_ = -1;
};

TEST_F(ProcessHooksTest, SigactionOnTheSamplingSignalIsRecordedNotApplied) {
  struct sigaction act, old, now;
  std::memset(&act, 0, sizeof(act));
  act.sa_handler = CountingHandler;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(prog_sigaction(signo_, &act, &old), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(old.sa_handler), reinterpret_cast<uintptr_t>(SIG_DFL));
  EXPECT_TRUE(cpu::GetCpuSignalStatus().handler_intact);  // the kernel still runs ours
  ASSERT_EQ(prog_sigaction(signo_, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, &CountingHandler);  // what the program asked for
  g_calls = 0;
  ASSERT_EQ(raise(signo_), 0);  // not a tick: passed on to the program's handler
  EXPECT_EQ(g_calls.load(), 1);
  // Resetting it (as a daemon resets every signal) leaves peakline's handler in place too.
  act.sa_handler = SIG_DFL;
  ASSERT_EQ(prog_sigaction(signo_, &act, &old), 0);
  EXPECT_EQ(old.sa_handler, &CountingHandler);
  EXPECT_TRUE(cpu::GetCpuSignalStatus().handler_intact);
}

TEST_F(ProcessHooksTest, SignalAndSysvSignalFollowGlibcSemantics) {
  EXPECT_EQ(reinterpret_cast<uintptr_t>(prog_signal(signo_, CountingHandler)),
            reinterpret_cast<uintptr_t>(SIG_DFL));
  struct sigaction now;
  ASSERT_EQ(prog_sigaction(signo_, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, &CountingHandler);
  EXPECT_TRUE(now.sa_flags & SA_RESTART);
  EXPECT_EQ(prog_sysv_signal(signo_, SIG_IGN), &CountingHandler);
  g_calls = 0;
  ASSERT_EQ(prog_sysv_signal(signo_, CountingHandler), SIG_IGN);
  ASSERT_EQ(raise(signo_), 0);
  EXPECT_EQ(g_calls.load(), 1);
  // System V: one shot. A second raise would now die by the default action, so read it.
  ASSERT_EQ(prog_sigaction(signo_, nullptr, &now), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(now.sa_handler), reinterpret_cast<uintptr_t>(SIG_DFL));
}

TEST_F(ProcessHooksTest, OtherSignalsGoToLibcUntouched) {
  struct sigaction act, now;
  std::memset(&act, 0, sizeof(act));
  act.sa_handler = CountingHandler;
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(prog_sigaction(SIGUSR2, &act, nullptr), 0);
  ASSERT_EQ(sigaction(SIGUSR2, nullptr, &now), 0);  // the kernel's view (unpatched caller)
  EXPECT_EQ(now.sa_handler, &CountingHandler);
  EXPECT_EQ(prog_signal(SIGUSR2, SIG_DFL), &CountingHandler);
}

TEST_F(ProcessHooksTest, DlsymHandsOutAllocationHooksWhileTheyCountAndTheyStaySafe) {
  void* const real_malloc = dlsym(RTLD_DEFAULT, "malloc");  // unpatched caller: the real one
  void* const next_malloc = prog_dlsym_next("malloc");
  ASSERT_NE(next_malloc, nullptr);
  EXPECT_EQ(prog_dlsym(RTLD_DEFAULT, "malloc"), real_malloc);  // memory hooks not started
  MemoryConfig config;
  const Status started = StartMemoryHooks(config, &StackDepthCapture, SelfAddress());
  ASSERT_TRUE(started.ok()) << started.message();
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  auto* hooked_malloc = reinterpret_cast<void* (*)(size_t)>(prog_dlsym(RTLD_DEFAULT, "malloc"));
  auto* hooked_free = reinterpret_cast<void (*)(void*)>(prog_dlsym(RTLD_DEFAULT, "free"));
  EXPECT_NE(reinterpret_cast<void*>(hooked_malloc), real_malloc);
  EXPECT_EQ(reinterpret_cast<void*>(hooked_malloc), AllocationReplacementFor(real_malloc));
  // Through libc's handle: the hook when libc's malloc is the one the program uses; under an
  // interposed allocator (a sanitizer runtime) libc's own malloc is another allocator, handed
  // out unchanged (its blocks must not be freed by the interposed one).
  void* const libc_malloc = dlsym(libc, "malloc");
  void* const expected = libc_malloc == real_malloc ? reinterpret_cast<void*>(hooked_malloc)
                                                    : libc_malloc;
  EXPECT_EQ(prog_dlsym(libc, "malloc"), expected);
  EXPECT_EQ(prog_dlvsym(libc, "malloc", "GLIBC_2.2.5"), expected);
  // Not an interposed name: the real answer. RTLD_NEXT: what the caller would get unhooked.
  EXPECT_EQ(prog_dlsym(libc, "getpid"), dlsym(libc, "getpid"));
  EXPECT_EQ(prog_dlsym_next("malloc"), next_malloc);
  EXPECT_EQ(prog_dlsym(libc, "no_such_symbol_here"), nullptr);

  // Counted exactly: a 64 MiB block moves the live bytes by its usable size, both ways.
  const int64_t before = Heap().live.load();
  void* block = hooked_malloc(64 << 20);
  ASSERT_NE(block, nullptr);
  const int64_t usable = static_cast<int64_t>(malloc_usable_size(block));
  EXPECT_EQ(Heap().live.load() - before, usable);
  hooked_free(block);
  EXPECT_EQ(Heap().live.load(), before);

  StopMemoryHooks();
  // After the session: dlsym answers with the real function again; the pointers handed out
  // during the session still work and count nothing.
  EXPECT_EQ(prog_dlsym(RTLD_DEFAULT, "malloc"), real_malloc);
  EXPECT_EQ(prog_dlsym(libc, "malloc"), libc_malloc);
  const int64_t after = Heap().live.load();
  block = hooked_malloc(64 << 20);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, 64 << 20);
  hooked_free(block);
  EXPECT_EQ(Heap().live.load(), after);
  dlclose(libc);
}

TEST_F(ProcessHooksTest, DlsymOfSigactionIsTheHook) {
  using Sigaction = int (*)(int, const struct sigaction*, struct sigaction*);
  auto* looked_up = reinterpret_cast<Sigaction>(prog_dlsym(RTLD_DEFAULT, "sigaction"));
  EXPECT_EQ(DlsymReplacementFor(dlsym(RTLD_DEFAULT, "sigaction")),
            reinterpret_cast<void*>(looked_up));
  struct sigaction act;
  std::memset(&act, 0, sizeof(act));
  act.sa_handler = SIG_IGN;
  ASSERT_EQ(looked_up(signo_, &act, nullptr), 0);
  EXPECT_TRUE(cpu::GetCpuSignalStatus().handler_intact);
}

}  // namespace
}  // namespace peakline::hooks
