#include "hooks/python_domain.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace peakline::hooks::internal {

namespace {

// Notes the block the native hooks allocate inside the call that follows.
PEAKLINE_TLS_ACCESS inline void ExpectNativeBlock() { t_state.native_block = nullptr; }
PEAKLINE_TLS_ACCESS inline bool IsNativeBlock(void* p) {
  return p != nullptr && t_state.native_block == p;
}

// In probe mode a sampled block needs no block of its own from malloc: its free is probed.
bool Probing() { return g_python_probe.load(std::memory_order_relaxed); }

std::atomic<ProbeModeSwitch> g_probe_switch{nullptr};
std::atomic<bool> g_probe_refused{false};  // the switch said no: this session never probes

}  // namespace

std::atomic<bool> g_python_probe{false};

bool StartPythonProbe() {
  if (g_python_probe.load(std::memory_order_relaxed)) return true;
  if (g_probe_refused.load(std::memory_order_relaxed)) return false;
  g_python_probe.store(true, std::memory_order_relaxed);
  const ProbeModeSwitch start = g_probe_switch.load(std::memory_order_relaxed);
  if (start != nullptr && !start()) {
    g_python_probe.store(false, std::memory_order_relaxed);
    g_probe_refused.store(true, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void ResetPythonProbe() {
  g_python_probe.store(false, std::memory_order_relaxed);
  g_probe_refused.store(false, std::memory_order_relaxed);
}

void* SampledMalloc(const DomainAllocator& a, size_t size) {
  const bool probing = Probing();
  ExpectNativeBlock();
  void* p = InPythonDomain(
      [&] { return a.malloc(a.ctx, probing ? size : std::max(size, kNativeRequestBytes)); });
  if (p != nullptr) TrackPythonSample(t_state, p, size, probing || IsNativeBlock(p));
  return p;
}

void* SampledCalloc(const DomainAllocator& a, size_t nelem, size_t elsize) {
  size_t bytes;
  const bool overflow = __builtin_mul_overflow(nelem, elsize, &bytes);
  const bool probing = Probing();
  ExpectNativeBlock();
  void* p = InPythonDomain([&] {
    return overflow || probing ? a.calloc(a.ctx, nelem, elsize)
                               : a.calloc(a.ctx, 1, std::max(bytes, kNativeRequestBytes));
  });
  if (p != nullptr) TrackPythonSample(t_state, p, bytes, probing || IsNativeBlock(p));
  return p;
}

void* SampledRealloc(const DomainAllocator& a, void* old, size_t size) {
  const bool probing = Probing();
  ExpectNativeBlock();
  void* p = InPythonDomain([&] { return a.realloc(a.ctx, old, size); });
  if (p == nullptr) {
    AfterPlainPythonAlloc();
    return nullptr;
  }
  if (!probing && !IsNativeBlock(p) && size < kNativeRequestBytes) {
    // Still in pymalloc's pools: move it into a block of its own (its `size` bytes are valid).
    ExpectNativeBlock();
    void* q = InPythonDomain([&] { return a.malloc(a.ctx, kNativeRequestBytes); });
    if (IsNativeBlock(q)) {
      HookThreadState& s = t_state;
      ++s.busy;  // the copy is peakline's, not the program's
      std::memcpy(q, p, size);
      --s.busy;
      InPythonDomain([&] { a.free(a.ctx, p); });
      p = q;
      t_state.native_block = q;
    } else if (q != nullptr) {
      InPythonDomain([&] { a.free(a.ctx, q); });
    }
  }
  TrackPythonSample(t_state, p, size, probing || IsNativeBlock(p));
  return p;
}

}  // namespace peakline::hooks::internal

namespace peakline::hooks {

bool PythonFreesProbed() { return internal::g_python_probe.load(std::memory_order_relaxed); }

void ProbePythonFreesFromNow() { internal::g_python_probe.store(true, std::memory_order_relaxed); }

void SetProbeModeSwitch(ProbeModeSwitch fn) {
  internal::g_probe_switch.store(fn, std::memory_order_relaxed);
}

}  // namespace peakline::hooks
