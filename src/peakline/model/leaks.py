"""Leak scoring from per-line live-bytes timelines.

A line leaks when the memory it allocated and still holds keeps growing until the end of the
run. Two things must both be true:

1. *Still rising in the second half of the run*: the Mann-Kendall statistic over the line's
   timeline points (its live bytes at each change, plus the value at the end) from the
   middle of the run on says the series goes up, not just wanders. ``trend`` is the
   one-sided confidence Phi(z). A cache that grew early and then plateaus only wanders there.
2. *By more than sampling noise*: the growth over the second half exceeds both 5% of what the
   line holds at the end and 3 standard deviations of the estimate. Per-line bytes are sums
   of Horvitz-Thompson weights; the variance of what the line holds at the end is estimated
   from its own samples (the profile's ``net_variance``: ~T x bytes for small objects, ~0 for
   blocks much larger than the sampling interval T, which are counted exactly). What a
   leaking line adds in the second half is a part of what it holds at the end, so its
   variance is at most that. Without the estimate (a profile written before it) the noise
   floor is the small-object bound, 3 * sqrt(T * final bytes), which hides the slow growth
   of a line of large blocks (20 MB of 200 MB of 2 MiB buffers at T = 512 KiB). Memory
   freed soon after it is allocated holds ~nothing at the end and fails this too.

``leak_likelihood`` = trend when (2) holds, else 0; ``leak_rate_bytes_s`` is the least-squares
slope of live bytes over the second half of the run (0 when not leaking). Lines are flagged in
reports at likelihood >= LEAK_REPORT_THRESHOLD.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

LEAK_REPORT_THRESHOLD = 0.95
MIN_POINTS = 4
RECENT_GROWTH_SHARE = 0.05


def _mann_kendall_confidence(values: Sequence[float]) -> float:
    n = len(values)
    s = 0
    for i in range(n - 1):
        vi = values[i]
        for j in range(i + 1, n):
            d = values[j] - vi
            s += (d > 0) - (d < 0)
    var = n * (n - 1) * (2 * n + 5) / 18.0
    if var <= 0 or s <= 0:
        return 0.0
    z = (s - 1) / math.sqrt(var)
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _value_at(points: Sequence[tuple[float, float]], t: float) -> float:
    value = 0.0
    for pt, pv in points:
        if pt > t:
            break
        value = pv
    return value


def _slope(points: Sequence[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(p[0] for p in points) / n
    mv = sum(p[1] for p in points) / n
    den = sum((p[0] - mt) ** 2 for p in points)
    if den <= 0:
        return 0.0
    return sum((p[0] - mt) * (p[1] - mv) for p in points) / den


def score(timeline: Sequence[Sequence[float]], end_s: float,
          sampling_interval_bytes: float = 0.0,
          final_variance: float | None = None) -> tuple[float, float]:
    """(leak_likelihood, leak_rate_bytes_s) of one line's ``[[t_s, live_bytes], ...]``;
    final_variance: the estimated variance of its live bytes at the end (bytes^2), None if
    not known."""
    points = [(float(t), float(v)) for t, v in timeline]
    if not points:
        return 0.0, 0.0
    if points[-1][0] < end_s:
        points.append((end_s, points[-1][1]))
    final = points[-1][1]
    if len(points) < MIN_POINTS or final <= 0:
        return 0.0, 0.0
    start = points[0][0]
    mid = start + (end_s - start) / 2
    recent_growth = final - _value_at(points, mid)
    if final_variance is None:
        final_variance = max(sampling_interval_bytes, 0.0) * final
    noise = 3.0 * math.sqrt(max(final_variance, 0.0))
    if recent_growth < max(RECENT_GROWTH_SHARE * final, noise):
        return 0.0, 0.0
    second_half = [(mid, _value_at(points, mid))] + [p for p in points if p[0] > mid]
    if len(second_half) < MIN_POINTS:
        return 0.0, 0.0
    likelihood = _mann_kendall_confidence([v for _, v in second_half])
    rate = max(0.0, _slope(second_half)) if likelihood > 0 else 0.0
    return likelihood, rate
