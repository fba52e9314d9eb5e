"""The lines a report points at first: who holds memory at the peak, and possible leaks.

Both read only per-line fields of the model, so the terminal and HTML reports agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from peakline.model.leaks import LEAK_REPORT_THRESHOLD
from peakline.model.profile import LineRecord, Profile

HOT_PERCENT = 10.0  # a line with at least this share of sampled time is highlighted
PEAK_HOLDERS_MAX = 5
PEAK_HOLDER_MIN_SHARE = 0.05  # of the peak: smaller holders are not singled out


@dataclass(frozen=True)
class HeldLine:
    filename: str
    line: LineRecord
    share: float  # of peak_bytes, 0..1


def peak_holders(profile: Profile, limit: int = PEAK_HOLDERS_MAX) -> list[HeldLine]:
    """The lines holding the most memory at the peak (each at least 5% of it), largest first."""
    if not profile.has_memory:
        return []
    held = [(f, line) for f, line in profile.lines() if (line.live_at_peak_bytes or 0) > 0]
    total = profile.peak_bytes or sum(line.live_at_peak_bytes for _, line in held)
    if total <= 0:
        return []
    held.sort(key=lambda item: (-item[1].live_at_peak_bytes, item[0], item[1].lineno))
    out = []
    for filename, line in held[:limit]:
        share = line.live_at_peak_bytes / total
        if share >= PEAK_HOLDER_MIN_SHARE:
            out.append(HeldLine(filename, line, min(1.0, share)))
    return out


def possible_leaks(profile: Profile) -> list[tuple[str, LineRecord]]:
    """Lines with ``leak_likelihood >= LEAK_REPORT_THRESHOLD``, fastest-growing first."""
    found = [(f, line) for f, line in profile.lines()
             if (line.leak_likelihood or 0.0) >= LEAK_REPORT_THRESHOLD]
    found.sort(key=lambda item: (-(item[1].leak_rate_bytes_s or 0.0), item[0], item[1].lineno))
    return found
