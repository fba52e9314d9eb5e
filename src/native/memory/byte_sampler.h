// ByteSampler: a Poisson process over bytes, one per thread (tcmalloc's design, see
// docs/sampling.md). Sampling points fall on the stream of allocated (or copied) bytes at
// exponentially distributed distances of mean T, so an event of s bytes is sampled with
// probability p(s) = 1 - exp(-s/T). A sampled event stands for s / p(s) bytes (the
// Horvitz-Thompson weight), which makes every per-line sum an unbiased estimate of the true
// bytes; events much larger than T have p ~ 1 and weight ~ s, i.e. they are counted exactly.
//
// Not thread safe: each thread owns its sampler (it lives in initial-exec TLS, zero-
// initialised; Init() runs on first use). Hot path: Record() is a subtract and a compare.
#ifndef PEAKLINE_MEMORY_BYTE_SAMPLER_H_
#define PEAKLINE_MEMORY_BYTE_SAMPLER_H_

#include <cmath>
#include <cstdint>

namespace peakline::memory {

struct ByteSampler {
  int64_t countdown;  // bytes until the next sampling point
  uint64_t rng;       // xorshift64* state; 0 = not initialised

  void Init(uint64_t seed, int64_t mean_bytes) {
    rng = seed | 1;
    countdown = NextDistance(mean_bytes);
  }

  // The hooks' fast path: consumes `bytes` and returns true when they hold no sampling point;
  // otherwise changes nothing (the caller's slow path then calls Record).
  bool SkipIfNoPoint(int64_t bytes) {
    if (countdown <= bytes) return false;
    countdown -= bytes;
    return true;
  }

  // True if an event of `bytes` contains a sampling point.
  bool Record(int64_t bytes, int64_t mean_bytes) {
    countdown -= bytes;
    if (__builtin_expect(countdown > 0, 1)) return false;
    // Memoryless: the next point is a fresh exponential distance from here.
    countdown = NextDistance(mean_bytes);
    return true;
  }

  static int64_t Weight(int64_t bytes, int64_t mean_bytes) {
    const double s = static_cast<double>(bytes);
    const double p = -std::expm1(-s / static_cast<double>(mean_bytes));
    return p > 0 ? static_cast<int64_t>(s / p + 0.5) : bytes;
  }

  int64_t NextDistance(int64_t mean_bytes) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    const uint64_t r = rng * 0x2545F4914F6CDD1DULL;
    // Uniform in (0, 1]; -ln(u) * T is exponential with mean T.
    const double u = (static_cast<double>(r >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    const double d = -std::log(u) * static_cast<double>(mean_bytes);
    return static_cast<int64_t>(d) + 1;
  }
};

}  // namespace peakline::memory

#endif  // PEAKLINE_MEMORY_BYTE_SAMPLER_H_
