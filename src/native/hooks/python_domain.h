// What the Python-domain allocator wrappers do (PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ, installed
// by hooks/pymem_hooks.cc), without Python.h: each call forwards to the allocator that was
// installed before ours, the DomainAllocator below (PyMemAllocatorEx's layout), and the
// native tests drive the same code with allocators of their own.
//
// These run on every Python object's allocation and death, so the fast paths are inline:
//   - an allocation: one compare and a countdown subtraction;
//   - a free: nothing at all -- hooks/pymem_hooks.cc leaves the original free in place -- or,
//     in probe mode (below), a table probe in DomainFree.
//
// Why a free needs no lookup. A sampled block must be found again when it is freed, and
// looking every free up in the sampled-pointer table costs a cache miss on most of them. So a
// sampled Python-domain block is placed where its free is seen anyway: at a sampling point the
// wrapper asks its allocator for at least kNativeRequestBytes, above pymalloc's small-object
// limit (512 bytes, every CPython from 3.10 to 3.15), and pymalloc passes such a request to
// malloc and its free to free() -- both through libpython's patched GOT slots, so the native
// hooks see both, and the native free hook's table lookup ends the sample. A sampled block
// costs at most ~520 bytes instead of its own size; one block in ~10,000 is sampled at the
// default interval.
//
// That holds only if the block the wrapper returns is the one malloc returned. The native
// hooks note the last block they allocated inside a Python-domain call (native_block); where
// the two differ -- debug hooks (PYTHONMALLOC=debug, -X dev: a header before the block),
// PYTHONMALLOC=mimalloc, an allocator installed by a library -- the sample is still taken,
// and every Python-domain free of the session probes the table from then on (probe mode, with
// DomainFree put in place), as tracemalloc does on every free. Where the allocator underneath
// is known from the start to be another wrapper (its ctx is set), probe mode starts at once
// and sampled blocks keep their own size. A sampled realloc whose result stays in pymalloc's
// pools is moved into a block from malloc (a copy of at most 512 bytes, at sampling points
// only).
#ifndef PEAKLINE_HOOKS_PYTHON_DOMAIN_H_
#define PEAKLINE_HOOKS_PYTHON_DOMAIN_H_

#include <cstddef>

#include "hooks/hook_thread_state.h"

namespace peakline::hooks {

// Same members, same order as CPython's PyMemAllocatorEx.
struct DomainAllocator {
  void* ctx;
  void* (*malloc)(void* ctx, size_t size);
  void* (*calloc)(void* ctx, size_t nelem, size_t elsize);
  void* (*realloc)(void* ctx, void* ptr, size_t new_size);
  void (*free)(void* ctx, void* ptr);
};

// Probe mode is about to start (GIL held, at a sampling point): returns true once every
// Python-domain free reaches DomainFree, false if that cannot be arranged (the sample is then
// counted as not tracked). hooks/pymem_hooks.cc installs its free wrapper, which it otherwise
// leaves out; without a switch (native tests) DomainFree is assumed to be called.
using ProbeModeSwitch = bool (*)();
void SetProbeModeSwitch(ProbeModeSwitch fn);

// For the rest of the session every Python-domain free probes the table (probe mode), and a
// sampled block is allocated at its own size. For an allocator underneath that is itself a
// wrapper (tracemalloc started before us, debug hooks): what it records stays the program's
// own sizes. The caller makes every Python-domain free reach DomainFree.
void ProbePythonFreesFromNow();

// Whether this session is in probe mode (for tests and diagnostics).
bool PythonFreesProbed();

// The smallest request pymalloc hands to malloc (its small-object limit + 1).
inline constexpr size_t kNativeRequestBytes = 513;

namespace internal {

// Around a call of the allocator underneath: the malloc and mmap it makes are counted in the
// exact totals but not sampled a second time (the wrapper samples at the Python level).
struct PythonDomainScope {
  PEAKLINE_TLS_ACCESS PythonDomainScope() { ++t_state.python_depth; }
  PEAKLINE_TLS_ACCESS ~PythonDomainScope() { --t_state.python_depth; }
};

// call() (a call of the allocator underneath) inside a PythonDomainScope.
template <typename Call>
inline auto InPythonDomain(Call call) {
  PythonDomainScope scope;
  return call();
}

// Probe mode (hooks/python_domain.cc). Starts it for the rest of the session (sampling points
// only, GIL held): false if the switch refused, and then for the rest of the session too.
bool StartPythonProbe();
// Probe mode off, for a new session (StartMemoryHooks).
void ResetPythonProbe();

// True when an allocation of `size` bytes needs nothing but the countdown (the usual case).
// Whether it counts at all (a session counting, not peakline's own thread, not inside a hook)
// is asked only at a sampling point (PythonSamplingPoint): the bytes of an allocation that
// does not count take nothing from the program's sampling (Poisson points on disjoint bytes
// are independent), and a point they hold is dropped there.
PEAKLINE_TLS_ACCESS inline bool PlainPythonAlloc(size_t size) {
  HookThreadState& s = t_state;
  if (__builtin_expect(s.session == g_session.load(std::memory_order_relaxed) &&
                           s.alloc.SkipIfNoPoint(static_cast<int64_t>(size)),
                       1)) {
    return true;
  }
  return !PythonSamplingPoint(s, size);
}

// After an unsampled allocation: a peak reached underneath is announced now.
PEAKLINE_TLS_ACCESS inline void AfterPlainPythonAlloc() {
  HookThreadState& s = t_state;
  if (__builtin_expect(s.pending_peak != 0, 0)) AnnouncePendingPeak(s);
}

PEAKLINE_TLS_ACCESS inline void BeforePythonFree(void* ptr) {
  if (__builtin_expect(g_python_probe.load(std::memory_order_relaxed), 0)) {
    ProbePythonFree(t_state, ptr);
  }
}

// Sampling points (out of line, in hooks/python_domain.cc).
void* SampledMalloc(const DomainAllocator& a, size_t size);
void* SampledCalloc(const DomainAllocator& a, size_t nelem, size_t elsize);
void* SampledRealloc(const DomainAllocator& a, void* old, size_t size);

}  // namespace internal

inline void* DomainMalloc(const DomainAllocator& a, size_t size) {
  if (__builtin_expect(!internal::PlainPythonAlloc(size), 0)) {
    return internal::SampledMalloc(a, size);
  }
  void* p = internal::InPythonDomain([&] { return a.malloc(a.ctx, size); });
  internal::AfterPlainPythonAlloc();
  return p;
}

inline void* DomainCalloc(const DomainAllocator& a, size_t nelem, size_t elsize) {
  size_t bytes;
  if (__builtin_mul_overflow(nelem, elsize, &bytes)) bytes = 0;  // fails underneath
  if (__builtin_expect(!internal::PlainPythonAlloc(bytes), 0)) {
    return internal::SampledCalloc(a, nelem, elsize);
  }
  void* p = internal::InPythonDomain([&] { return a.calloc(a.ctx, nelem, elsize); });
  internal::AfterPlainPythonAlloc();
  return p;
}

inline void* DomainRealloc(const DomainAllocator& a, void* old, size_t size) {
  internal::BeforePythonFree(old);
  if (__builtin_expect(!internal::PlainPythonAlloc(size), 0)) {
    return internal::SampledRealloc(a, old, size);
  }
  void* p = internal::InPythonDomain([&] { return a.realloc(a.ctx, old, size); });
  internal::AfterPlainPythonAlloc();
  return p;
}

// No PythonDomainScope: the free() underneath, if any, is where a sampled block's end is seen.
inline void DomainFree(const DomainAllocator& a, void* ptr) {
  internal::BeforePythonFree(ptr);
  a.free(a.ctx, ptr);
}

}  // namespace peakline::hooks

#endif  // PEAKLINE_HOOKS_PYTHON_DOMAIN_H_
