"""The profile's ``task_keys``: CPU and heap per task key prefix (docs/distributed.md, "Per
task key"), from a session's task windows (peakline.tasks) and the run's exact heap
timeline; and how merged profiles combine them.

One record per prefix, sorted by CPU (most first):

* ``tasks``, ``wall_s``, ``cpu_s``: how many tasks of the prefix ran, their windows' summed
  length, and the process CPU in those windows (shared equally between tasks that overlapped);
* ``peak_bytes``: the highest live heap of the process while a task of the prefix ran;
* ``rise_bytes``: the largest rise of the heap above its value at a task's start, during that
  task: what one task of the prefix allocated and held at most (tasks running beside it in
  other threads of the process add theirs).

Heap figures are read off the timeline as phases' are (peakline.model.phases): a task shorter
than an aggregator tick (20 ms) sees only the extremes the timeline kept.

Merged (``merge_task_keys``): per prefix, ``tasks``, ``wall_s``, ``cpu_s`` and ``processes``
(the processes that ran the prefix) add up; ``peak_bytes`` and ``rise_bytes`` are the largest
of any process.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from peakline.model.phases import _value_at
from peakline.model.records import TaskKeyRecord
from peakline.model.schema import summed

_SUMS = summed(TaskKeyRecord)
_LARGEST = ("peak_bytes", "rise_bytes")


def _sorted(rows) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (-r["cpu_s"], r["prefix"]))


def task_key_fields(tasks: Any, timeline: Sequence[Sequence[float]] | None, *,
                    shift_s: float = 0.0) -> list[dict[str, Any]]:
    """``tasks``: a peakline.tasks.TaskWindows whose times are ``shift_s`` seconds ahead of
    the timeline's clock."""
    rows = {prefix: {"prefix": prefix, "tasks": n, "wall_s": wall, "cpu_s": cpu,
                     "processes": 1}
            for prefix, (n, wall, cpu) in tasks.totals.items()}
    if timeline is not None:
        times = [p[0] for p in timeline]
        values = [int(p[1]) for p in timeline]
        for prefix, start_s, end_s in tasks.windows:
            start, end = max(0.0, start_s - shift_s), max(0.0, end_s - shift_s)
            start_bytes = _value_at(times, values, start)
            lo, hi = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
            peak = max([start_bytes, _value_at(times, values, end), *values[lo:hi]])
            row = rows[prefix]
            row["peak_bytes"] = max(row.get("peak_bytes", peak), peak)
            row["rise_bytes"] = max(row.get("rise_bytes", 0), peak - start_bytes)
    return _sorted(rows.values())


def merge_task_keys(doc: dict[str, Any], other: dict[str, Any]) -> None:
    """Adds ``other``'s task_keys (a profile document) into ``doc``'s."""
    if not other.get("task_keys"):
        return
    rows = {r["prefix"]: r for r in doc.get("task_keys", ())}
    for row in other["task_keys"]:
        into = rows.get(row["prefix"])
        if into is None:
            rows[row["prefix"]] = dict(row)
            continue
        for name in _SUMS:
            into[name] = into.get(name, 0) + row.get(name, 0)
        for name in _LARGEST:
            if name in row:
                into[name] = max(into.get(name, row[name]), row[name])
    doc["task_keys"] = _sorted(rows.values())
