// ByteSampler: the statistics that per-line memory attribution rests on.
//
// The model under test (memory/byte_sampler.h): NextDistance returns D = floor(E) + 1 with E
// exponential of mean T, so D is geometric on {1, 2, ...}: P(D <= k) = 1 - exp(-k/T), exactly.
// Record() puts the sampling point on the D-th byte of the stream and, after a hit, draws a
// fresh distance from the end of the event. The geometric distribution is memoryless, so each
// event of s bytes is sampled independently with probability exactly p(s) = 1 - exp(-s/T), and
// Weight(s) = round(s / p(s)) makes the sum of weights an unbiased estimate of the bytes (up to
// that rounding, at most p/2 per event, which the tolerances include).
//
// False-failure odds. Every stochastic assertion below says how likely it is to fail for a
// correct sampler and a seed drawn at random. Most use bounds that hold for every n, not
// asymptotic approximations: the Dvoretzky-Kiefer-Wolfowitz-Massart inequality for
// distributions, Chernoff bounds for the mean of exponentials, Bernstein's inequality for sums
// of bounded independent terms; the tolerance is computed from the target odds (kDelta) and
// the exact variance, so the odds hold whatever the parameters. The two that rely on the
// normal / chi-square limit say so. The seeds are fixed, so a run is reproducible; the odds
// are those of a fresh seed, and each test's comment gives its total over all its seeds.
#include "memory/byte_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace peakline::memory {
namespace {

constexpr uint64_t kSeeds[] = {0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL, 42};
constexpr double kDelta = 1e-8;  // target false-failure odds of one stochastic assertion

// Bernstein: for a sum S of independent zero-mean terms with |X_i| <= M and total variance
// var, P(|S| >= t) <= 2 exp(-t^2 / (2 (var + M t / 3))). Returns the t at which that is delta.
double BernsteinTolerance(double var, double max_abs, double delta) {
  const double l = std::log(2.0 / delta);
  const double a = max_abs * l / 3.0;
  return a + std::sqrt(a * a + 2.0 * var * l);
}

// P(D <= k) for the geometric distance of mean ~T.
double DistanceCdf(double k, double mean_bytes) { return -std::expm1(-k / mean_bytes); }

double SampleProbability(int64_t bytes, int64_t mean_bytes) {
  return -std::expm1(-static_cast<double>(bytes) / static_cast<double>(mean_bytes));
}

// Largest deviation between the empirical CDF of `d` (sorted in place) and the exact CDF.
double KsDistance(std::vector<int64_t>& d, double mean_bytes) {
  std::sort(d.begin(), d.end());
  const double n = static_cast<double>(d.size());
  double worst = 0;
  for (size_t i = 0; i < d.size();) {
    size_t j = i;
    while (j < d.size() && d[j] == d[i]) ++j;
    const double k = static_cast<double>(d[i]);
    // Just below the jump at k and at k: P(D < k) = P(D <= k-1).
    worst = std::max(worst, std::fabs(DistanceCdf(k - 1, mean_bytes) - static_cast<double>(i) / n));
    worst = std::max(worst, std::fabs(DistanceCdf(k, mean_bytes) - static_cast<double>(j) / n));
    i = j;
  }
  return worst;
}

// DKW-Massart: P(sup |F_n - F| > eps) <= 2 exp(-2 n eps^2), for any distribution and any n.
double DkwTolerance(size_t n, double delta) {
  return std::sqrt(std::log(2.0 / delta) / (2.0 * static_cast<double>(n)));
}

// ---- (a) distances between sampling points ---------------------------------------------------

// NextDistance at the default interval. Per seed: the mean (Chernoff, < 2 * kDelta) and the
// distribution (DKW, kDelta); 3 seeds: < 1e-7 in all.
TEST(ByteSamplerTest, DistanceIsExponentialWithMeanT) {
  constexpr int64_t kT = 512 * 1024;
  constexpr size_t kN = 1000000;
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(seed);
    ByteSampler s{};
    s.Init(seed, kT);
    std::vector<int64_t> d(kN);
    double sum = 0;
    for (auto& x : d) {
      x = s.NextDistance(kT);
      ASSERT_GE(x, 1);
      sum += static_cast<double>(x);
    }
    // Mean. D - E is in (0, 1], so |mean(D) - T| <= |mean(E) - T| + 1. mean(E)/T is a
    // Gamma(N, 1)/N variable; Chernoff: P(mean/T >= 1 + e) <= exp(-N (e - ln(1 + e))) and
    // P(mean/T <= 1 - e) <= exp(-N (-e - ln(1 - e))). e is chosen so that both are < kDelta.
    const double e = 0.0065;
    const double upper = std::exp(-static_cast<double>(kN) * (e - std::log1p(e)));
    const double lower = std::exp(-static_cast<double>(kN) * (-e - std::log1p(-e)));
    ASSERT_LT(upper + lower, 2 * kDelta) << "test design: tolerance too tight for N";
    const double mean = sum / kN;
    EXPECT_NEAR(mean, static_cast<double>(kT), e * kT + 1.0);

    // Distribution: the largest CDF deviation against P(D <= k) = 1 - exp(-k/T).
    EXPECT_LT(KsDistance(d, kT), DkwTolerance(kN, kDelta));
  }
}

// Consecutive distances are independent: lag-1 correlation. sqrt(N) r is asymptotically
// standard normal; |r| < 6/sqrt(N) fails with odds ~2e-9 per seed (normal limit, N = 1e6).
TEST(ByteSamplerTest, ConsecutiveDistancesAreUncorrelated) {
  constexpr int64_t kT = 512 * 1024;
  constexpr size_t kN = 1000000;
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(seed);
    ByteSampler s{};
    s.Init(seed, kT);
    std::vector<double> d(kN + 1);
    for (auto& x : d) x = static_cast<double>(s.NextDistance(kT));
    double mean = 0;
    for (double x : d) mean += x;
    mean /= static_cast<double>(d.size());
    double cov = 0, var = 0;
    for (size_t i = 0; i < kN; ++i) {
      cov += (d[i] - mean) * (d[i + 1] - mean);
      var += (d[i] - mean) * (d[i] - mean);
    }
    EXPECT_LT(std::fabs(cov / var), 6.0 / std::sqrt(static_cast<double>(kN)));
  }
}

// Through Record(), with a stream of 1-byte events: the number of events from one sampling
// point to the next is the distance D itself, so the hot path places points as the model says.
// A small T makes the discreteness visible: the check compares against the exact geometric
// law. Per seed: DKW (kDelta) and a chi-square test over 61 bins (expected counts >= 1400;
// threshold from the Wilson-Hilferty approximation at z = 6, odds ~1e-9 in the chi-square
// limit); 3 seeds: < 1e-7.
TEST(ByteSamplerTest, RecordPlacesPointsAtGeometricDistances) {
  constexpr int64_t kT = 16;
  constexpr size_t kN = 1000000;
  constexpr int kBins = 60;  // D = 1..60, then D > 60
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(seed);
    ByteSampler s{};
    s.Init(seed, kT);
    std::vector<int64_t> d;
    d.reserve(kN);
    int64_t since = 0;
    while (d.size() < kN) {
      ++since;
      if (s.Record(1, kT)) {
        d.push_back(since);
        since = 0;
      }
    }
    std::vector<double> observed(kBins + 1, 0.0);
    for (int64_t x : d) observed[std::min<int64_t>(x, kBins + 1) - 1] += 1;
    double chi2 = 0;
    for (int k = 1; k <= kBins + 1; ++k) {
      const double p = k <= kBins ? DistanceCdf(k, kT) - DistanceCdf(k - 1, kT)
                                  : 1.0 - DistanceCdf(kBins, kT);
      const double expected = p * kN;
      ASSERT_GT(expected, 1000) << "test design: a bin is too thin for the chi-square limit";
      chi2 += (observed[k - 1] - expected) * (observed[k - 1] - expected) / expected;
    }
    const double df = kBins;  // kBins + 1 bins, nothing fitted
    const double z = 6.0;
    const double c = 2.0 / (9.0 * df);
    const double threshold = df * std::pow(1.0 - c + z * std::sqrt(c), 3);
    EXPECT_LT(chi2, threshold);
    EXPECT_LT(KsDistance(d, kT), DkwTolerance(kN, kDelta));
  }
}

// ---- (b) unbiasedness for fixed-size streams -------------------------------------------------

struct StreamResult {
  double estimate;  // sum of Weight over sampled events
  int64_t sampled;
};

StreamResult RunFixedStream(uint64_t seed, int64_t size, int64_t mean_bytes, int64_t n) {
  ByteSampler s{};
  s.Init(seed, mean_bytes);
  StreamResult r{0, 0};
  const int64_t w = ByteSampler::Weight(size, mean_bytes);
  for (int64_t i = 0; i < n; ++i) {
    if (s.Record(size, mean_bytes)) {
      r.estimate += static_cast<double>(w);
      ++r.sampled;
    }
  }
  return r;
}

// Sizes from s << T to s >> T. The estimate is W * K, K ~ Binomial(n, p): Bernstein with
// var = n W^2 p (1 - p), |X_i| <= W. Odds per (size, seed): kDelta for the estimate; the
// sampled count is checked with the same bound (kDelta); 4 sizes x 3 seeds: < 3e-7 in all.
TEST(ByteSamplerTest, FixedSizeStreamsAreEstimatedWithoutBias) {
  constexpr int64_t kT = 4096;
  struct Case {
    int64_t size;
    int64_t events;
  };
  const Case cases[] = {{8, 20000000}, {256, 1000000}, {kT, 100000}, {16 * kT, 100000}};
  for (uint64_t seed : kSeeds) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " size " << c.size);
      const double p = SampleProbability(c.size, kT);
      const double w = static_cast<double>(ByteSampler::Weight(c.size, kT));
      const double n = static_cast<double>(c.events);
      const StreamResult r = RunFixedStream(seed, c.size, kT, c.events);

      const double count_tol = BernsteinTolerance(n * p * (1 - p), 1.0, kDelta);
      EXPECT_NEAR(static_cast<double>(r.sampled), n * p, count_tol);

      const double truth = n * static_cast<double>(c.size);
      const double rounding = n * p * 0.5 + 1;  // |p W - s| <= p / 2 per event
      const double tol = BernsteinTolerance(n * w * w * p * (1 - p), w, kDelta) + rounding;
      EXPECT_NEAR(r.estimate, truth, tol);
      // The check is meaningful: the tolerance is a few percent of the truth at most.
      EXPECT_LT(tol, 0.05 * truth);
    }
  }
}

// ---- (c) large events ------------------------------------------------------------------------

// Events of 30 T: every one is sampled unless some event misses, odds n exp(-30) ~ 1e-8 per
// seed (3e-8 in all); the weight is the size itself.
TEST(ByteSamplerTest, LargeEventsAreSampledWithWeightEqualToSize) {
  constexpr int64_t kT = 512 * 1024;
  constexpr int64_t kSize = 30 * kT;
  constexpr int64_t kN = 100000;
  EXPECT_EQ(ByteSampler::Weight(kSize, kT), kSize);
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(seed);
    const StreamResult r = RunFixedStream(seed, kSize, kT, kN);
    EXPECT_EQ(r.sampled, kN);
    EXPECT_EQ(r.estimate, static_cast<double>(kN) * kSize);
  }
  // A 200 MB array is counted to the byte; a 100 MB one at the default interval too.
  EXPECT_EQ(ByteSampler::Weight(200'000'000, kT), 200'000'000);
  EXPECT_EQ(ByteSampler::Weight(100 << 20, kT), 100 << 20);
  // Max int64: stays finite and exact.
  EXPECT_EQ(ByteSampler::Weight(INT64_C(1) << 62, kT), INT64_C(1) << 62);
}

// Deterministic properties of the weight: W(s) = round(s / (1 - exp(-s/T))) is >= s, close to
// T + s/2 for s << T, within s exp(-s/T) of s for s >> T, and non-decreasing.
TEST(ByteSamplerTest, WeightMatchesHorvitzThompson) {
  for (int64_t t : {int64_t{1}, int64_t{4096}, int64_t{512 * 1024}, int64_t{2 << 20}}) {
    SCOPED_TRACE(t);
    int64_t previous = 0;
    for (int64_t s = 1; s <= 64 * t && s > 0; s = s < 64 ? s + 1 : s + s / 7) {
      const int64_t w = ByteSampler::Weight(s, t);
      const double exact = static_cast<double>(s) / SampleProbability(s, t);
      EXPECT_LE(std::fabs(static_cast<double>(w) - exact), 0.5 + 1e-9 * exact) << "s=" << s;
      EXPECT_GE(w, s);
      EXPECT_GE(w, previous) << "s=" << s;
      previous = w;
      if (s * 1000 <= t) {
        EXPECT_NEAR(static_cast<double>(w), static_cast<double>(t) + s / 2.0, 1.0 + 1e-3 * s);
      }
      if (s >= 10 * t) {
        EXPECT_LE(static_cast<double>(w - s),
                  static_cast<double>(s) * std::exp(-static_cast<double>(s) / t) * 1.01 + 1);
      }
    }
  }
  EXPECT_EQ(ByteSampler::Weight(0, 4096), 0);
}

// ---- (d) mixed-size streams ------------------------------------------------------------------

// Sizes log-uniform from 1 byte to 64 T, shuffled (a realistic mix of small objects and
// large buffers). Conditioned on the sizes, the events are independent: Bernstein with the
// exact variance sum(W_i^2 p_i (1 - p_i)) and M = max W_i. Checked for the whole stream and for
// each size class separately (what a line that allocates only one kind of object sees).
// Per seed: 1 + 6 assertions at kDelta; 3 seeds: < 3e-7 in all.
TEST(ByteSamplerTest, MixedSizeStreamsAreEstimatedWithoutBiasPerClass) {
  constexpr int64_t kT = 64 * 1024;
  constexpr int64_t kN = 1000000;
  constexpr int kClasses = 6;  // by size: [1, 4 KiB), [4, 16 KiB), ..., [1, 4 MiB]
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(seed);
    std::mt19937_64 sizes_rng(seed ^ 0x5DEECE66DULL);
    std::uniform_real_distribution<double> log_size(0.0, std::log(64.0 * kT));
    ByteSampler s{};
    s.Init(seed, kT);
    struct Acc {
      double truth = 0, estimate = 0, var = 0, max_w = 0, rounding = 1;
    };
    Acc all;
    Acc cls[kClasses];
    for (int64_t i = 0; i < kN; ++i) {
      const int64_t size = std::max<int64_t>(1, static_cast<int64_t>(std::exp(log_size(sizes_rng))));
      const double p = SampleProbability(size, kT);
      const double w = static_cast<double>(ByteSampler::Weight(size, kT));
      const bool hit = s.Record(size, kT);
      int c = 0;
      for (int64_t lim = 4096; size >= lim && c < kClasses - 1; lim *= 4) ++c;
      for (Acc* a : {&all, &cls[c]}) {
        a->truth += static_cast<double>(size);
        if (hit) a->estimate += w;
        a->var += w * w * p * (1 - p);
        a->max_w = std::max(a->max_w, w);
        a->rounding += 0.5 * p;
      }
    }
    auto check = [](const Acc& a, const char* what) {
      const double tol = BernsteinTolerance(a.var, a.max_w, kDelta) + a.rounding;
      EXPECT_NEAR(a.estimate, a.truth, tol) << what;
      return tol / a.truth;
    };
    EXPECT_LT(check(all, "all sizes"), 0.02);  // and the check is tight: within 2%
    for (int c = 0; c < kClasses; ++c) {
      SCOPED_TRACE(testing::Message() << "class " << c);
      ASSERT_GT(cls[c].truth, 0);
      check(cls[c], "one size class");
    }
  }
}

// The sampler keeps its state across changes of the stream's make-up: alternating tiny and
// huge events does not bias the small ones (the remaining countdown after a large event is a
// fresh distance). Bernstein per seed at kDelta on the small events' estimate; 3e-8 in all.
TEST(ByteSamplerTest, LargeEventsDoNotBiasInterleavedSmallOnes) {
  constexpr int64_t kT = 4096;
  constexpr int64_t kSmall = 64, kLarge = 40 * kT;
  constexpr int64_t kPairs = 500000;
  const double p = SampleProbability(kSmall, kT);
  const double w = static_cast<double>(ByteSampler::Weight(kSmall, kT));
  for (uint64_t seed : kSeeds) {
    SCOPED_TRACE(seed);
    ByteSampler s{};
    s.Init(seed, kT);
    double small_estimate = 0;
    int64_t large_hits = 0;
    for (int64_t i = 0; i < kPairs; ++i) {
      if (s.Record(kSmall, kT)) small_estimate += w;
      if (s.Record(kLarge, kT)) ++large_hits;
    }
    const double n = kPairs;
    const double tol = BernsteinTolerance(n * w * w * p * (1 - p), w, kDelta) + n * p * 0.5 + 1;
    EXPECT_NEAR(small_estimate, n * kSmall, tol);
    EXPECT_EQ(large_hits, kPairs);  // misses: odds n exp(-40) ~ 2e-12
  }
}

}  // namespace
}  // namespace peakline::memory
