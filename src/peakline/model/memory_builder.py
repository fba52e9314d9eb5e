"""Memory part of the profile: from the core's ``raw["memory"]`` to per-line, per-function and
run-wide fields (docs/profile-format.md, "Memory").

Attribution is the CPU rule: each stack's memory goes to its innermost reported frame. Frees
are charged to the stack that allocated the block (the core does that), so a line's
``net_bytes`` = allocated - freed = what it still holds at the end, and ``live_at_peak_bytes``
is what it held when the heap reached its peak. Numbers per line are sampled estimates
(unbiased; allocations much larger than the sampling interval are counted exactly); the
run-wide ``peak_bytes`` and ``timeline`` are exact counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from peakline.model import leaks
from peakline.model.raw import MEMORY_STATS, Frame, MemoryLine, MemoryStack, TimePoint
from peakline.model.records import Memory
from peakline.model.schema import carried

_NS_PER_S = 1_000_000_000
_ZERO = MemoryStack(*[0] * len(MemoryStack._fields))


# The import machinery's own files: a stack through one of them was importing a module.
_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_IMPORT_SUFFIXES = ("importlib/_bootstrap.py", "importlib/_bootstrap_external.py")


def is_import_machinery(filename: str) -> bool:
    return filename in _IMPORT_FILES or filename.endswith(_IMPORT_SUFFIXES)


class MemoryTables:
    """Per (file, lineno) and per (file, qualname, first_lineno) memory sums (MemoryStack rows
    added up field by field), plus per line what was allocated while a module was being
    imported."""

    def __init__(self) -> None:
        self.lines: dict[str, dict[int, list[int]]] = {}
        self.functions: dict[str, dict[tuple[str, int], list[int]]] = {}
        self.import_net: dict[str, dict[int, int]] = {}
        self.unattributed_alloc_bytes = 0

    def add(self, frame: Frame | None, stack: MemoryStack, *, importing: bool = False) -> None:
        alloc = stack.alloc_python_bytes + stack.alloc_native_bytes
        if frame is None:
            self.unattributed_alloc_bytes += alloc
            return
        if importing:
            per_file = self.import_net.setdefault(frame.file, {})
            per_file[frame.lineno] = per_file.get(frame.lineno, 0) + alloc - stack.free_bytes
        for table, key in ((self.lines.setdefault(frame.file, {}), frame.lineno),
                           (self.functions.setdefault(frame.file, {}),
                            (frame.function, frame.first_lineno))):
            acc = table.setdefault(key, [0] * len(stack))
            for i, v in enumerate(stack):
                acc[i] += v


def record_fields(acc: Sequence[int] | None, *, elapsed_s: float,
                  with_copy_rate: bool) -> dict[str, Any]:
    """A line's or function's memory fields from its summed MemoryStack (None: nothing)."""
    m = _ZERO if acc is None else MemoryStack(*acc)
    out = {"alloc_python_bytes": m.alloc_python_bytes, "alloc_native_bytes": m.alloc_native_bytes,
           "free_bytes": m.free_bytes,
           "net_bytes": m.alloc_python_bytes + m.alloc_native_bytes - m.free_bytes,
           "live_at_peak_bytes": m.live_at_peak_bytes,
           "live_at_peak_variance": round(m.live_at_peak_variance),
           "net_variance": round(m.live_variance), "copy_bytes": m.copy_bytes}
    if with_copy_rate:
        out["copy_mb_s"] = m.copy_bytes / 1e6 / elapsed_s if elapsed_s > 0 else 0.0
    return out


def _seconds_points(points: Sequence[Any]) -> list[list[float]]:
    """TimePoint rows as the file's [[seconds, bytes], ...]."""
    return [[p.t_ns / _NS_PER_S, p.bytes] for p in (TimePoint(*point) for point in points)]


def line_timelines(raw_memory: Mapping[str, Any]) -> dict[tuple[str, int], list[list[float]]]:
    out = {}
    for row in raw_memory.get("lines", ()):
        line = MemoryLine(*row)
        out[(line.file, max(0, line.lineno))] = _seconds_points(line.timeline)
    return out


def run_fields(raw_memory: Mapping[str, Any], *, elapsed_s: float, peak_rss_bytes: int | None,
               unattributed_alloc_bytes: int,
               start_monotonic_ns: int | None = None) -> dict[str, Any]:
    stats = raw_memory.get("stats", {})
    timeline = _seconds_points(raw_memory.get("timeline", ()))
    if elapsed_s > 0 and (not timeline or timeline[-1][0] < elapsed_s):
        timeline.append([elapsed_s, stats.get("live_end_bytes", 0)])
    timeline = _monotonic_times(timeline)
    growth = 0.0
    if len(timeline) >= 2 and timeline[-1][0] > 0:
        # Average growth over the run's second half: what a long-running service would see.
        half = timeline[-1][0] / 2
        start = next((p for p in timeline if p[0] >= half), timeline[0])
        if timeline[-1][0] > start[0]:
            growth = (timeline[-1][1] - start[1]) / (timeline[-1][0] - start[0])
    memory = {
        **carried(Memory, stats, MEMORY_STATS),
        "peak_time_s": stats.get("peak_time_ns", 0) / _NS_PER_S,
        "growth_rate_bytes_s": growth,
        "not_sampled_events": stats.get("dropped_events", 0) + stats.get("untracked_samples", 0),
        "unattributed_alloc_bytes": unattributed_alloc_bytes,
    }
    if start_monotonic_ns:
        memory["start_monotonic_s"] = start_monotonic_ns / _NS_PER_S
    out: dict[str, Any] = {"peak_bytes": stats.get("peak_bytes", 0), "timeline": timeline,
                           "memory": memory}
    if peak_rss_bytes is not None:
        out["peak_rss_bytes"] = peak_rss_bytes
    return out


def _monotonic_times(points: list[list[float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for t, b in points:
        t = max(0.0, t)
        if out and t < out[-1][0]:
            t = out[-1][0]
        out.append([t, int(b)])
    return out


def leak_fields(timeline: list[list[float]], elapsed_s: float,
                sampling_interval_bytes: int, *, net_bytes: int = 0,
                net_variance: float | None = None,
                import_net_bytes: int = 0) -> dict[str, Any]:
    """Leak scoring of one line. Memory a line holds because it imported a module (module
    objects, their code, caches filled at import) is not a leak, however the line's bytes grew:
    a line whose net bytes were mostly (at least half) allocated under the import machinery
    scores 0. The trend test alone would flag it: a short script spends much of its second
    half importing."""
    out = {"timeline": _monotonic_times(timeline)}
    if import_net_bytes:
        out["import_net_bytes"] = import_net_bytes
    if net_bytes > 0 and 2 * import_net_bytes >= net_bytes:
        out.update(leak_likelihood=0.0, leak_rate_bytes_s=0.0)
        return out
    likelihood, rate = leaks.score(timeline, elapsed_s, sampling_interval_bytes,
                                   final_variance=net_variance)
    out.update(leak_likelihood=round(likelihood, 6), leak_rate_bytes_s=rate)
    return out
