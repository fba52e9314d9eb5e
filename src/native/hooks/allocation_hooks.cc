#include "hooks/allocation_hooks.h"

#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "cpu/clock.h"
#include "hooks/python_domain.h"
#include "hooks/symbol_patcher.h"
#include "memory/byte_sampler.h"
#include "memory/mapping_table.h"
#include "memory/sampled_pointer_table.h"
#include "transport/memory_event.h"

namespace peakline::hooks {

namespace {

using memory::ByteSampler;
using transport::MemoryEvent;
using transport::MemoryEventType;

using internal::Counting;
using internal::g_counting;
using internal::g_sampled;
using internal::g_session;
using internal::t_state;

// ---- Real functions, filled by the SymbolPatcher before any slot is patched. -----------------
struct RealFunctions {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  void* (*mmap)(void*, size_t, int, int, int, off_t);
  void* (*mmap64)(void*, size_t, int, int, int, off_t);
  int (*munmap)(void*, size_t);
  void* (*memcpy)(void*, const void*, size_t);
  void* (*memmove)(void*, const void*, size_t);
  void* (*mempcpy)(void*, const void*, size_t);
  void* (*memcpy_chk)(void*, const void*, size_t, size_t);
  void* (*memmove_chk)(void*, const void*, size_t, size_t);
  void* (*mempcpy_chk)(void*, const void*, size_t, size_t);
};
RealFunctions g_real;

// ---- Session state. Written only while hooks are not counting (g_counting false). -----------
std::atomic<bool> g_copies{false};
int64_t g_alloc_mean = 512 * 1024;
int64_t g_copy_mean = 2 * 1024 * 1024;
MemoryStackCapture g_capture = nullptr;
transport::MpscRing* g_ring = nullptr;  // leaked on purpose: a late hook may still read it
memory::HeapCounters g_heap;
SymbolPatcher* g_patcher = nullptr;
std::atomic<uint64_t> g_alloc_samples{0}, g_free_samples{0}, g_copy_samples{0}, g_untracked{0};
std::atomic<uint64_t> g_seed{0x9E3779B97F4A7C15ULL};
pthread_key_t g_exit_key;            // its destructor flushes an exiting thread's delta
bool g_exit_key_ok = false;

memory::MappingTable* g_mappings = nullptr;  // anonymous mappings: address -> length

// ---- OpenBLAS work buffers ------------------------------------------------------------------
// OpenBLAS maps a work buffer (32 MiB on x86-64) for each thread on that thread's first BLAS
// call and keeps it until exit. It is counted in the heap totals like any anonymous mapping,
// but not sampled: charged to a line it would make the first line that calls BLAS look like
// it holds 32 MiB of user data. Recognised by the caller of mmap: the return address lies in
// the code of a loaded object whose file name contains "openblas" (libopenblas*, numpy's and
// scipy's bundled libscipy_openblas*). The ranges are collected outside the hooks (start, and
// after every dlopen); the hook only compares against them, for large mappings only.
constexpr size_t kBlasBufferMinBytes = size_t{4} << 20;
constexpr int kMaxBlasRanges = 16;
// A tracked mapping's length carries this tag in its top byte when it is a BLAS buffer.
constexpr size_t kBlasTag = size_t{1} << 56;
constexpr size_t kLengthMask = kBlasTag - 1;
struct CodeRange {
  std::atomic<uintptr_t> lo{0};
  std::atomic<uintptr_t> hi{0};
};
CodeRange g_blas_ranges[kMaxBlasRanges];
std::atomic<int> g_blas_range_count{0};
std::atomic<bool> g_blas_refreshing{false};
std::atomic<int64_t> g_blas_live{0}, g_blas_most{0}, g_blas_maps{0};

bool InBlasCode(uintptr_t pc) {
  const int n = g_blas_range_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (pc >= g_blas_ranges[i].lo.load(std::memory_order_relaxed) &&
        pc < g_blas_ranges[i].hi.load(std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

int AddBlasRanges(dl_phdr_info* info, size_t, void*) {
  const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  const char* slash = std::strrchr(name, '/');
  if (std::strstr(slash != nullptr ? slash + 1 : name, "openblas") == nullptr) return 0;
  for (int p = 0; p < info->dlpi_phnum; ++p) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[p];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    const int n = g_blas_range_count.load(std::memory_order_relaxed);
    bool known = false;
    for (int i = 0; i < n && !known; ++i) known = g_blas_ranges[i].lo.load() == lo;
    if (known || n == kMaxBlasRanges) continue;
    g_blas_ranges[n].lo.store(lo, std::memory_order_relaxed);
    g_blas_ranges[n].hi.store(lo + ph.p_memsz, std::memory_order_relaxed);
    g_blas_range_count.store(n + 1, std::memory_order_release);
  }
  return 0;
}

// Not from a hook's hot path: at start and after dlopen. One refresher at a time (a
// concurrent dlopen's refresh is covered by the one running, or by the next dlopen).
void RefreshBlasRanges() {
  if (g_blas_refreshing.exchange(true, std::memory_order_acquire)) return;
  dl_iterate_phdr(AddBlasRanges, nullptr);
  g_blas_refreshing.store(false, std::memory_order_release);
}

// ---- Helpers (hot path) ---------------------------------------------------------------------

struct BusyScope {
  explicit BusyScope(HookThreadState& s) : s_(s) { ++s_.busy; }
  ~BusyScope() { --s_.busy; }
  HookThreadState& s_;
};

int32_t Tid(HookThreadState& s) {
  if (s.tid == 0) s.tid = static_cast<int32_t>(syscall(SYS_gettid));
  return s.tid;
}

void InitSamplers(HookThreadState& s) {
  const uint64_t seed = g_seed.fetch_add(0x9E3779B97F4A7C15ULL, std::memory_order_relaxed) ^
                        static_cast<uint64_t>(Tid(s)) * 0xBF58476D1CE4E5B9ULL;
  s.alloc.Init(seed, g_alloc_mean);
  s.copy.Init(seed ^ 0x94D049BB133111EBULL, g_copy_mean);
}

void OnThreadExit(void*);

// First counted call of this thread in this session: fresh samplers at this session's
// intervals, no residue from an earlier session, and a destructor that flushes the delta
// when the thread exits (else up to 64 KiB per short-lived thread would be lost).
void EnsureSession(HookThreadState& s) {
  const uint32_t session = g_session.load(std::memory_order_relaxed);
  if (__builtin_expect(s.session == session, 1)) return;
  s.session = session;
  s.delta = 0;
  s.pending_peak = 0;
  InitSamplers(s);
}

// Arms the thread-exit flush. Re-armed after it ran, so that frees made by other exit-time
// destructors are flushed too (glibc repeats key destructors while values are set). Keys
// below PTHREAD_KEY_2NDLEVEL_SIZE need no allocation; libc's own malloc calls are not hooked.
inline void ArmExitFlush(HookThreadState& s) {
  if (__builtin_expect(!s.exit_flush, 0) && g_exit_key_ok) {
    s.exit_flush = pthread_setspecific(g_exit_key, reinterpret_cast<void*>(1)) == 0;
  }
}

void PushEvent(HookThreadState& s, MemoryEventType type, uint8_t domain, uintptr_t address,
               int64_t size, int64_t weight, int64_t time_ns, bool with_stack) {
  MemoryEvent ev{type, domain, 0, Tid(s), address, size, weight, time_ns};
  transport::RawFrame frames[transport::kMaxMemoryFrames];
  if (with_stack && g_capture != nullptr) {
    ev.nframes = static_cast<uint16_t>(g_capture(frames, transport::kMaxMemoryFrames));
  }
  g_ring->TryWrite(&ev, sizeof(ev), frames, ev.nframes * sizeof(transport::RawFrame));
}

void FlushDelta(HookThreadState& s) {
  int64_t live = 0, now = 0;
  const int64_t delta = s.delta;
  s.delta = 0;
  if (g_heap.Flush(delta, &live, &now)) {
    if (s.python_depth > 0) {
      // The Python-level sample of this block is pushed after the allocator returns; the
      // peak event must follow it (the Python-domain wrapper announces it afterwards).
      s.pending_peak = live;
      s.pending_peak_time_ns = now;
    } else {
      PushEvent(s, MemoryEventType::kPeak, 0, 0, live, 0, now, false);
    }
  }
}

void OnThreadExit(void*) {
  HookThreadState& s = t_state;
  s.exit_flush = false;
  if (s.delta != 0 && s.session == g_session.load(std::memory_order_relaxed) &&
      g_counting.load(std::memory_order_relaxed)) {
    BusyScope busy(s);
    FlushDelta(s);
  }
}

// Exact accounting of a block of `bytes` (negative for a free).
inline void Account(HookThreadState& s, int64_t bytes) {
  EnsureSession(s);
  ArmExitFlush(s);
  s.delta += bytes;
  if (s.delta >= memory::kFlushBytes || s.delta <= -memory::kFlushBytes ||
      bytes >= memory::kFlushBytes || bytes <= -memory::kFlushBytes) {
    FlushDelta(s);
  }
}

// A sampled block (requested size): into the table, and its event with its stack.
void TrackSample(HookThreadState& s, void* ptr, size_t size, uint8_t domain) {
  if (!g_sampled->Insert(reinterpret_cast<uintptr_t>(ptr))) {
    g_untracked.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_alloc_samples.fetch_add(1, std::memory_order_relaxed);
  PushEvent(s, MemoryEventType::kAlloc, domain, reinterpret_cast<uintptr_t>(ptr),
            static_cast<int64_t>(size), ByteSampler::Weight(static_cast<int64_t>(size), g_alloc_mean),
            cpu::MonotonicNowNs(), true);  // when: the line's timeline point (vDSO, ~20 ns)
}

// Sampling of a new block (requested size).
void SampleAlloc(HookThreadState& s, void* ptr, size_t size, uint8_t domain) {
  EnsureSession(s);
  if (s.alloc.Record(static_cast<int64_t>(size), g_alloc_mean) && s.own_work == 0) {
    TrackSample(s, ptr, size, domain);
  }
}

inline void SampleFree(HookThreadState& s, void* ptr) {
  if (g_sampled->Remove(reinterpret_cast<uintptr_t>(ptr))) {
    g_free_samples.fetch_add(1, std::memory_order_relaxed);
    PushEvent(s, MemoryEventType::kFree, 0, reinterpret_cast<uintptr_t>(ptr), 0, 0,
              cpu::MonotonicNowNs(), false);
  }
}

// A new native block from any malloc-family call. Inside a Python-domain call it is the
// Python allocator's: noted for the wrapper (hooks/python_domain.h), not sampled again.
inline void OnNativeAlloc(void* ptr, size_t requested) {
  HookThreadState& s = t_state;
  if (ptr == nullptr || !Counting(s)) return;
  BusyScope busy(s);
  if (s.python_depth == 0) {
    SampleAlloc(s, ptr, requested, transport::kDomainNative);
  } else {
    s.native_block = ptr;
  }
  Account(s, static_cast<int64_t>(malloc_usable_size(ptr)));
}

// Also inside a Python-domain call: a sampled Python block lives in a block from malloc, and
// a realloc underneath may free it.
inline void OnNativeFree(void* ptr) {
  HookThreadState& s = t_state;
  if (ptr == nullptr || !Counting(s)) return;
  BusyScope busy(s);
  SampleFree(s, ptr);
  Account(s, -static_cast<int64_t>(malloc_usable_size(ptr)));
}

// A thread that must count nothing (peakline's own) is parked on the fast paths of the
// Python-domain wrappers and the copy hooks: its state says "this session" and its countdowns
// never run out, so those paths return after one compare without asking whether it counts.
void Park(HookThreadState& s) {
  s.session = g_session.load(std::memory_order_relaxed);
  s.alloc.countdown = INT64_MAX;
  s.copy.countdown = INT64_MAX;
}

// A sampling point on the copy stream, or this thread's first copy in a new session.
__attribute__((noinline, cold)) void CopySlow(HookThreadState& s, int64_t n) {
  if (s.busy != 0) return;  // a copy of peakline's own, inside a hook
  if (s.internal) {
    Park(s);
    return;
  }
  if (!g_copies.load(std::memory_order_relaxed)) {
    // Copies are not tracked in this session (or it ended): off the slow path until the next.
    if (g_counting.load(std::memory_order_relaxed)) {
      BusyScope busy(s);
      EnsureSession(s);
      s.copy.countdown = INT64_MAX;
    }
    return;
  }
  BusyScope busy(s);
  EnsureSession(s);
  if (!s.copy.Record(n, g_copy_mean) || s.own_work != 0) return;
  g_copy_samples.fetch_add(1, std::memory_order_relaxed);
  PushEvent(s, MemoryEventType::kCopy, 0, 0, n, ByteSampler::Weight(n, g_copy_mean), 0, true);
}

// Every memcpy of every patched library comes here: one compare and a countdown subtraction.
// Whether the copy counts at all (copies tracked, not peakline's own thread, not inside a hook)
// is asked only at a sampling point: bytes of a copy that does not count take nothing from the
// program's sampling (Poisson points on disjoint bytes are independent), and a point they
// hold is dropped in CopySlow.
__attribute__((always_inline)) inline void OnCopy(size_t n) {
  HookThreadState& s = t_state;
  const auto bytes = static_cast<int64_t>(n);
  if (__builtin_expect(s.session == g_session.load(std::memory_order_relaxed) &&
                           s.copy.SkipIfNoPoint(bytes), 1)) {
    return;
  }
  CopySlow(s, bytes);
}

// ---- The replacements ------------------------------------------------------------------------

void* HookMalloc(size_t size) {
  void* p = g_real.malloc(size);
  OnNativeAlloc(p, size);
  return p;
}
void* HookCalloc(size_t n, size_t size) {
  void* p = g_real.calloc(n, size);
  OnNativeAlloc(p, n * size);
  return p;
}
void HookFree(void* p) {
  OnNativeFree(p);
  g_real.free(p);
}
void* HookRealloc(void* old, size_t size) {
  OnNativeFree(old);
  void* p = g_real.realloc(old, size);
  if (p == nullptr && old != nullptr && size != 0) {
    // Failed: the old block is still live. Count it back (its sample, if any, is lost).
    HookThreadState& s = t_state;
    if (Counting(s)) {
      BusyScope busy(s);
      Account(s, static_cast<int64_t>(malloc_usable_size(old)));
    }
    return p;
  }
  OnNativeAlloc(p, size);
  return p;
}
void* HookReallocarray(void* old, size_t n, size_t size) {
  OnNativeFree(old);
  void* p = g_real.reallocarray(old, n, size);
  if (p == nullptr && old != nullptr && n * size != 0) {
    HookThreadState& s = t_state;
    if (Counting(s)) {
      BusyScope busy(s);
      Account(s, static_cast<int64_t>(malloc_usable_size(old)));
    }
    return p;
  }
  OnNativeAlloc(p, n * size);
  return p;
}
int HookPosixMemalign(void** out, size_t align, size_t size) {
  const int rc = g_real.posix_memalign(out, align, size);
  if (rc == 0) OnNativeAlloc(*out, size);
  return rc;
}
void* HookAlignedAlloc(size_t align, size_t size) {
  void* p = g_real.aligned_alloc(align, size);
  OnNativeAlloc(p, size);
  return p;
}
void* HookMemalign(size_t align, size_t size) {
  void* p = g_real.memalign(align, size);
  OnNativeAlloc(p, size);
  return p;
}
void* HookValloc(size_t size) {
  void* p = g_real.valloc(size);
  OnNativeAlloc(p, size);
  return p;
}
void* HookPvalloc(size_t size) {
  void* p = g_real.pvalloc(size);
  OnNativeAlloc(p, size);
  return p;
}

// caller: the return address of the mmap call (which object asked for the mapping).
void OnMap(void* p, size_t len, int flags, uintptr_t caller) {
  HookThreadState& s = t_state;
  if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || !Counting(s)) return;
  BusyScope busy(s);
  const bool blas = len >= kBlasBufferMinBytes && (len & ~kLengthMask) == 0 && InBlasCode(caller);
  if (!g_mappings->Insert(reinterpret_cast<uintptr_t>(p), blas ? len | kBlasTag : len)) {
    // Untrackable (its munmap could not be matched): leave it out of the totals entirely.
    g_untracked.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (blas) {
    g_blas_maps.fetch_add(1, std::memory_order_relaxed);
    const auto bytes = static_cast<int64_t>(len);
    const int64_t live = g_blas_live.fetch_add(bytes) + bytes;
    int64_t most = g_blas_most.load(std::memory_order_relaxed);
    while (live > most && !g_blas_most.compare_exchange_weak(most, live)) {}
  } else if (s.python_depth == 0) {
    SampleAlloc(s, p, len, transport::kDomainNative);
  }
  Account(s, static_cast<int64_t>(len));
}
__attribute__((noinline)) void* HookMmap(void* addr, size_t len, int prot, int flags, int fd,
                                         off_t off) {
  void* p = g_real.mmap(addr, len, prot, flags, fd, off);
  OnMap(p, len, flags, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
  return p;
}
__attribute__((noinline)) void* HookMmap64(void* addr, size_t len, int prot, int flags, int fd,
                                           off_t off) {
  void* p = g_real.mmap64(addr, len, prot, flags, fd, off);
  OnMap(p, len, flags, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
  return p;
}
int HookMunmap(void* addr, size_t len) {
  HookThreadState& s = t_state;
  if (Counting(s)) {
    BusyScope busy(s);
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    const size_t entry = g_mappings->Take(a);
    if (entry != 0) {
      const size_t tag = entry & ~kLengthMask;
      const size_t mapped = entry & kLengthMask;
      // Unmapping a prefix keeps the rest mapped (and tracked); interior holes are not
      // followed (their bytes stay counted until the mapping's start is unmapped).
      const size_t page = 4096;
      const size_t removed = len < mapped ? ((len + page - 1) & ~(page - 1)) : mapped;
      if (removed < mapped && !g_mappings->Insert(a + removed, (mapped - removed) | tag)) {
        g_untracked.fetch_add(1, std::memory_order_relaxed);
      }
      if (tag == kBlasTag) g_blas_live.fetch_sub(static_cast<int64_t>(removed));
      if (s.python_depth == 0) SampleFree(s, addr);
      Account(s, -static_cast<int64_t>(removed));
    }
  }
  return g_real.munmap(addr, len);
}

void* HookMemcpy(void* d, const void* src, size_t n) {
  OnCopy(n);
  return g_real.memcpy(d, src, n);
}
void* HookMemmove(void* d, const void* src, size_t n) {
  OnCopy(n);
  return g_real.memmove(d, src, n);
}
void* HookMempcpy(void* d, const void* src, size_t n) {
  OnCopy(n);
  return g_real.mempcpy(d, src, n);
}
void* HookMemcpyChk(void* d, const void* src, size_t n, size_t cap) {
  OnCopy(n);
  return g_real.memcpy_chk(d, src, n, cap);
}
void* HookMemmoveChk(void* d, const void* src, size_t n, size_t cap) {
  OnCopy(n);
  return g_real.memmove_chk(d, src, n, cap);
}
void* HookMempcpyChk(void* d, const void* src, size_t n, size_t cap) {
  OnCopy(n);
  return g_real.mempcpy_chk(d, src, n, cap);
}

void OnForkChild() {
  // The child has no tick thread: stop counting rather than fill a ring nobody drains.
  g_counting.store(false, std::memory_order_relaxed);
  g_copies.store(false, std::memory_order_relaxed);
  // The forking thread's cached id is the parent's. It goes into the samplers' seed next to
  // the seed counter, which every child inherits alike: with the parent's id, children forked
  // from one point would take the same samples of the same work (correlated estimates), and
  // their events would name the parent's thread. The child's own id (its pid) tells them apart.
  t_state.tid = 0;
}

}  // namespace

Status StartMemoryHooks(const MemoryConfig& config, MemoryStackCapture capture,
                        const void* self_addr) {
  static bool atfork_registered = false;
  if (!atfork_registered) {
    pthread_atfork(nullptr, nullptr, OnForkChild);
    g_exit_key_ok = pthread_key_create(&g_exit_key, OnThreadExit) == 0;
    atfork_registered = true;
  }
  HookThreadState& s = t_state;
  BusyScope busy(s);
  g_alloc_mean = config.alloc_mean_bytes;
  g_copy_mean = config.copy_mean_bytes;
  g_capture = capture;
  if (g_ring == nullptr) g_ring = new transport::MpscRing(config.event_ring_bytes);
  // 64 Ki slots (512 KiB of zero pages, resident only where sampled blocks hash to): at the
  // default mean of 512 KiB, a 10 GiB heap holds about 20 Ki sampled blocks, a third of the
  // slots. A full probe window makes a sample "untracked" (counted), never a crash.
  if (g_sampled == nullptr) g_sampled = new memory::SampledPointerTable(16);
  if (g_mappings == nullptr) g_mappings = new memory::MappingTable();
  // Drain anything left from an earlier session: the consumer is us, the producers are off.
  alignas(8) uint8_t scratch[sizeof(MemoryEvent) +
                             transport::kMaxMemoryFrames * sizeof(transport::RawFrame)];
  while (g_ring->Read(scratch, sizeof(scratch)) != 0) {}
  g_sampled->Clear();
  internal::ResetPythonProbe();
  g_mappings->Clear();
  g_heap.Reset();
  g_alloc_samples = g_free_samples = g_copy_samples = g_untracked = 0;
  g_blas_live = g_blas_most = g_blas_maps = 0;
  RefreshBlasRanges();
  g_session.fetch_add(1, std::memory_order_relaxed);  // every thread re-initialises lazily

  static const Interposition kTable[] = {
      MakeInterposition("malloc", &HookMalloc, &g_real.malloc),
      MakeInterposition("calloc", &HookCalloc, &g_real.calloc),
      MakeInterposition("realloc", &HookRealloc, &g_real.realloc),
      MakeInterposition("reallocarray", &HookReallocarray, &g_real.reallocarray),
      MakeInterposition("free", &HookFree, &g_real.free),
      MakeInterposition("posix_memalign", &HookPosixMemalign, &g_real.posix_memalign),
      MakeInterposition("aligned_alloc", &HookAlignedAlloc, &g_real.aligned_alloc),
      MakeInterposition("memalign", &HookMemalign, &g_real.memalign),
      MakeInterposition("valloc", &HookValloc, &g_real.valloc),
      MakeInterposition("pvalloc", &HookPvalloc, &g_real.pvalloc),
      MakeInterposition("mmap", &HookMmap, &g_real.mmap),
      MakeInterposition("mmap64", &HookMmap64, &g_real.mmap64),
      MakeInterposition("munmap", &HookMunmap, &g_real.munmap),
      MakeInterposition("memcpy", &HookMemcpy, &g_real.memcpy),
      MakeInterposition("memmove", &HookMemmove, &g_real.memmove),
      MakeInterposition("mempcpy", &HookMempcpy, &g_real.mempcpy),
      MakeInterposition("__memcpy_chk", &HookMemcpyChk, &g_real.memcpy_chk),
      MakeInterposition("__memmove_chk", &HookMemmoveChk, &g_real.memmove_chk),
      MakeInterposition("__mempcpy_chk", &HookMempcpyChk, &g_real.mempcpy_chk),
  };
  if (g_patcher == nullptr) g_patcher = new SymbolPatcher();
  const void* skip[] = {self_addr};
  // Counting starts before patching so no block allocated through a patched slot is missed;
  // until a slot is patched its callers simply are not seen.
  g_copies.store(config.track_copies, std::memory_order_relaxed);
  g_counting.store(true, std::memory_order_relaxed);
  Status installed = g_patcher->Install(kTable, sizeof(kTable) / sizeof(kTable[0]), skip, 1);
  if (!installed.ok()) {
    g_counting.store(false, std::memory_order_relaxed);
    g_copies.store(false, std::memory_order_relaxed);
  }
  return installed;
}

void StopMemoryHooks() {
  g_copies.store(false, std::memory_order_relaxed);
  g_counting.store(false, std::memory_order_relaxed);
  if (g_patcher != nullptr) g_patcher->Uninstall();
  // Flush this thread's residue; other threads' residues (< 64 KiB each) are lost.
  HookThreadState& s = t_state;
  if (s.delta != 0) {
    int64_t live, now;
    g_heap.Flush(s.delta, &live, &now);
    s.delta = 0;
  }
}

void ForgetEventRingAfterFork() { g_ring = nullptr; }

transport::MpscRing* MemoryEventRing() { return g_ring; }
memory::HeapCounters& Heap() { return g_heap; }

MemoryHookStats HookStats() {
  return MemoryHookStats{g_alloc_samples.load(), g_free_samples.load(), g_copy_samples.load(),
                         g_ring ? g_ring->dropped() : 0, g_untracked.load(),
                         g_blas_most.load(), g_blas_maps.load()};
}

void MarkCurrentThreadInternal() { t_state.internal = true; }

OwnWorkScope::OwnWorkScope() { ++t_state.own_work; }
OwnWorkScope::~OwnWorkScope() { --t_state.own_work; }

void PatchObjectsLoadedSince(SymbolPatcher* other) {
  HookThreadState& s = t_state;
  BusyScope busy(s);  // the patchers allocate; those are peakline's bytes
  if (other != nullptr) other->PatchNewObjects();
  if (g_patcher != nullptr) {
    g_patcher->PatchNewObjects();
    RefreshBlasRanges();  // a BLAS library may be among the new objects
  }
}

void* AllocationReplacementFor(void* real) {
  if (real == nullptr || !g_counting.load(std::memory_order_relaxed)) return real;
  struct Pair {
    void* real;
    void* hook;
  };
  auto pair = [](auto& original, auto hook) {
    return Pair{reinterpret_cast<void*>(__atomic_load_n(&original, __ATOMIC_RELAXED)),
                reinterpret_cast<void*>(hook)};
  };
  const Pair pairs[] = {
      pair(g_real.malloc, &HookMalloc),          pair(g_real.calloc, &HookCalloc),
      pair(g_real.realloc, &HookRealloc),        pair(g_real.reallocarray, &HookReallocarray),
      pair(g_real.free, &HookFree),              pair(g_real.posix_memalign, &HookPosixMemalign),
      pair(g_real.aligned_alloc, &HookAlignedAlloc), pair(g_real.memalign, &HookMemalign),
      pair(g_real.valloc, &HookValloc),          pair(g_real.pvalloc, &HookPvalloc),
      pair(g_real.mmap, &HookMmap),              pair(g_real.mmap64, &HookMmap64),
      pair(g_real.munmap, &HookMunmap),          pair(g_real.memcpy, &HookMemcpy),
      pair(g_real.memmove, &HookMemmove),        pair(g_real.mempcpy, &HookMempcpy),
      pair(g_real.memcpy_chk, &HookMemcpyChk),   pair(g_real.memmove_chk, &HookMemmoveChk),
      pair(g_real.mempcpy_chk, &HookMempcpyChk),
  };
  for (const Pair& p : pairs) {
    if (p.real == real) return p.hook;
  }
  return real;
}

namespace internal {

__thread HookThreadState t_state __attribute__((tls_model("initial-exec")));
std::atomic<bool> g_counting{false};
std::atomic<uint32_t> g_session{0};
memory::SampledPointerTable* g_sampled = nullptr;

namespace {

// A peak found inside a Python-domain call, pushed after that call's own sample (if any).
void PushPendingPeak(HookThreadState& s) {
  PushEvent(s, MemoryEventType::kPeak, 0, 0, s.pending_peak, 0, s.pending_peak_time_ns, false);
  s.pending_peak = 0;
}

}  // namespace

bool PythonSamplingPoint(HookThreadState& s, size_t size) {
  if (!Counting(s)) {
    if (s.internal) Park(s);
    return false;
  }
  BusyScope busy(s);
  EnsureSession(s);
  return s.alloc.Record(static_cast<int64_t>(size), g_alloc_mean) && s.own_work == 0;
}

void AnnouncePendingPeak(HookThreadState& s) {
  if (!Counting(s)) return;  // a later session starts without it (EnsureSession)
  BusyScope busy(s);
  PushPendingPeak(s);
}

void TrackPythonSample(HookThreadState& s, void* ptr, size_t size, bool in_native_block) {
  if (!Counting(s)) return;
  BusyScope busy(s);
  // Before the block is in the table: any free of it that can follow is probed.
  if (in_native_block || StartPythonProbe()) {
    TrackSample(s, ptr, size, transport::kDomainPython);
  } else {
    g_untracked.fetch_add(1, std::memory_order_relaxed);
  }
  if (s.pending_peak != 0) PushPendingPeak(s);
}

void ProbePythonFree(HookThreadState& s, void* ptr) {
  if (ptr == nullptr || !Counting(s)) return;
  if (!g_sampled->MayContain(reinterpret_cast<uintptr_t>(ptr))) return;
  BusyScope busy(s);
  SampleFree(s, ptr);
}

}  // namespace internal

}  // namespace peakline::hooks
