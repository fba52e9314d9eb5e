"""What a stored run keeps in columns, computed once when it is pushed: the headline figures
and the heap timeline resampled to TIMELINE_BINS equal bins (each bin the highest live heap
within it, so a spike between two bins is never lost). The planner and the history pages
read only these, never the compressed profile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from peakline.model.profile import Profile

TIMELINE_BINS = 256


@dataclass(frozen=True)
class Summary:
    program: str
    started_at: str
    python_version: str
    peak_bytes: int | None
    peak_rss_bytes: int | None
    gpu_peak_bytes: int | None
    cpu_s: float
    wall_s: float
    exit_code: int | None
    timeline: dict[str, Any]  # {"bin_s": float, "bytes": [int, ...]} (empty without memory)

    def columns(self) -> dict[str, Any]:
        return {"program": self.program, "started_at": self.started_at,
                "python_version": self.python_version, "peak_bytes": self.peak_bytes,
                "peak_rss_bytes": self.peak_rss_bytes, "gpu_peak_bytes": self.gpu_peak_bytes,
                "cpu_s": self.cpu_s, "wall_s": self.wall_s, "exit_code": self.exit_code,
                "timeline_json": json.dumps(self.timeline, separators=(",", ":"))}


def summarize(profile: Profile) -> Summary:
    return Summary(
        program=profile.program, started_at=profile.started_at,
        python_version=profile.python_version, peak_bytes=profile.peak_bytes,
        peak_rss_bytes=profile.peak_rss_bytes,
        gpu_peak_bytes=profile.gpu.peak_bytes if profile.gpu else None,
        cpu_s=profile.totals.cpu_s, wall_s=profile.elapsed_s, exit_code=profile.exit_code,
        timeline=resample(profile.timeline or [], profile.elapsed_s))


def resample(points: list, elapsed_s: float, bins: int = TIMELINE_BINS) -> dict[str, Any]:
    """``[[t, bytes], ...]`` (time order) -> ``bins`` equal bins over [0, elapsed_s], each the
    highest value within it; a bin without a point holds the value before it."""
    if not points:
        return {"bin_s": 0.0, "bytes": []}
    end = max(elapsed_s, points[-1][0])
    if end <= 0:
        return {"bin_s": 0.0, "bytes": [max(int(b) for _, b in points)]}
    bin_s = end / bins
    highest: list[int | None] = [None] * bins
    last: list[int | None] = [None] * bins
    for t, value in points:
        i = min(bins - 1, int(t / bin_s))
        value = int(value)
        if highest[i] is None or value > highest[i]:
            highest[i] = value
        last[i] = value
    out = []
    carried = 0  # the live heap entering the bin: the last point before it
    for top, end_value in zip(highest, last):
        out.append(carried if top is None else max(top, carried))
        if end_value is not None:
            carried = end_value
    return {"bin_s": bin_s, "bytes": out}
