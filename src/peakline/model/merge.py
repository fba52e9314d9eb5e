"""Merge the profiles of a program's processes (the parent and its profiled children) into one
Profile: the parent's report then shows the work of every process on the lines that did it.

Rules (docs/processes.md, "Merged profiles"):

* The result is the parent's profile (its program, argv, pid, exit code, elapsed time,
  threads' names, options) with the children's measurements added.
* Per line and per function: times, sample counts and byte counts are **summed** over
  processes; ``copy_mb_s`` is recomputed from the summed ``copy_bytes`` over the parent's
  elapsed time; leak fields and per-line timelines are the parent's when it has the line,
  else those of the first child that has it (times in a child's timeline are relative to that
  child's start). Each line and function gets ``processes``: how many processes charged it.
* ``totals``, ``sampling`` and the memory counters are summed (``totals.cgroup_throttled_*``
  stay the parent's: the cgroup's figures, shared by its processes); ``threads`` and ``stacks``
  are concatenated (frames re-indexed). Each thread gets ``pid`` (its process) and its name
  says which process it belongs to, ``"MainThread (pid 4243)"``: every process has a
  MainThread.
* Peaks. ``peak_bytes`` is the **largest single-process peak**; ``processes[].peak_bytes``
  gives each one's own peak and ``peak_bytes_sum`` the sum of all of them (what the processes
  would hold if their peaks coincided). ``tree_peak_bytes`` is the *measured* peak of the
  process tree: the processes' exact timelines, placed on one clock (each process's
  ``memory.start_monotonic_s``) and added up, give ``tree_timeline``; its highest point is
  ``tree_peak_bytes`` at ``tree_peak_time_s`` (seconds since the parent's start).
  ``timeline`` and the ``memory`` figures other than the summed counters stay the parent's.
* Per-line peak holdings. ``live_at_peak_bytes`` is summed over processes, each process
  contributing what the line held at **that process's own peak**: the lines' sum belongs
  with ``peak_bytes_sum``. ``live_at_tree_peak_bytes`` is what the line held, all processes
  together, at ``tree_peak_time_s`` (``_lines_at``): the lines' sum belongs with
  ``tree_peak_bytes``.
* ``processes``: one record per process, the parent first, then children by start time:
  ``{pid, parent_pid, program, argv, started_at, elapsed_s, exit_code, peak_bytes,
  peak_time_s, start_offset_s, cpu_s, merged}`` (a Ray worker adds ``ray_worker_id``,
  ``ray_actor``, ``ray_tasks``; a profile that is only the process's profile so far adds
  ``partial_reason``); children that had not ended when the parent
  finished appear with ``merged: false`` and no measurements; ``not_merged_reason`` says why
  when the child told (it profiled itself explicitly).
* ``task_keys`` (per task key prefix): combined by peakline.model.task_keys; ``rank_lines``
  (each line per torch.distributed rank): peakline.model.rank_lines.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from peakline.model.profile import Profile
from peakline.model.records import (FunctionRecord, LineRecord, Memory, Sampling, ThreadRecord,
                                    Totals)
from peakline.model.schema import summed
from peakline.model.rank_lines import rank_lines
from peakline.model.task_keys import merge_task_keys

# What adds up over processes: the fields each record declares merge=SUM (model/records.py).
_LINE_SUMS = summed(LineRecord)
_FUNCTION_SUMS = summed(FunctionRecord)
_TOTALS_SUMS = summed(Totals)
_SAMPLING_SUMS = summed(Sampling)
_MEMORY_SUMS = summed(Memory)
_THREAD_SUMS = summed(ThreadRecord)

_MAX_TREE_POINTS = 2048
_PROCESS_EXTRAS = ("ray_worker_id", "ray_actor", "ray_tasks", "partial_reason")  # as the core's own timeline


def process_record(profile: Profile, *, merged: bool = True,
                   start_offset_s: float | None = None) -> dict[str, Any]:
    record = {
        "pid": profile.pid,
        "parent_pid": profile.extra.get("parent_pid"),
        "program": profile.program,
        "argv": list(profile.argv),
        "started_at": profile.started_at,
        "elapsed_s": profile.elapsed_s,
        "exit_code": profile.exit_code,
        "peak_bytes": profile.peak_bytes,
        "cpu_s": profile.totals.cpu_s,
        "merged": merged,
    }
    if profile.hostname is not None:
        record["hostname"] = profile.hostname
    if profile.node_id is not None:
        record["node_id"] = profile.node_id
    if profile.rank is not None:
        record["rank"] = profile.rank
    for name in _PROCESS_EXTRAS:  # a Ray worker's ids and a partial profile's reason
        if profile.extra.get(name) is not None:
            record[name] = profile.extra[name]
    if profile.memory is not None and profile.peak_bytes is not None:
        record["peak_time_s"] = profile.memory.peak_time_s
    if start_offset_s is not None:
        record["start_offset_s"] = start_offset_s
    if profile.snapshot is not None:  # its last partial profile: it died without a final one
        record["partial_until_s"] = profile.snapshot.end_s
    return record


def _merge_sampling_health(into: dict[str, Any], child: dict[str, Any], pid: int) -> None:
    """process_cpu_s adds up (when every process has it); a child's warning is kept, named."""
    if "process_cpu_s" in into and "process_cpu_s" in child:
        into["process_cpu_s"] += child["process_cpu_s"]
    else:
        into.pop("process_cpu_s", None)
    if child.get("warning"):
        named = f"process {pid}: {child['warning']}"
        into["warning"] = f"{into['warning']}; {named}" if into.get("warning") else named


def merge_processes(parent: Profile, children: Sequence[Profile],
                    unfinished: Iterable[dict[str, Any]] = ()) -> Profile:
    """The parent's profile with ``children`` merged in (see the module docstring)."""
    offsets = [0.0] + [_start_offset_s(parent, c) for c in children]
    processes = [process_record(parent, start_offset_s=0.0 if children else None)] + [
        process_record(c, start_offset_s=o) for c, o in zip(children, offsets[1:])]
    for record in unfinished:
        processes.append({"pid": record.get("pid", 0), "parent_pid": record.get("parent_pid"),
                          "program": record.get("program", ""),
                          "argv": list(record.get("argv") or []), "merged": False})
        if record.get("not_merged_reason"):
            processes[-1]["not_merged_reason"] = str(record["not_merged_reason"])
    if not children:
        out = copy.deepcopy(parent.to_dict())
        out["processes"] = processes
        return Profile.from_dict(out, source="merge_processes")

    doc = copy.deepcopy(parent.to_dict())
    doc["threads"] = [_thread_of(t, doc.get("pid")) for t in doc.get("threads", ())]
    line_procs: dict[tuple[str, int], int] = {}
    function_procs: dict[tuple[str, str, int], int] = {}
    _count_processes(doc, line_procs, function_procs)
    for child in children:
        child_doc = child.to_dict()
        _count_processes(child_doc, line_procs, function_procs)
        _merge_files(doc, child_doc)
        _merge_sums(doc.setdefault("totals", {}), child_doc.get("totals", {}), _TOTALS_SUMS)
        _merge_sums(doc.setdefault("sampling", {}), child_doc.get("sampling", {}),
                    _SAMPLING_SUMS)
        _merge_sampling_health(doc["sampling"], child_doc.get("sampling", {}), child.pid)
        _merge_threads(doc, child_doc)
        _merge_stacks(doc, child_doc)
        _merge_memory(doc, child_doc)
        merge_task_keys(doc, child_doc)

    elapsed = doc.get("elapsed_s") or 0.0
    for filename, record in doc["files"].items():
        for line in record["lines"]:
            line["processes"] = line_procs.get((filename, line["lineno"]), 1)
            if "copy_bytes" in line and "copy_mb_s" in line:
                line["copy_mb_s"] = line["copy_bytes"] / 1e6 / elapsed if elapsed > 0 else 0.0
        for function in record["functions"]:
            function["processes"] = function_procs.get(
                (filename, function["name"], function["lineno"]), 1)
    peaks = [p.peak_bytes for p in (parent, *children) if p.peak_bytes is not None]
    if peaks:
        doc["peak_bytes"] = max(peaks)
        doc["peak_bytes_sum"] = sum(peaks)
    everyone = (parent, *children)
    tree = _tree_timeline(everyone, offsets)
    if tree:
        peak_t, peak_v = max(tree, key=lambda p: (p[1], -p[0]))
        doc["tree_timeline"] = _decimate(tree, _MAX_TREE_POINTS)
        doc["tree_peak_bytes"] = peak_v
        doc["tree_peak_time_s"] = peak_t
        held = _lines_at(everyone, offsets, peak_t)
        for filename, record in doc["files"].items():
            for line in record["lines"]:
                if "live_at_peak_bytes" in line:
                    line["live_at_tree_peak_bytes"] = held.get((filename, line["lineno"]), 0)
    submitted = _submitted_work(parent, children, offsets[1:])
    if submitted is not None:
        doc["submitted_work"] = submitted
    rss = [p.peak_rss_bytes for p in (parent, *children) if p.peak_rss_bytes is not None]
    if rss:
        doc["peak_rss_bytes"] = max(rss)
    doc["processes"] = processes
    by_rank = rank_lines((parent, *children))
    if by_rank is not None:
        doc["rank_lines"] = by_rank
    return Profile.from_dict(doc, source="merge_processes")


def _submitted_work(parent: Profile, children: Sequence[Profile],
                    offsets: Sequence[float]) -> dict[str, Any] | None:
    """The children's CPU charged to the parent line that waited for it, by time: each
    bucket of a child's ``activity`` goes to the line the parent's main thread was on at that
    bucket's middle (on the parent's clock), or to ``unlinked_cpu_s`` when the parent's main
    thread was on no reported line then (or had ended). None without the parent's activity or
    any child's."""
    timeline = parent.activity
    if not timeline or not any(c.activity for c in children):
        return None
    width, main, lines = timeline["bucket_s"], timeline["main_line"], timeline["lines"]
    per_line: dict[tuple[str, int], dict[str, Any]] = {}
    unlinked = 0.0
    for child, offset in zip(children, offsets):
        activity = child.activity
        if not activity:
            continue
        for i, cpu in enumerate(activity["cpu_s"]):
            if cpu <= 0:
                continue
            j = int((offset + (i + 0.5) * activity["bucket_s"]) // width)
            where = main[j] if 0 <= j < len(main) else -1
            if where < 0:
                unlinked += cpu
                continue
            key = tuple(lines[where])
            row = per_line.setdefault(key, {"file": key[0], "lineno": key[1], "cpu_s": 0.0,
                                            "pids": []})
            row["cpu_s"] += cpu
            if child.pid not in row["pids"]:
                row["pids"].append(child.pid)
    rows = sorted(per_line.values(), key=lambda r: (-r["cpu_s"], r["file"], r["lineno"]))
    return {"lines": rows, "unlinked_cpu_s": unlinked}


def _count_processes(doc: dict, line_procs: dict, function_procs: dict) -> None:
    for filename, record in doc.get("files", {}).items():
        for line in record.get("lines", ()):
            key = (filename, line["lineno"])
            line_procs[key] = line_procs.get(key, 0) + 1
        for function in record.get("functions", ()):
            key = (filename, function["name"], function["lineno"])
            function_procs[key] = function_procs.get(key, 0) + 1


def _merge_sums(into: dict, other: dict, names: Iterable[str]) -> None:
    for name in names:
        if name in other:
            into[name] = into.get(name, 0) + other[name]


def _merge_files(doc: dict, child: dict) -> None:
    files = doc.setdefault("files", {})
    for filename, child_record in child.get("files", {}).items():
        record = files.setdefault(filename, {"lines": [], "functions": []})
        lines = {line["lineno"]: line for line in record["lines"]}
        for line in child_record.get("lines", ()):
            if line["lineno"] in lines:
                _merge_sums(lines[line["lineno"]], line, _LINE_SUMS)
            else:
                lines[line["lineno"]] = copy.deepcopy(line)
        record["lines"] = [lines[n] for n in sorted(lines)]
        functions = {(f["name"], f["lineno"]): f for f in record["functions"]}
        for function in child_record.get("functions", ()):
            key = (function["name"], function["lineno"])
            if key in functions:
                _merge_sums(functions[key], function, _FUNCTION_SUMS)
            else:
                functions[key] = copy.deepcopy(function)
        record["functions"] = [functions[k] for k in sorted(functions,
                                                            key=lambda k: (k[1], k[0]))]
    doc["files"] = dict(sorted(files.items()))


def _merge_threads(doc: dict, child: dict) -> None:
    threads = {t["tid"]: t for t in doc.get("threads", ())}
    for thread in child.get("threads", ()):
        if thread["tid"] in threads:  # a tid reused by another process: add it up
            _merge_sums(threads[thread["tid"]], thread, _THREAD_SUMS)
        else:
            threads[thread["tid"]] = _thread_of(copy.deepcopy(thread), child.get("pid"))
    doc["threads"] = [threads[tid] for tid in sorted(threads)]


def _thread_of(thread: dict, pid: Any) -> dict:
    """``thread`` labelled with its process: ``pid`` and the pid in its name (kept as is when
    it already has one, from an earlier merge)."""
    if pid is None or "pid" in thread:
        return thread
    thread["pid"] = pid
    name = thread.get("name") or f"thread {thread.get('tid')}"
    thread["name"] = f"{name} (pid {pid})"
    return thread


def _merge_stacks(doc: dict, child: dict) -> None:
    stacks = doc.setdefault("stacks", {"frames": [], "samples": []})
    index = {tuple(f[:4]): i for i, f in enumerate(stacks["frames"])}
    remap = []
    for frame in child.get("stacks", {}).get("frames", ()):
        key = tuple(frame[:4])
        if key not in index:
            index[key] = len(stacks["frames"])
            stacks["frames"].append(list(frame))
        remap.append(index[key])
    for sample in child.get("stacks", {}).get("samples", ()):
        sample = copy.deepcopy(sample)
        sample["frames"] = [remap[i] for i in sample["frames"]]
        stacks["samples"].append(sample)


def _merge_memory(doc: dict, child: dict) -> None:
    if "memory" not in child:
        return
    if "memory" not in doc:
        doc["memory"] = copy.deepcopy(child["memory"])
        return
    _merge_sums(doc["memory"], child["memory"], _MEMORY_SUMS)


def _start_offset_s(parent: Profile, child: Profile) -> float:
    """Seconds from the parent's time zero to the child's, on CLOCK_MONOTONIC when both
    profiles carry it, else from their wall-clock start stamps (microseconds; both taken just
    before the sessions' zeros)."""
    zeros = [p.memory.start_monotonic_s if p.memory is not None else None
             for p in (parent, child)]
    if parent.hostname != child.hostname:  # two machines' monotonic clocks do not compare
        zeros = [None, None]
    if zeros[0] is not None and zeros[1] is not None:
        return zeros[1] - zeros[0]
    return (_wall(child.started_at) - _wall(parent.started_at)).total_seconds()


def _wall(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _value_at(points: Sequence[Sequence[float]], t: float) -> float:
    """A step series' value at ``t``: its last point at or before t (0 before the first)."""
    lo, hi = 0, len(points)
    while lo < hi:
        mid = (lo + hi) // 2
        if points[mid][0] <= t:
            lo = mid + 1
        else:
            hi = mid
    return points[lo - 1][1] if lo else 0


def _tree_timeline(profiles: Sequence[Profile], offsets: Sequence[float]) -> list[list[float]]:
    """The processes' live heaps added up over time, on the first profile's clock. A process
    counts from its first timeline point to its last (its end); below its own starting point
    (it freed more than it allocated) it counts as 0. Empty without memory timelines."""
    events: list[tuple[float, int, int, int]] = []  # (time, order, process, bytes)
    for index, (profile, offset) in enumerate(zip(profiles, offsets)):
        points = profile.timeline or []
        if not points:
            continue
        for t, value in points:
            events.append((t + offset, 0, index, max(0, int(value))))
        events.append((points[-1][0] + offset, 1, index, 0))  # gone once it ended
    if not events or not (profiles[0].timeline or []):
        return []
    events.sort()
    live: dict[int, int] = {}
    total = 0
    out: list[list[float]] = []
    i = 0
    while i < len(events):
        t = events[i][0]
        # Apply every change at this instant (ends last), then record one point.
        while i < len(events) and events[i][0] == t:
            _, _, index, value = events[i]
            total += value - live.get(index, 0)
            live[index] = value
            i += 1
        if out and out[-1][1] == total:
            continue
        out.append([max(0.0, t), total])
    return out


def _decimate(points: list[list[float]], limit: int) -> list[list[float]]:
    """At most ~``limit`` points: the first, the last, and the lowest and highest point of
    every group in between, in time order, so spikes and dips survive."""
    if len(points) <= limit:
        return points
    group = -(-(len(points) - 2) // max(1, (limit - 2) // 2))
    out = [points[0]]
    for start in range(1, len(points) - 1, group):
        chunk = points[start:min(start + group, len(points) - 1)]
        lo = min(range(len(chunk)), key=lambda k: chunk[k][1])
        hi = max(range(len(chunk)), key=lambda k: chunk[k][1])
        for k in sorted({lo, hi}):
            out.append(chunk[k])
    out.append(points[-1])
    return out


def _lines_at(profiles: Sequence[Profile], offsets: Sequence[float],
              t: float) -> dict[tuple[str, int], int]:
    """What each line held at ``t`` (the first profile's clock), all processes added up.

    A process that was at its own peak then (within 1% or 1 MiB, the core's tolerance for
    ``live_at_peak_bytes``) contributes its lines' ``live_at_peak_bytes``, which the core
    took at that moment. Any other process that was running contributes its per-line
    timelines read at ``t``; their points are taken at aggregator ticks, so a change less than
    a tick before ``t`` may not be in them yet."""
    held: dict[tuple[str, int], int] = {}
    for profile, offset in zip(profiles, offsets):
        local = t - offset + 1e-6  # t came from this very sum: undo its float rounding
        points = profile.timeline or []
        if not points or local < points[0][0] or local > points[-1][0]:
            continue
        peak = profile.peak_bytes or 0
        at_own_peak = peak > 0 and _value_at(points, local) >= peak - max(0.01 * peak, 1 << 20)
        for filename, line in profile.lines():
            if at_own_peak:
                value = line.live_at_peak_bytes or 0
            elif line.timeline:
                value = int(_value_at(line.timeline, local))
            else:
                continue
            if value:
                key = (filename, line.lineno)
                held[key] = held.get(key, 0) + value
    return held


def merge_profiles(profiles: Sequence[Profile], sources: Sequence[str] | None = None) -> Profile:
    """Profiles taken anywhere (other hosts, a job array, shared storage) merged into one
    (``peakline merge``). The earliest-started profile plays the parent: its run description
    stays, the others are merged into it as by ``merge_processes``, and ``processes`` lists
    every process of every input (an input that was itself merged contributes its own list),
    each with the host it ran on. Start offsets between hosts come from the wall-clock stamps.

    An input that was itself merged holds several processes' timelines summed in
    ``tree_timeline`` only; the tree figures of the result would then miss its children, so
    they are left out (reports fall back to the sum of the processes' peaks, which stays
    exact). Raises ValueError for fewer than two profiles or one given twice."""
    names = list(sources) if sources is not None else [f"profile {i + 1}"
                                                       for i in range(len(profiles))]
    if len(profiles) < 2:
        raise ValueError("merge needs at least two profiles")
    seen: dict[tuple, str] = {}
    for profile, name in zip(profiles, names):
        key = (profile.hostname, profile.pid, profile.started_at)
        if key in seen:
            raise ValueError(f"{name} is the same run as {seen[key]} (pid {profile.pid} on "
                             f"{profile.hostname or 'an unnamed host'}, started "
                             f"{profile.started_at}): merging it twice would count it twice")
        seen[key] = name
    order = sorted(range(len(profiles)), key=lambda i: _wall(profiles[i].started_at))
    base, rest = profiles[order[0]], [profiles[i] for i in order[1:]]
    merged = merge_processes(base, rest).to_dict()
    processes = []
    for profile in (base, *rest):
        offset = 0.0 if profile is base else _start_offset_s(base, profile)
        own = [r.to_dict() for r in profile.processes or ()] or [process_record(profile)]
        for record in own:
            if record.get("merged", True):
                record["start_offset_s"] = (record.get("start_offset_s") or 0.0) + offset
            if profile.hostname and "hostname" not in record:
                record["hostname"] = profile.hostname
            processes.append(record)
    merged["processes"] = processes
    _recount(merged, (base, *rest))
    # Work is linked to a waiting line within one process tree only (one clock, one parent):
    # each input's own links are kept, summed; none is made across inputs.
    merged.pop("submitted_work", None)
    own = [p.submitted_work for p in (base, *rest) if p.submitted_work]
    if own:
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        for work in own:
            for row in work["lines"]:
                into = rows.setdefault((row["file"], row["lineno"]), {
                    "file": row["file"], "lineno": row["lineno"], "cpu_s": 0.0, "pids": []})
                into["cpu_s"] += row["cpu_s"]
                into["pids"].extend(p for p in row["pids"] if p not in into["pids"])
        merged["submitted_work"] = {
            "lines": sorted(rows.values(), key=lambda r: (-r["cpu_s"], r["file"], r["lineno"])),
            "unlinked_cpu_s": sum(w["unlinked_cpu_s"] for w in own)}
    if any(len(p.processes or ()) > 1 for p in (base, *rest)):
        for name in ("tree_timeline", "tree_peak_bytes", "tree_peak_time_s"):
            merged.pop(name, None)
        for record in merged["files"].values():
            for line in record["lines"]:
                line.pop("live_at_tree_peak_bytes", None)
    sums = [p.peak_bytes_sum if p.peak_bytes_sum is not None else p.peak_bytes
            for p in (base, *rest)]
    if all(s is not None for s in sums):
        merged["peak_bytes_sum"] = sum(sums)
    return Profile.from_dict(merged, source="merge_profiles")


def _recount(doc: dict, inputs: Sequence[Profile]) -> None:
    """``processes`` per line and function: the sum of the inputs' counts (1 for an input
    that was not itself merged)."""
    lines: dict[tuple[str, int], int] = {}
    functions: dict[tuple[str, str, int], int] = {}
    for profile in inputs:
        for filename, record in profile.to_dict().get("files", {}).items():
            for line in record.get("lines", ()):
                key = (filename, line["lineno"])
                lines[key] = lines.get(key, 0) + line.get("processes", 1)
            for function in record.get("functions", ()):
                key = (filename, function["name"], function["lineno"])
                functions[key] = functions.get(key, 0) + function.get("processes", 1)
    for filename, record in doc["files"].items():
        for line in record["lines"]:
            line["processes"] = lines.get((filename, line["lineno"]), 1)
        for function in record["functions"]:
            function["processes"] = functions.get((filename, function["name"],
                                                   function["lineno"]), 1)
