// Tests of hooks::SymbolPatcher against testlib/ (libpeakline_testalloc*.so), whose functions
// reach malloc & co. through PLT slots, GOT slots and pointers stored in data, built once with
// full RELRO (-z relro -z now) and once with lazy binding and no RELRO. The replacements below
// count calls and forward to the originals the patcher resolved.
//
// Counts are exact: between the two reads of a counter only the library call runs, on this
// thread, and the test executable itself is skipped unless a test says otherwise.
#include "hooks/symbol_patcher.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testlib/testalloc.h"

namespace peakline::hooks {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEAKLINE_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PEAKLINE_TEST_ASAN 1
#endif

// --- counting replacements -----------------------------------------------------------------

enum Fn { kMalloc, kFree, kCalloc, kRealloc, kPosixMemalign, kMmap, kMunmap, kMemcpy, kDlopen, kFnCount };

std::atomic<long> g_calls[kFnCount];
void* g_real[kFnCount];                         // the originals, written by Install
std::atomic<SymbolPatcher*> g_dlopen_patcher{nullptr};  // re-scanned by CountingDlopen

// A relaxed atomic load (a plain load on x86-64 and aarch64): Install stores the originals
// atomically, and TSan cannot see that the GOT store that leads here comes after them.
template <typename F>
F Real(Fn f) {
  return reinterpret_cast<F>(__atomic_load_n(&g_real[f], __ATOMIC_RELAXED));
}
void Count(Fn f) { g_calls[f].fetch_add(1, std::memory_order_relaxed); }

void* CountingMalloc(size_t n) {
  Count(kMalloc);
  return Real<void* (*)(size_t)>(kMalloc)(n);
}
void CountingFree(void* p) {
  Count(kFree);
  Real<void (*)(void*)>(kFree)(p);
}
void* CountingCalloc(size_t n, size_t size) {
  Count(kCalloc);
  return Real<void* (*)(size_t, size_t)>(kCalloc)(n, size);
}
void* CountingRealloc(void* p, size_t n) {
  Count(kRealloc);
  return Real<void* (*)(void*, size_t)>(kRealloc)(p, n);
}
int CountingPosixMemalign(void** out, size_t alignment, size_t n) {
  Count(kPosixMemalign);
  return Real<int (*)(void**, size_t, size_t)>(kPosixMemalign)(out, alignment, n);
}
void* CountingMmap(void* addr, size_t n, int prot, int flags, int fd, off_t offset) {
  Count(kMmap);
  return Real<void* (*)(void*, size_t, int, int, int, off_t)>(kMmap)(addr, n, prot, flags, fd,
                                                                     offset);
}
int CountingMunmap(void* p, size_t n) {
  Count(kMunmap);
  return Real<int (*)(void*, size_t)>(kMunmap)(p, n);
}
void* CountingMemcpy(void* dst, const void* src, size_t n) {
  Count(kMemcpy);
  return Real<void* (*)(void*, const void*, size_t)>(kMemcpy)(dst, src, n);
}
// What the profiler's dlopen hook does: the real dlopen, then patch whatever it loaded.
void* CountingDlopen(const char* file, int flags) {
  Count(kDlopen);
  void* handle = Real<void* (*)(const char*, int)>(kDlopen)(file, flags);
  if (SymbolPatcher* p = g_dlopen_patcher.load()) p->PatchNewObjects();
  return handle;
}

const char* const kNames[kFnCount] = {"malloc", "free",   "calloc", "realloc", "posix_memalign",
                                      "mmap",   "munmap", "memcpy", "dlopen"};
void* const kReplacements[kFnCount] = {
    reinterpret_cast<void*>(&CountingMalloc),  reinterpret_cast<void*>(&CountingFree),
    reinterpret_cast<void*>(&CountingCalloc),  reinterpret_cast<void*>(&CountingRealloc),
    reinterpret_cast<void*>(&CountingPosixMemalign), reinterpret_cast<void*>(&CountingMmap),
    reinterpret_cast<void*>(&CountingMunmap),  reinterpret_cast<void*>(&CountingMemcpy),
    reinterpret_cast<void*>(&CountingDlopen)};

// The allocation functions only (dlopen is added by the tests that exercise the hook).
std::vector<Interposition> Table(bool with_dlopen = false) {
  std::vector<Interposition> table;
  for (int f = 0; f < kFnCount; ++f) {
    if (f == kDlopen && !with_dlopen) continue;
    table.push_back(Interposition{kNames[f], kReplacements[f], &g_real[f]});
  }
  return table;
}

// An address inside the test executable, to skip it.
void SkipAnchor() {}
const void* const kSkipExecutable[] = {reinterpret_cast<const void*>(&SkipAnchor)};

// Keeps the compiler from eliding an allocation whose result it could otherwise prove unused.
void Escape(void* p) { __asm__ volatile("" : : "r"(p) : "memory"); }

// --- the test library ----------------------------------------------------------------------

struct TestAlloc {
  void* handle = nullptr;
  decltype(&pl_ta_malloc) malloc_plt;
  decltype(&pl_ta_free) free_plt;
  decltype(&pl_ta_calloc) calloc_plt;
  decltype(&pl_ta_realloc) realloc_plt;
  decltype(&pl_ta_posix_memalign) posix_memalign_plt;
  decltype(&pl_ta_mmap) mmap_plt;
  decltype(&pl_ta_munmap) munmap_plt;
  decltype(&pl_ta_memcpy) memcpy_plt;
  decltype(&pl_ta_malloc_via_got) malloc_via_got;
  decltype(&pl_ta_malloc_via_data) malloc_via_data;
  decltype(&pl_ta_free_via_data) free_via_data;
  decltype(&pl_ta_malloc_via_const_table) malloc_via_const_table;
  decltype(&pl_ta_memcpy_via_const_table) memcpy_via_const_table;
  decltype(&pl_ta_malloc_noplt) malloc_noplt;
};

// dlopen()s one build of the library (RTLD_LOCAL: both builds export the same names) through
// the real dlopen, found via dlsym so that a patched dlopen slot of this executable is not used.
bool OpenTestAlloc(const char* path, int bind_flag, TestAlloc* out, std::string* error) {
  static auto* real_dlopen =
      reinterpret_cast<void* (*)(const char*, int)>(dlsym(RTLD_DEFAULT, "dlopen"));
  out->handle = real_dlopen(path, bind_flag | RTLD_LOCAL);
  if (out->handle == nullptr) {
    *error = dlerror();
    return false;
  }
  bool ok = true;
  auto sym = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(out->handle, name));
    ok = ok && *fn != nullptr;
  };
  sym(&out->malloc_plt, "pl_ta_malloc");
  sym(&out->free_plt, "pl_ta_free");
  sym(&out->calloc_plt, "pl_ta_calloc");
  sym(&out->realloc_plt, "pl_ta_realloc");
  sym(&out->posix_memalign_plt, "pl_ta_posix_memalign");
  sym(&out->mmap_plt, "pl_ta_mmap");
  sym(&out->munmap_plt, "pl_ta_munmap");
  sym(&out->memcpy_plt, "pl_ta_memcpy");
  sym(&out->malloc_via_got, "pl_ta_malloc_via_got");
  sym(&out->malloc_via_data, "pl_ta_malloc_via_data");
  sym(&out->free_via_data, "pl_ta_free_via_data");
  sym(&out->malloc_via_const_table, "pl_ta_malloc_via_const_table");
  sym(&out->memcpy_via_const_table, "pl_ta_memcpy_via_const_table");
  sym(&out->malloc_noplt, "pl_ta_malloc_noplt");
  if (!ok) *error = "missing pl_ta_* symbol";
  return ok;
}

bool IsLoaded(const char* path) {
  void* h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

// How many times `f` was called while `body` ran.
template <typename Body>
long Calls(Fn f, Body&& body) {
  long before = g_calls[f].load();
  body();
  return g_calls[f].load() - before;
}

// Calls every function of the library once and checks both the results and, if `patched`,
// that each went through its replacement exactly once (else: never).
void ExerciseTestAlloc(const TestAlloc& lib, bool patched) {
  const long want = patched ? 1 : 0;
  void* p = nullptr;

  EXPECT_EQ(Calls(kMalloc, [&] { p = lib.malloc_plt(64); }), want) << "malloc via PLT";
  ASSERT_NE(p, nullptr);
  std::memset(p, 0xab, 64);
  EXPECT_EQ(Calls(kRealloc, [&] { p = lib.realloc_plt(p, 4096); }), want) << "realloc";
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(static_cast<unsigned char*>(p)[63], 0xab) << "realloc kept the contents";
  EXPECT_EQ(Calls(kFree, [&] { lib.free_plt(p); }), want) << "free via PLT";

  EXPECT_EQ(Calls(kCalloc, [&] { p = lib.calloc_plt(16, 8); }), want) << "calloc";
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(static_cast<unsigned char*>(p)[i], 0) << i;
  lib.free_plt(p);

  int rc = -1;
  EXPECT_EQ(Calls(kPosixMemalign, [&] { rc = lib.posix_memalign_plt(&p, 256, 1000); }), want);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  std::memset(p, 1, 1000);
  lib.free_plt(p);

  const size_t map_bytes = 3 * static_cast<size_t>(getpagesize());
  EXPECT_EQ(Calls(kMmap, [&] { p = lib.mmap_plt(map_bytes); }), want) << "mmap";
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 7, map_bytes);
  EXPECT_EQ(Calls(kMunmap, [&] { rc = lib.munmap_plt(p, map_bytes); }), want) << "munmap";
  EXPECT_EQ(rc, 0);

  char src[100], dst[100] = {};
  for (int i = 0; i < 100; ++i) src[i] = static_cast<char>(i * 7);
  void* ret = nullptr;
  EXPECT_EQ(Calls(kMemcpy, [&] { ret = lib.memcpy_plt(dst, src, sizeof src); }), want);
  EXPECT_EQ(ret, dst);
  EXPECT_EQ(std::memcmp(src, dst, sizeof src), 0);
  std::memset(dst, 0, sizeof dst);
  EXPECT_EQ(Calls(kMemcpy, [&] { ret = lib.memcpy_via_const_table(dst, src, 50); }), want)
      << "memcpy via a pointer in .data.rel.ro";
  EXPECT_EQ(std::memcmp(src, dst, 50), 0);
  EXPECT_EQ(dst[50], 0);

  EXPECT_EQ(Calls(kMalloc, [&] { p = lib.malloc_via_got(32); }), want) << "&malloc from GOT";
  ASSERT_NE(p, nullptr);
  lib.free_plt(p);
  EXPECT_EQ(Calls(kMalloc, [&] { p = lib.malloc_via_data(32); }), want) << "pointer in .data";
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Calls(kFree, [&] { lib.free_via_data(p); }), want) << "free pointer in .data";
  EXPECT_EQ(Calls(kMalloc, [&] { p = lib.malloc_via_const_table(32); }), want)
      << "pointer in .data.rel.ro";
  ASSERT_NE(p, nullptr);
  lib.free_plt(p);
  EXPECT_EQ(Calls(kMalloc, [&] { p = lib.malloc_noplt(32); }), want) << "-fno-plt call";
  ASSERT_NE(p, nullptr);
  lib.free_plt(p);
}

// --- memory maps ---------------------------------------------------------------------------

struct RelroRange {
  uintptr_t start = 0, end = 0;  // page-aligned, as ld.so protects it
};

RelroRange RelroOf(void* handle) {
  struct link_map* lm = nullptr;
  RelroRange out;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0) return out;
  struct Ctx {
    uintptr_t base;
    RelroRange* out;
  } ctx{lm->l_addr, &out};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Ctx*>(data);
        if (info->dlpi_addr != c->base) return 0;
        const uintptr_t page = static_cast<uintptr_t>(getpagesize());
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_GNU_RELRO) continue;
          c->out->start = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
          c->out->end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
        }
        return 1;
      },
      &ctx);
  return out;
}

// The permission strings ("r--p", ...) of the mappings that overlap [start, end).
std::vector<std::string> Permissions(uintptr_t start, uintptr_t end) {
  std::vector<std::string> perms;
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return perms;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char p[5] = {};
    if (std::sscanf(line, "%lx-%lx %4s", &lo, &hi, p) != 3) continue;
    if (lo < end && hi > start) perms.emplace_back(p);
  }
  std::fclose(f);
  return perms;
}

// --- fixture -------------------------------------------------------------------------------

class SymbolPatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(OpenTestAlloc(PEAKLINE_TESTALLOC_PATH, RTLD_NOW, &relro_lib_, &error)) << error;
  }
  void TearDown() override {
    g_dlopen_patcher.store(nullptr);
    patcher_.Uninstall();
  }

  bool Install(const std::vector<Interposition>& table, bool skip_executable) {
    const Status installed = patcher_.Install(table.data(), table.size(),
                                              skip_executable ? kSkipExecutable : nullptr,
                                              skip_executable ? 1 : 0);
    EXPECT_TRUE(installed.ok()) << installed.message();
    return installed.ok();
  }

  SymbolPatcher patcher_;
  TestAlloc relro_lib_;
};

TEST_F(SymbolPatcherTest, OriginalsAreTheGlobalDefinitionsNotTheReplacements) {
  ASSERT_TRUE(Install(Table(true), true));
  for (int f = 0; f < kFnCount; ++f) {
    EXPECT_EQ(g_real[f], dlsym(RTLD_DEFAULT, kNames[f])) << kNames[f];
    EXPECT_NE(g_real[f], kReplacements[f]) << kNames[f];
  }
  EXPECT_TRUE(patcher_.installed());
}

TEST_F(SymbolPatcherTest, PatchesEveryRelocationKindOfAFullRelroLibrary) {
  ExerciseTestAlloc(relro_lib_, /*patched=*/false);
  ASSERT_TRUE(Install(Table(), true));
  const PatchStats stats = patcher_.last_stats();
  EXPECT_GT(stats.objects_scanned, 1u);
  EXPECT_GT(stats.slots_patched, 0u);
  EXPECT_EQ(stats.slots_failed, 0u);
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);
}

TEST_F(SymbolPatcherTest, RelroPagesAreReadOnlyAgainAfterPatchingAndRestoring) {
  const RelroRange relro = RelroOf(relro_lib_.handle);
  ASSERT_LT(relro.start, relro.end) << "test library built without RELRO";
  auto expect_read_only = [&](const char* when) {
    std::vector<std::string> perms = Permissions(relro.start, relro.end);
    ASSERT_FALSE(perms.empty()) << when;
    for (const std::string& p : perms) EXPECT_EQ(p[1], '-') << when << ": " << p;
  };
  expect_read_only("before Install");
  ASSERT_TRUE(Install(Table(), true));
  // The pointers in .data.rel.ro (inside RELRO) were rewritten, so RELRO pages were written.
  void* p = nullptr;
  EXPECT_EQ(Calls(kMalloc, [&] { p = relro_lib_.malloc_via_const_table(8); }), 1);
  relro_lib_.free_plt(p);
  expect_read_only("after Install");
  patcher_.Uninstall();
  EXPECT_EQ(Calls(kMalloc, [&] { p = relro_lib_.malloc_via_const_table(8); }), 0);
  relro_lib_.free_plt(p);
  expect_read_only("after Uninstall");
}

TEST_F(SymbolPatcherTest, UninstallRestoresEverySlot) {
  ASSERT_TRUE(Install(Table(), true));
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);
  patcher_.Uninstall();
  EXPECT_FALSE(patcher_.installed());
  ExerciseTestAlloc(relro_lib_, /*patched=*/false);
  // A second Uninstall and a PatchNewObjects while uninstalled are no-ops.
  patcher_.Uninstall();
  patcher_.PatchNewObjects();
  ExerciseTestAlloc(relro_lib_, /*patched=*/false);
  // And it can be installed again.
  ASSERT_TRUE(Install(Table(), true));
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);
}

TEST_F(SymbolPatcherTest, PatchesTheExecutableUnlessSkipped) {
  auto exe_malloc_calls = [] {
    return Calls(kMalloc, [] {
      void* p = std::malloc(24);
      Escape(p);
      std::free(p);
    });
  };
  ASSERT_TRUE(Install(Table(), /*skip_executable=*/false));
  EXPECT_EQ(exe_malloc_calls(), 1);
  patcher_.Uninstall();
  EXPECT_EQ(exe_malloc_calls(), 0);

  ASSERT_TRUE(Install(Table(), /*skip_executable=*/true));
  EXPECT_EQ(exe_malloc_calls(), 0);
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);  // the skip is per object
}

TEST_F(SymbolPatcherTest, SkipsTheObjectsOfSkipAddresses) {
  const void* skip[] = {reinterpret_cast<const void*>(relro_lib_.malloc_plt),
                        reinterpret_cast<const void*>(&SkipAnchor)};
  std::vector<Interposition> table = Table();
  const Status installed = patcher_.Install(table.data(), table.size(), skip, 2);
  ASSERT_TRUE(installed.ok()) << installed.message();
  ExerciseTestAlloc(relro_lib_, /*patched=*/false);
}

TEST_F(SymbolPatcherTest, LibraryLoadedAfterInstallIsPatchedByPatchNewObjects) {
  ASSERT_FALSE(IsLoaded(PEAKLINE_TESTALLOC_LAZY_PATH));
  ASSERT_TRUE(Install(Table(), true));
  // Lazy binding: none of its PLT slots is bound before the patcher sees them.
  TestAlloc lazy;
  std::string error;
  ASSERT_TRUE(OpenTestAlloc(PEAKLINE_TESTALLOC_LAZY_PATH, RTLD_LAZY, &lazy, &error)) << error;
  void* p = nullptr;
  EXPECT_EQ(Calls(kMalloc, [&] { p = lazy.malloc_via_data(8); }), 0) << "not scanned yet";
  lazy.free_via_data(p);
  patcher_.PatchNewObjects();
  PatchStats stats = patcher_.last_stats();
  EXPECT_GE(stats.objects_scanned, 1u);
  EXPECT_GT(stats.slots_patched, 0u);
  EXPECT_GT(stats.slots_unbound, 0u) << "no PLT slot was still a lazy-binding stub";
  ExerciseTestAlloc(lazy, /*patched=*/true);
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);

  // Nothing new: the scan stops at the load counters, the stats of the last scan remain.
  patcher_.PatchNewObjects();
  PatchStats again = patcher_.last_stats();
  EXPECT_EQ(again.objects_scanned, stats.objects_scanned);
  EXPECT_EQ(again.slots_patched, stats.slots_patched);

  // Uninstall puts the lazy stubs back; the calls then bind normally.
  patcher_.Uninstall();
  ExerciseTestAlloc(lazy, /*patched=*/false);
  dlclose(lazy.handle);
}

TEST_F(SymbolPatcherTest, DlopenReplacementPatchesWhatItLoads) {
  ASSERT_FALSE(IsLoaded(PEAKLINE_TESTALLOC_LAZY_PATH));
  // The executable is patched too, so its dlopen calls (including the patcher's own
  // dlopen(RTLD_NOLOAD) while it holds its lock) reach CountingDlopen.
  g_dlopen_patcher.store(&patcher_);
  ASSERT_TRUE(Install(Table(/*with_dlopen=*/true), /*skip_executable=*/false));
  long dlopens_before = g_calls[kDlopen].load();
  void* handle = dlopen(PEAKLINE_TESTALLOC_LAZY_PATH, RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_GE(g_calls[kDlopen].load() - dlopens_before, 1);
  auto* lazy_malloc = reinterpret_cast<decltype(&pl_ta_malloc_via_data)>(
      dlsym(handle, "pl_ta_malloc_via_data"));
  auto* lazy_free = reinterpret_cast<decltype(&pl_ta_free_via_data)>(
      dlsym(handle, "pl_ta_free_via_data"));
  ASSERT_NE(lazy_malloc, nullptr);
  void* p = nullptr;
  EXPECT_EQ(Calls(kMalloc, [&] { p = lazy_malloc(8); }), 1);
  EXPECT_EQ(Calls(kFree, [&] { lazy_free(p); }), 1);
  patcher_.Uninstall();
  dlclose(handle);
}

TEST_F(SymbolPatcherTest, LibraryReloadedAfterDlcloseIsPatchedAgain) {
  ASSERT_FALSE(IsLoaded(PEAKLINE_TESTALLOC_LAZY_PATH));
  ASSERT_TRUE(Install(Table(), true));
  for (int round = 0; round < 3; ++round) {
    TestAlloc lazy;
    std::string error;
    ASSERT_TRUE(OpenTestAlloc(PEAKLINE_TESTALLOC_LAZY_PATH, RTLD_LAZY, &lazy, &error)) << error;
    patcher_.PatchNewObjects();
    ExerciseTestAlloc(lazy, /*patched=*/true);
    ASSERT_EQ(dlclose(lazy.handle), 0);
    ASSERT_FALSE(IsLoaded(PEAKLINE_TESTALLOC_LAZY_PATH)) << "round " << round;
  }
  patcher_.PatchNewObjects();  // forgets the unloaded object
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);
  patcher_.Uninstall();  // must not touch the unmapped library
  ExerciseTestAlloc(relro_lib_, /*patched=*/false);
}

TEST_F(SymbolPatcherTest, InstallFailsWithoutPatchingAnything) {
  std::vector<Interposition> table = Table();
  void* missing_original = nullptr;
  table.push_back(Interposition{"peakline_no_such_function",
                                reinterpret_cast<void*>(&CountingMalloc), &missing_original});
  Status error = patcher_.Install(table.data(), table.size(), kSkipExecutable, 1);
  EXPECT_FALSE(error.ok());
  EXPECT_NE(error.message().find("peakline_no_such_function"), std::string::npos)
      << error.message();
  EXPECT_FALSE(patcher_.installed());
  ExerciseTestAlloc(relro_lib_, /*patched=*/false);

  std::vector<Interposition> twice = Table();
  twice.push_back(twice.front());
  error = patcher_.Install(twice.data(), twice.size(), kSkipExecutable, 1);
  EXPECT_FALSE(error.ok());
  EXPECT_FALSE(error.message().empty());

  ASSERT_TRUE(Install(Table(), true));
  error = patcher_.Install(table.data(), table.size(), kSkipExecutable, 1);
  EXPECT_FALSE(error.ok());
  EXPECT_NE(error.message().find("already"), std::string::npos) << error.message();
  ExerciseTestAlloc(relro_lib_, /*patched=*/true);
}

// Other threads keep calling through the slots while they are patched and restored: every call
// must reach a working malloc/free/memcpy (old or new), never a torn pointer.
TEST_F(SymbolPatcherTest, ConcurrentCallersSeeOldOrNewFunction) {
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      char src[64], dst[64];
      std::memset(src, 5, sizeof src);
      while (!stop.load(std::memory_order_relaxed)) {
        void* p = relro_lib_.malloc_plt(100);
        if (p == nullptr) bad.fetch_add(1);
        relro_lib_.free_plt(p);
        p = relro_lib_.malloc_via_const_table(10);
        relro_lib_.free_via_data(p);
        relro_lib_.memcpy_plt(dst, src, sizeof dst);
        if (std::memcmp(src, dst, sizeof dst) != 0) bad.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(Install(Table(), true));
    patcher_.Uninstall();
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace peakline::hooks
