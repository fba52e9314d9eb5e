"""The lines a report points at first: who holds memory at the peak, and possible leaks.

Both read only per-line fields of the model, so the terminal and HTML reports agree.

Which peak. A line's holding is always shown against the peak it was taken at
(``peak_basis``): one process, its ``peak_bytes`` and ``live_at_peak_bytes``; a merged profile
with timelines, the measured peak of the process tree (``tree_peak_bytes``) and what each line
held then, all processes together (``live_at_tree_peak_bytes``); a merged profile without them,
each process at its own peak: ``live_at_peak_bytes`` (summed over processes) against the sum of
the processes' peaks (``peak_bytes_sum``).
"""

from __future__ import annotations

from typing import NamedTuple

from peakline.model.leaks import LEAK_REPORT_THRESHOLD
from peakline.model.profile import LineRecord, Profile
from peakline.reporters._format import human_bytes
from peakline.reporters._text import duration

HOT_PERCENT = 10.0  # a line with at least this share of sampled time is highlighted
PEAK_HOLDERS_MAX = 5
PEAK_HOLDER_MIN_SHARE = 0.05  # of the peak: smaller holders are not singled out


class PeakBasis(NamedTuple):
    """The peak that per-line holdings are shown against, and how to read a line's holding."""

    kind: str  # "process" | "tree" | "each_process"
    peak_bytes: int
    time_s: float | None  # seconds since the (parent's) start; None: no single moment
    title: str  # "the peak", "the peak of the process tree", ...
    field: str  # the LineRecord field holding a line's bytes at this peak

    def held(self, line: LineRecord) -> int:
        return getattr(line, self.field) or 0


def peak_basis(profile: Profile) -> PeakBasis | None:
    """Which peak the report's "held at the peak" figures belong to (module docstring)."""
    if not profile.has_memory:
        return None
    merged = sum(1 for p in profile.processes or () if p.merged)
    if merged > 1 and profile.tree_peak_bytes is not None:
        return PeakBasis("tree", profile.tree_peak_bytes, profile.tree_peak_time_s,
                         "the peak of the process tree", "live_at_tree_peak_bytes")
    if merged > 1 and profile.peak_bytes_sum is not None:
        return PeakBasis("each_process", profile.peak_bytes_sum, None,
                         "each process's own peak", "live_at_peak_bytes")
    when = profile.memory.peak_time_s if profile.memory is not None else None
    return PeakBasis("process", profile.peak_bytes or 0, when, "the peak", "live_at_peak_bytes")


class HeldLine(NamedTuple):
    filename: str
    line: LineRecord
    held_bytes: int  # what the line held at the basis's peak
    share: float  # of the basis's peak_bytes, 0..1


def peak_holders(profile: Profile, limit: int = PEAK_HOLDERS_MAX) -> list[HeldLine]:
    """The lines holding the most memory at the peak (each at least 5% of it), largest first."""
    basis = peak_basis(profile)
    if basis is None:
        return []
    held = [(f, line, basis.held(line)) for f, line in profile.lines() if basis.held(line) > 0]
    total = basis.peak_bytes or sum(h for _, _, h in held)
    if total <= 0:
        return []
    held.sort(key=lambda item: (-item[2], item[0], item[1].lineno))
    out = []
    for filename, line, value in held[:limit]:
        share = value / total
        if share >= PEAK_HOLDER_MIN_SHARE:
            out.append(HeldLine(filename, line, value, min(1.0, share)))
    return out


def possible_leaks(profile: Profile) -> list[tuple[str, LineRecord]]:
    """Lines with ``leak_likelihood >= LEAK_REPORT_THRESHOLD``, fastest-growing first."""
    found = [(f, line) for f, line in profile.lines()
             if (line.leak_likelihood or 0.0) >= LEAK_REPORT_THRESHOLD]
    found.sort(key=lambda item: (-(item[1].leak_rate_bytes_s or 0.0), item[0], item[1].lineno))
    return found


def blas_buffer_note(profile: Profile) -> list[str] | None:
    """The parts of one note naming the OpenBLAS work buffers counted in the memory figures."""
    m = profile.memory
    if m is None or not m.blas_buffer_bytes:
        return None
    count = m.blas_buffer_maps or 0
    what = "buffer" if count == 1 else f"buffers ({count})"
    return [f"{human_bytes(m.blas_buffer_bytes)}: OpenBLAS per-thread work {what}",
            "mapped on a thread's first BLAS call, kept until exit",
            "counted in the peak, charged to no line"]


def contention_parts(totals) -> list[str]:
    """The CPU-contention figures of a run's totals, for a totals line: run delay (runnable
    but not scheduled) when there was any, and the cgroup's CPU throttling when measured and
    non-zero. Empty when neither applies."""
    parts = []
    if totals.run_delay_s > 0:
        parts.append(f"run delay {duration(totals.run_delay_s)}")
    if totals.cgroup_throttled_s:
        periods = totals.cgroup_throttled_periods or 0
        parts.append(f"cgroup CPU quota throttled {duration(totals.cgroup_throttled_s)} "
                     f"({periods} period{'s' if periods != 1 else ''})")
    return parts


# The parts of one note each (a report joins them with its separator, wrapping between parts).
TRUNCATED_STACKS_NOTE = ["truncated stacks: deeper than 128 frames, their middle is cut",
                         "the innermost frames and the root (where your line is) are kept",
                         "so time and memory still reach your line"]


def peak_vs_rss_note(profile: Profile) -> list[str] | None:
    """One note when the heap peak exceeds the peak RSS (np.empty of 1 GiB shows a 1 GiB
    peak and almost no RSS): the two count different things."""
    peak, rss = profile.peak_bytes, profile.peak_rss_bytes
    if peak is None or rss is None or peak <= rss:
        return None
    return ["peak counts bytes allocated, with pages never touched (np.empty)",
            "peak RSS counts only the pages the kernel backed"]
