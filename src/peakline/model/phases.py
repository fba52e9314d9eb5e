"""Named phases (``peakline.phase("fit")``): from the session's phase intervals and the run's
exact heap timeline to the profile's top-level ``phases`` list (docs/api.md, "Phases").

Each phase's heap figures are read off the run-wide ``timeline`` ([[s, bytes]], exact live
bytes; between two aggregator ticks it keeps the window's extremes with their times), so:

* ``start_bytes`` / ``end_bytes``: live heap at the phase's start / end (the timeline's step
  value at that time);
* ``peak_bytes``: the highest live heap at any time inside the phase (at least
  ``max(start_bytes, end_bytes)``);
* ``net_bytes`` = ``end_bytes - start_bytes``: what the phase left allocated.

A phase shorter than one aggregator tick (20 ms) can only see extremes the timeline kept;
the heap's own peak is never lost (it is a timeline point), so ``peak_bytes`` of the phase
that holds the run's peak equals the run's ``peak_bytes``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any


def _value_at(times: Sequence[float], values: Sequence[int], t: float) -> int:
    """The step function's value at time t (the last point at or before t; 0 before any)."""
    i = bisect.bisect_right(times, t) - 1
    return values[i] if i >= 0 else 0


def phase_fields(phases: Sequence[Any], timeline: Sequence[Sequence[float]] | None, *,
                 shift_s: float = 0.0) -> list[dict[str, Any]]:
    """``phases``: objects with name, depth, start_s, end_s, cpu_s (session.PhaseRecord),
    whose times are ``shift_s`` seconds ahead of the timeline's clock (subtracted here)."""
    times = [p[0] for p in timeline or ()]
    values = [int(p[1]) for p in timeline or ()]
    out = []
    for phase in phases:
        start = max(0.0, float(phase.start_s) - shift_s)
        end = max(start, float(phase.end_s if phase.end_s is not None else phase.start_s)
                  - shift_s)
        record: dict[str, Any] = {"name": phase.name, "depth": int(phase.depth),
                                  "start_s": start, "end_s": max(start, end),
                                  "cpu_s": float(phase.cpu_s or 0.0)}
        if timeline is not None:
            start_bytes = _value_at(times, values, start)
            end_bytes = _value_at(times, values, end)
            lo = bisect.bisect_right(times, start)
            hi = bisect.bisect_right(times, end)
            peak = max([start_bytes, end_bytes, *values[lo:hi]])
            record.update(start_bytes=start_bytes, end_bytes=end_bytes,
                          net_bytes=end_bytes - start_bytes, peak_bytes=peak)
        out.append(record)
    return out
