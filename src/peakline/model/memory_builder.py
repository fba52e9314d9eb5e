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

_NS_PER_S = 1_000_000_000
MEMORY_LINE_FIELDS = ("alloc_python_bytes", "alloc_native_bytes", "free_bytes", "live_bytes",
                      "live_at_peak_bytes", "copy_bytes")


# The import machinery's own files: a stack through one of them was importing a module.
_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_IMPORT_SUFFIXES = ("importlib/_bootstrap.py", "importlib/_bootstrap_external.py")


def is_import_machinery(filename: str) -> bool:
    return filename in _IMPORT_FILES or filename.endswith(_IMPORT_SUFFIXES)


class MemoryTables:
    """Per (file, lineno) and per (file, qualname, first_lineno) memory sums, plus per line
    what was allocated while a module was being imported."""

    def __init__(self) -> None:
        self.lines: dict[str, dict[int, list[int]]] = {}
        self.functions: dict[str, dict[tuple[str, int], list[int]]] = {}
        self.import_net: dict[str, dict[int, int]] = {}
        self.unattributed_alloc_bytes = 0

    def add(self, frame: tuple[str, str, int, int] | None, values: Sequence[int], *,
            importing: bool = False) -> None:
        if frame is None:
            self.unattributed_alloc_bytes += values[0] + values[1]
            return
        filename, qualname, first_lineno, lineno = frame
        if importing:
            per_file = self.import_net.setdefault(filename, {})
            per_file[lineno] = per_file.get(lineno, 0) + values[0] + values[1] - values[2]
        for table, key in ((self.lines.setdefault(filename, {}), lineno),
                           (self.functions.setdefault(filename, {}), (qualname, first_lineno))):
            acc = table.setdefault(key, [0] * len(MEMORY_LINE_FIELDS))
            for i, v in enumerate(values):
                acc[i] += v


def record_fields(acc: Sequence[int], *, elapsed_s: float, with_copy_rate: bool) -> dict[str, Any]:
    py, native, freed, live, at_peak, copy = acc
    out = {"alloc_python_bytes": py, "alloc_native_bytes": native, "free_bytes": freed,
           "net_bytes": py + native - freed, "live_at_peak_bytes": at_peak, "copy_bytes": copy}
    if with_copy_rate:
        out["copy_mb_s"] = copy / 1e6 / elapsed_s if elapsed_s > 0 else 0.0
    return out


def line_timelines(raw_memory: Mapping[str, Any]) -> dict[tuple[str, int], list[list[float]]]:
    out = {}
    for filename, lineno, _live, _at_peak, points in raw_memory.get("lines", ()):
        out[(filename, max(0, lineno))] = [[t / _NS_PER_S, b] for t, b in points]
    return out


def run_fields(raw_memory: Mapping[str, Any], *, elapsed_s: float, peak_rss_bytes: int | None,
               unattributed_alloc_bytes: int,
               start_monotonic_ns: int | None = None) -> dict[str, Any]:
    stats = raw_memory.get("stats", {})
    timeline = [[t / _NS_PER_S, b] for t, b in raw_memory.get("timeline", ())]
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
        "sampling_interval_bytes": stats.get("sampling_interval_bytes", 0),
        "copy_sampling_interval_bytes": stats.get("copy_sampling_interval_bytes", 0),
        "peak_time_s": stats.get("peak_time_ns", 0) / _NS_PER_S,
        "live_end_bytes": stats.get("live_end_bytes", 0),
        "growth_rate_bytes_s": growth,
        "alloc_samples": stats.get("alloc_samples", 0),
        "free_samples": stats.get("free_samples", 0),
        "copy_samples": stats.get("copy_samples", 0),
        "not_sampled_events": stats.get("dropped_events", 0) + stats.get("untracked_samples", 0),
        "unattributed_alloc_bytes": unattributed_alloc_bytes,
        "staged_events": stats.get("staged_events", 0),
    }
    if start_monotonic_ns:
        memory["start_monotonic_s"] = start_monotonic_ns / _NS_PER_S
    for name in ("blas_buffer_bytes", "blas_buffer_maps"):
        if name in stats:
            memory[name] = stats[name]
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
    likelihood, rate = leaks.score(timeline, elapsed_s, sampling_interval_bytes)
    out.update(leak_likelihood=round(likelihood, 6), leak_rate_bytes_s=rate)
    return out
