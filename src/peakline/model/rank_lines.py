"""The profile's ``rank_lines``: each line's figures per torch.distributed rank, in a merged
profile of ranks (docs/distributed.md, "Per rank, per line").

Merged lines add the ranks' figures up; ranks do the same work on different data, so where
one rank is slow or holds more, the sum hides it. ``rank_lines`` keeps, for every line that a
rank charged CPU or held memory at its peak, each rank's own ``cpu_s`` (CPU categories
summed) and ``live_at_peak_bytes`` (what the line held at that rank's own peak). Lines are
ordered by their summed CPU, most first, and at most ``MAX_LINES`` are kept (a profile's
size stays bounded however many lines the ranks ran).

Sources: a profile that has ``rank_lines`` (merged already: ``peakline merge`` of merged
inputs) contributes them; else one with its own ``rank`` contributes its lines. Present when
at least two ranks contributed. A merged input's lines beyond its ``MAX_LINES`` are lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from peakline.model.profile import Profile

MAX_LINES = 200


def _own_lines(profile: Profile) -> Iterable[tuple[str, int, dict[str, Any]]]:
    for filename, line in profile.lines():
        cpu = line.cpu_python_s + line.cpu_native_s + line.cpu_system_s
        held = line.live_at_peak_bytes
        if cpu <= 0 and not held:
            continue
        figures: dict[str, Any] = {"rank": profile.rank, "cpu_s": cpu}
        if held is not None:
            figures["live_at_peak_bytes"] = held
        yield filename, line.lineno, figures


def rank_lines(profiles: Iterable[Profile]) -> list[dict[str, Any]] | None:
    """The ``rank_lines`` of the merge of ``profiles`` (None with fewer than two ranks)."""
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    ranks: set[int] = set()
    for profile in profiles:
        if profile.rank_lines:  # merged already (and keeps its first rank's ``rank``)
            for record in profile.rank_lines:
                for figures in record.ranks:
                    ranks.add(figures.rank)
                    rows.setdefault((record.file, record.lineno), []).append(figures.to_dict())
        elif profile.rank is not None:
            ranks.add(profile.rank)
            for filename, lineno, figures in _own_lines(profile):
                rows.setdefault((filename, lineno), []).append(figures)
    if len(ranks) < 2:
        return None
    ordered = sorted(rows.items(), key=lambda kv: (-sum(f["cpu_s"] for f in kv[1]), kv[0]))
    return [{"file": f, "lineno": n, "ranks": sorted(figures, key=lambda x: x["rank"])}
            for (f, n), figures in ordered[:MAX_LINES]]
