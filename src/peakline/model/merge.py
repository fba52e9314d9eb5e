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
* ``totals``, ``sampling`` and the memory counters are summed; ``threads`` and ``stacks``
  are concatenated (frames re-indexed).
* ``peak_bytes`` is the **largest single-process peak**, and ``timeline`` stays the parent's
  (both exact for that process). Processes that run at the same time add up: their combined
  heap may exceed ``peak_bytes``; ``processes[].peak_bytes`` gives each one's peak and
  ``peak_bytes_sum`` the sum of all of them, an upper bound of the combined peak.
* ``processes``: one record per process, the parent first, then children by start time:
  ``{pid, parent_pid, program, argv, started_at, elapsed_s, exit_code, peak_bytes,
  cpu_s, merged}``; children that had not ended when the parent finished appear with
  ``merged: false`` and no measurements.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from peakline.model.profile import Profile

_TIME_FIELDS = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "wait_s")
_LINE_SUMS = (*_TIME_FIELDS, "samples", "alloc_python_bytes", "alloc_native_bytes",
              "free_bytes", "net_bytes", "live_at_peak_bytes", "copy_bytes")
_FUNCTION_SUMS = (*_LINE_SUMS, "self_s", "inclusive_s")
_SAMPLING_SUMS = ("cpu_samples", "wait_samples", "dropped_samples", "invalid_frames",
                  "truncated_stacks", "deferred_code_frees", "skipped_ticks")
_MEMORY_SUMS = ("alloc_samples", "free_samples", "copy_samples", "not_sampled_events",
                "unattributed_alloc_bytes", "staged_events")


def process_record(profile: Profile, *, merged: bool = True) -> dict[str, Any]:
    return {
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
    processes = [process_record(parent)] + [process_record(c) for c in children]
    for record in unfinished:
        processes.append({"pid": record.get("pid", 0), "parent_pid": record.get("parent_pid"),
                          "program": record.get("program", ""),
                          "argv": list(record.get("argv") or []), "merged": False})
    if not children:
        out = copy.deepcopy(parent.to_dict())
        out["processes"] = processes
        return Profile.from_dict(out, source="merge_processes")

    doc = copy.deepcopy(parent.to_dict())
    line_procs: dict[tuple[str, int], int] = {}
    function_procs: dict[tuple[str, str, int], int] = {}
    _count_processes(doc, line_procs, function_procs)
    for child in children:
        child_doc = child.to_dict()
        _count_processes(child_doc, line_procs, function_procs)
        _merge_files(doc, child_doc)
        _merge_sums(doc.setdefault("totals", {}), child_doc.get("totals", {}),
                    (*_TIME_FIELDS, "unattributed_s"))
        _merge_sums(doc.setdefault("sampling", {}), child_doc.get("sampling", {}),
                    _SAMPLING_SUMS)
        _merge_sampling_health(doc["sampling"], child_doc.get("sampling", {}), child.pid)
        _merge_threads(doc, child_doc)
        _merge_stacks(doc, child_doc)
        _merge_memory(doc, child_doc)

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
    rss = [p.peak_rss_bytes for p in (parent, *children) if p.peak_rss_bytes is not None]
    if rss:
        doc["peak_rss_bytes"] = max(rss)
    doc["processes"] = processes
    return Profile.from_dict(doc, source="merge_processes")


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
            _merge_sums(threads[thread["tid"]], thread, ("cpu_s", "wait_s"))
        else:
            threads[thread["tid"]] = copy.deepcopy(thread)
    doc["threads"] = [threads[tid] for tid in sorted(threads)]


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
