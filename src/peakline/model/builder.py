"""Turn the C++ core's raw snapshot into a Profile (docs/internals-raw-samples.md -> v1 file).

Input: ``raw`` exactly as ``_core.collect()`` returns it (integer nanoseconds, stacks LEAF
FIRST; its rows are read by name through peakline.model.raw), ``meta`` from the runner/API, and
the ``FileSelection`` that says which files are the user's. Output: a validated ``Profile``.

Attribution rule. Each stack row is charged to its INNERMOST frame whose file is reported:
time inside ``json.loads`` (stdlib) lands on the user's line that called it. The row keeps its
categories as measured (Python, native, system, wait, run delay); "python" means the interpreter was
running bytecode, wherever that bytecode lives. A row with no reported frame (an empty stack,
or only library frames) goes to ``totals.unattributed_s``; it still counts in the totals, in
its thread and in ``stacks``.

Functions. A function is (file, qualname, first_lineno). Self time is the time of rows charged
to one of its lines. ``inclusive_s`` is the CPU + wait + run delay time of every row on which the function
appears among the REPORTED frames, counted once per row even when it recurses.

Sums are kept in integer nanoseconds and converted to float seconds once at the end, so
float rounding never depends on the order rows arrive in.

Robustness (the core reads frames racily and validates them, but this is the last line of
defence): a frame id outside the frame table is dropped from its stack and counted in
``sampling.invalid_frames``; a negative line number becomes 0 ("line unknown").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from peakline.model import gpu_builder, memory_builder
from peakline.model.profile import FORMAT_NAME, FORMAT_VERSION, Profile
from peakline.model.raw import CPU_STATS, ActivityBucket, Frame, MemoryStack, Stack, Thread
from peakline.model.records import Sampling
from peakline.model.schema import carried
from peakline.model.selection import FileSelection

_NS_PER_S = 1_000_000_000
_N_CATEGORIES = 5  # python, native, system, wait, run delay: the order of _Acc


class _Acc:
    """Integer-ns sums of the five categories plus a sample count."""

    __slots__ = ("ns", "samples")

    def __init__(self) -> None:
        self.ns = [0] * _N_CATEGORIES
        self.samples = 0

    def add(self, ns: tuple[int, ...], samples: int) -> None:
        for i in range(_N_CATEGORIES):
            self.ns[i] += ns[i]
        self.samples += samples

    def as_seconds(self) -> dict[str, float]:
        python, native, system, wait, run_delay = (v / _NS_PER_S for v in self.ns)
        return {"cpu_python_s": python, "cpu_native_s": native,
                "cpu_system_s": system, "wait_s": wait, "run_delay_s": run_delay}


class _FunctionAcc:
    __slots__ = ("self_acc", "inclusive_ns")

    def __init__(self) -> None:
        self.self_acc = _Acc()
        self.inclusive_ns = 0


def build_profile(raw: Mapping[str, Any], *, meta: Mapping[str, Any],
                  selection: FileSelection) -> Profile:
    """Aggregate ``raw`` into a Profile. Raises ProfileFormatError when ``meta`` holds values
    the file format cannot carry (e.g. a negative ``elapsed_s``): the result is validated
    exactly as ``read_profile`` would validate it."""
    frames = [_normalise_frame(f) for f in raw.get("frames", ())]
    reported = [selection.is_reported(f.file) for f in frames]
    own = [selection.is_own(f.file) for f in frames]
    launcher = [o or _is_runpy(f.file) for o, f in zip(own, frames)]
    importing = [memory_builder.is_import_machinery(f.file) for f in frames]
    function_of = [(f.file, f.function, f.first_lineno) for f in frames]
    n_frames = len(frames)

    lines: dict[str, dict[int, _Acc]] = {}
    functions: dict[str, dict[tuple[str, int], _FunctionAcc]] = {}
    totals = _Acc()
    unattributed_ns = 0
    thread_sums: dict[int, _Acc] = {}
    stack_rows: dict[tuple[int, tuple[int, ...]], list[int]] = {}
    stack_memory: dict[tuple[int, tuple[int, ...]], list[int]] = {}  # [alloc, at peak]
    invalid_frames = 0
    raw_memory = raw.get("memory")
    memory_stacks = raw_memory.get("stacks", ()) if raw_memory else ()
    memory = memory_builder.MemoryTables() if raw_memory else None

    for index, row in enumerate(raw.get("stacks", ())):
        stack = Stack(*row)
        ns = (stack.cpu_python_ns, stack.cpu_native_ns, stack.cpu_system_ns, stack.wait_ns,
              stack.run_delay_ns)
        samples = stack.cpu_samples + stack.wait_samples
        row_ns = sum(ns)
        valid_ids = [i for i in stack.frames if 0 <= i < n_frames]
        invalid_frames += len(stack.frames) - len(valid_ids)

        totals.add(ns, samples)
        thread_sums.setdefault(stack.tid, _Acc()).add(ns, samples)
        # The file stores stacks root first, without peakline's own launcher frames.
        key = (stack.tid, _without_launcher(tuple(reversed(valid_ids)), launcher, own))
        merged = stack_rows.setdefault(key, [0] * (_N_CATEGORIES + 2))
        for i, value in enumerate((*ns, stack.cpu_samples, stack.wait_samples)):
            merged[i] += value

        charged = next((i for i in valid_ids if reported[i]), None)
        if memory is not None and index < len(memory_stacks):
            m = MemoryStack(*memory_stacks[index])
            # For the memory flame graph: what the stack allocated and held at the peak.
            held = stack_memory.setdefault(key, [0, 0])
            held[0] += m.alloc_python_bytes + m.alloc_native_bytes
            held[1] += m.live_at_peak_bytes
            memory.add(frames[charged] if charged is not None else None, m,
                       importing=any(importing[i] for i in valid_ids))
        if charged is None:
            unattributed_ns += row_ns
            continue
        frame = frames[charged]
        lines.setdefault(frame.file, {}).setdefault(frame.lineno, _Acc()).add(ns, samples)
        _function(functions, frame).self_acc.add(ns, samples)
        seen: set[tuple[str, str, int]] = set()
        for i in valid_ids:
            if reported[i]:
                function_key = function_of[i]
                if function_key not in seen:
                    seen.add(function_key)
                    _function(functions, frames[i]).inclusive_ns += row_ns

    stats = raw.get("stats", {})
    document = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        **_header(meta, selection, stats),
        "sampling": {
            **carried(Sampling, stats, CPU_STATS),
            "invalid_frames": stats.get("invalid_frames", 0) + invalid_frames,
            "signal": stats.get("cpu_signal"),
            "process_cpu_s": (stats["process_cpu_ns"] / _NS_PER_S
                              if "process_cpu_ns" in stats else None),
            "warning": raw.get("sampling_warning"),
        },
        "totals": {**totals.as_seconds(), "unattributed_s": unattributed_ns / _NS_PER_S,
                   **_cgroup_fields(meta.get("cgroup_throttling"))},
        "threads": _threads(raw.get("threads", ()), thread_sums, meta.get("thread_names") or {}),
        "files": _files(lines, functions, memory, raw_memory, meta.get("elapsed_s") or 0.0),
        "stacks": {
            "frames": [list(f) for f in frames],
            "samples": [_stack_sample(tid, ids, sums, stack_memory.get((tid, ids)))
                        for (tid, ids), sums in stack_rows.items()],
        },
    }
    if raw_memory:
        document.update(memory_builder.run_fields(
            raw_memory, elapsed_s=meta.get("elapsed_s") or 0.0,
            peak_rss_bytes=meta.get("peak_rss_bytes"),
            unattributed_alloc_bytes=memory.unattributed_alloc_bytes if memory else 0,
            start_monotonic_ns=stats.get("start_monotonic_ns")))
    gpu_builder.add_fields(document, raw.get("gpu"), raw.get("stacks", ()), frames, reported)
    activity = _activity(raw.get("activity"), frames, reported)
    if activity is not None:
        document["activity"] = activity
    return Profile.from_dict(document, source="build_profile")


def _cgroup_fields(throttling: Any) -> dict[str, Any]:
    """``totals.cgroup_throttled_s`` / ``cgroup_throttled_periods`` from the session's
    (seconds, periods) reading of the CPU controller's cpu.stat, or nothing when unknown."""
    if not throttling:
        return {}
    seconds, periods = throttling
    return {"cgroup_throttled_s": float(seconds), "cgroup_throttled_periods": int(periods)}
def _activity(raw: Any, frames: list, reported: list) -> dict[str, Any] | None:
    """The core's time buckets (aggregate/time_buckets.h) as the profile's ``activity``: CPU
    seconds per bucket and the main thread's line, as an index into ``lines``."""
    if not raw or not raw.get("buckets") or raw.get("width_ns", 0) <= 0:
        return None
    lines: list[list] = []
    index: dict[tuple[str, int], int] = {}
    cpu_s, main_line = [], []
    for bucket in raw["buckets"]:
        bucket = ActivityBucket(*bucket)
        cpu_s.append(max(0, bucket.cpu_ns) / _NS_PER_S)
        frame = bucket.frame
        if 0 <= frame < len(frames) and reported[frame]:
            key = (frames[frame].file, frames[frame].lineno)
            if key not in index:
                index[key] = len(lines)
                lines.append(list(key))
            main_line.append(index[key])
        else:
            main_line.append(-1)
    return {"bucket_s": raw["width_ns"] / _NS_PER_S, "cpu_s": cpu_s, "lines": lines,
            "main_line": main_line}


def _is_runpy(filename: str) -> bool:
    return filename == "<frozen runpy>" or os.path.basename(filename) == "runpy.py"


def _without_launcher(root_first: tuple[int, ...], launcher: list[bool],
                      own: list[bool]) -> tuple[int, ...]:
    """Drops the frames that only launched the program from the root of a stack: the longest
    root run of peakline's own frames (the CLI, the runner, a child's generated
    sitecustomize) and the runpy frames among them (``python -m peakline``, ``run -m``), if
    the run holds a frame of peakline's own. The program's stacks then start where they would
    unprofiled; a program's own ``python -m`` runpy roots stay."""
    n = 0
    while n < len(root_first) and launcher[root_first[n]]:
        n += 1
    if n and any(own[i] for i in root_first[:n]):
        return root_first[n:]
    return root_first


def _normalise_frame(row: Any) -> Frame:
    frame = Frame(*row)
    return frame._replace(first_lineno=max(0, frame.first_lineno or 0),
                          lineno=max(0, frame.lineno) if frame.lineno is not None else 0)


def _function(functions: dict, frame: Frame) -> _FunctionAcc:
    per_file = functions.setdefault(frame.file, {})
    key = (frame.function, frame.first_lineno)
    acc = per_file.get(key)
    if acc is None:
        acc = per_file[key] = _FunctionAcc()
    return acc


def python_version() -> str:
    """This interpreter's version, e.g. "3.11.7" or "3.13.0rc1" (as platform.python_version)."""
    return sys.version.split()[0]


def platform_description() -> str:
    """E.g. "Linux-6.1.0-x86_64-with-glibc2.36", the form platform.platform() gives, built
    from os.uname() and confstr: platform.platform() runs `uname -p` in a subprocess (a fork
    of the profiled program, which may be large, at its end) and its import compiles nine
    regular expressions."""
    u = os.uname()
    text = f"{u.sysname}-{u.release}-{u.machine}"
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    except (ValueError, OSError):
        libc = ""
    if libc:
        text += "-with-" + libc.replace(" ", "")
    return text.replace(" ", "_").replace("/", "-")


def _header(meta: Mapping[str, Any], selection: FileSelection,
            stats: Mapping[str, Any]) -> dict[str, Any]:
    """Run description from ``meta``; python_version/platform/pid default to this process
    (the builder runs inside the profiled process). The selection fields of ``options`` come
    from ``selection``, the one that was applied; extra option keys are kept."""
    options = dict(meta.get("options") or {})
    if "cpu_sampling_interval_s" not in options:
        options["cpu_sampling_interval_s"] = stats.get("cpu_interval_ns", 0) / _NS_PER_S
    options["profile_all"] = selection.profile_all
    options["profile_only"] = list(selection.profile_only)
    options["profile_exclude"] = list(selection.profile_exclude)
    return {
        "program": meta.get("program"),
        "argv": list(meta.get("argv", ())),
        "python_version": meta.get("python_version") or python_version(),
        "platform": meta.get("platform") or platform_description(),
        "pid": meta.get("pid", os.getpid()),
        "started_at": utc_timestamp(meta.get("started_at")),
        "elapsed_s": meta.get("elapsed_s"),
        "exit_code": meta.get("exit_code"),
        "options": options,
        "hostname": meta.get("hostname") or os.uname().nodename,
        **({"node_id": node_id} if (node_id := meta.get("node_id") or _node_id()) else {}),
        **({"rank": rank} if (rank := _rank()) is not None else {}),
    }


def _rank() -> int | None:
    """The process's rank in a torch.distributed job (torchrun, or any launcher of its
    environment convention: RANK with WORLD_SIZE)."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None or not rank.isdigit():
        return None
    return int(rank)


# Where a launcher names the node a process runs on (checked in this order): torchrun's node
# rank (GROUP_RANK), Slurm's node index, an explicit PEAKLINE_NODE_ID.
_NODE_ID_VARIABLES = ("PEAKLINE_NODE_ID", "GROUP_RANK", "SLURM_NODEID")


def _node_id() -> str | None:
    for name in _NODE_ID_VARIABLES:
        value = os.environ.get(name)
        if value:
            return value
    return None


def utc_timestamp(value: Any) -> Any:
    """ISO-8601 UTC text for a datetime (naive = local time) or epoch seconds; strings and
    anything else pass through for the validator to judge."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = datetime.fromtimestamp(value, timezone.utc)
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return value


def _threads(raw_threads: Any, thread_sums: dict[int, _Acc],
             names: Mapping[Any, str]) -> list[dict[str, Any]]:
    """One record per thread, sorted by tid. CPU and wait come from the core's per-thread
    accounting (``raw["threads"]``); a tid that only appears in stacks gets its stack sums and
    ``python`` = whether any of its time was Python."""
    threads: dict[int, dict[str, Any]] = {}
    for row in raw_threads:
        thread = Thread(*row)
        threads[thread.tid] = {"tid": thread.tid, "python": bool(thread.python),
                               "cpu_s": thread.cpu_ns / _NS_PER_S,
                               "wait_s": thread.wait_ns / _NS_PER_S,
                               "run_delay_s": thread.run_delay_ns / _NS_PER_S}
    for tid, acc in thread_sums.items():
        if tid not in threads:
            python_ns, native_ns, system_ns, wait_ns, run_delay_ns = acc.ns
            threads[tid] = {"tid": tid, "python": python_ns > 0,
                            "cpu_s": (python_ns + native_ns + system_ns) / _NS_PER_S,
                            "wait_s": wait_ns / _NS_PER_S,
                            "run_delay_s": run_delay_ns / _NS_PER_S}
    out = []
    for tid in sorted(threads):
        name = names.get(tid, names.get(str(tid)))
        out.append({"tid": tid, "name": name, **{k: v for k, v in threads[tid].items()
                                                 if k != "tid"}})
    return out


def _files(lines: dict[str, dict[int, _Acc]],
           functions: dict[str, dict[tuple[str, int], _FunctionAcc]],
           memory: memory_builder.MemoryTables | None = None,
           raw_memory: Mapping[str, Any] | None = None, elapsed_s: float = 0.0) -> dict[str, Any]:
    """Files sorted by name; lines by lineno; functions by (first line, qualname). With memory,
    a line or function that only allocated (no CPU sample) is listed too, with zero times."""
    mem_lines = memory.lines if memory else {}
    mem_functions = memory.functions if memory else {}
    timelines = memory_builder.line_timelines(raw_memory) if raw_memory else {}
    files = {}
    for filename in sorted(set(lines) | set(functions) | set(mem_lines)):
        time_lines = lines.get(filename, {})
        file_mem = mem_lines.get(filename, {})
        line_records = []
        for lineno in sorted(set(time_lines) | set(file_mem)):
            acc = time_lines.get(lineno) or _Acc()
            record = {"lineno": lineno, **acc.as_seconds(), "samples": acc.samples}
            if memory is not None:
                record.update(memory_builder.record_fields(
                    file_mem.get(lineno), elapsed_s=elapsed_s, with_copy_rate=True))
                record.update(memory_builder.leak_fields(
                    timelines.get((filename, lineno), []), elapsed_s,
                    raw_memory.get("stats", {}).get("sampling_interval_bytes", 0),
                    net_bytes=record["net_bytes"], net_variance=record["net_variance"],
                    import_net_bytes=memory.import_net.get(filename, {}).get(lineno, 0)))
            line_records.append(record)
        function_records = []
        time_functions = functions.get(filename, {})
        func_mem = mem_functions.get(filename, {})
        for qualname, first_lineno in sorted(set(time_functions) | set(func_mem),
                                             key=lambda key: (key[1], key[0])):
            acc = time_functions.get((qualname, first_lineno)) or _FunctionAcc()
            self_ns = sum(acc.self_acc.ns)
            record = {
                "name": qualname, "lineno": first_lineno, **acc.self_acc.as_seconds(),
                "self_s": self_ns / _NS_PER_S, "inclusive_s": acc.inclusive_ns / _NS_PER_S,
                "samples": acc.self_acc.samples}
            if memory is not None:
                record.update(memory_builder.record_fields(
                    func_mem.get((qualname, first_lineno)), elapsed_s=elapsed_s,
                    with_copy_rate=False))
            function_records.append(record)
        files[filename] = {"lines": line_records, "functions": function_records}
    return files


def _stack_sample(tid: int, frame_ids: tuple[int, ...], sums: list[int],
                  memory: list[int] | None = None) -> dict[str, Any]:
    python_ns, native_ns, system_ns, wait_ns, run_delay_ns, cpu_samples, wait_samples = sums
    extra = {} if memory is None else {"alloc_bytes": memory[0],
                                       "live_at_peak_bytes": memory[1]}
    return {"thread": tid, "frames": list(frame_ids), **extra,
            "cpu_python_s": python_ns / _NS_PER_S, "cpu_native_s": native_ns / _NS_PER_S,
            "cpu_system_s": system_ns / _NS_PER_S, "wait_s": wait_ns / _NS_PER_S,
            "run_delay_s": run_delay_ns / _NS_PER_S,
            "cpu_samples": cpu_samples, "wait_samples": wait_samples}
