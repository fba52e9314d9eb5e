"""GPU part of the profile: from the core's ``raw["gpu"]`` to per-line fields and the top-level
``gpu`` object (docs/profile-format.md, "GPU"; docs/gpu.md for how it is measured).

Attribution is the CPU rule: each stack row's GPU figures go to its innermost reported frame.
The core charges GPU figures only to the main thread's stacks, once per tick:

* ``gpu_util_s``: GPU busy time (NVML utilisation × tick length, GPU-seconds: two busy GPUs
  count twice). Kernels are asynchronous, so this lands on the lines that were running while
  the GPU was busy, which for GPU-bound code are the lines that wait for it (synchronisation
  points), not necessarily the lines that launched the work.
* ``gpu_peak_bytes``: the most GPU memory the process held while the line was running.
* ``gpu_alloc_bytes`` / ``gpu_net_bytes`` / ``gpu_live_at_peak_bytes``: GPU memory the line
  allocated, still holds at the end, and held when the tracked total peaked. From PyTorch's
  allocation history when it was recorded completely (exact per allocation, frees charged to
  the allocating line), else from the per-tick changes (PyTorch's allocated bytes, or NVML's
  figure without PyTorch), which land on the line running at the tick after the change.

Nothing is added when nothing was measured (no device, no PyTorch CUDA use): absent fields
mean "not measured".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from peakline.model.raw import Frame, GpuError, GpuStack, Stack, TorchLine

_NS_PER_S = 1_000_000_000


def add_fields(document: dict[str, Any], raw_gpu: Mapping[str, Any] | None,
               raw_stacks: Sequence[Any], frames: Sequence[Frame],
               reported: Sequence[bool]) -> None:
    """Adds the GPU fields to ``document`` (the profile dict being built) in place."""
    if not raw_gpu or not raw_gpu.get("measured"):
        return
    stats = raw_gpu.get("stats", {})
    torch = raw_gpu.get("torch") or None
    history = torch is not None and torch.get("history_complete") and "lines" in torch
    with_util = stats.get("util_readings", 0) > 0
    with_peak = stats.get("peak_bytes", -1) >= 0

    # (file, lineno) -> [util_ns, peak, alloc, net, live_at_peak]
    sums: dict[tuple[str, int], list[int]] = {}
    n_frames = len(frames)
    for row, values in zip(raw_stacks, raw_gpu.get("stacks", ())):
        frame_ids = Stack(*row).frames
        charged = next((i for i in frame_ids if 0 <= i < n_frames and reported[i]), None)
        if charged is None:
            continue
        acc = sums.setdefault((frames[charged].file, frames[charged].lineno), [0, 0, 0, 0, 0])
        g = GpuStack(*values)
        acc[0] += g.util_ns
        acc[1] = max(acc[1], g.peak_bytes)
        if not history:
            acc[2] += g.alloc_bytes
            acc[3] += g.net_bytes
            acc[4] += g.live_at_peak_bytes
    if history:
        for row in torch["lines"]:
            line = TorchLine(*row)
            acc = sums.setdefault((line.file, max(0, line.lineno)), [0, 0, 0, 0, 0])
            acc[2] += line.alloc_bytes
            acc[3] += line.net_bytes
            acc[4] += line.live_at_peak_bytes

    files = document["files"]
    for filename in {f for f, _ in sums}:
        files.setdefault(filename, {"lines": [], "functions": []})
    for filename, file_record in files.items():
        records = {r["lineno"]: r for r in file_record["lines"]}
        for (f, lineno) in sums:
            if f == filename and lineno not in records:
                records[lineno] = {"lineno": lineno, "cpu_python_s": 0.0, "cpu_native_s": 0.0,
                                   "cpu_system_s": 0.0, "wait_s": 0.0, "samples": 0}
        for lineno, record in records.items():
            util_ns, peak, alloc, net, at_peak = sums.get((filename, lineno), (0, 0, 0, 0, 0))
            if with_util:
                record["gpu_util_s"] = util_ns / _NS_PER_S
            if with_peak:
                record["gpu_peak_bytes"] = max(0, peak)
            record["gpu_alloc_bytes"] = max(0, alloc)
            record["gpu_net_bytes"] = net
            record["gpu_live_at_peak_bytes"] = at_peak
        file_record["lines"] = [records[n] for n in sorted(records)]
    document["files"] = dict(sorted(files.items()))
    document["gpu"] = run_fields(raw_gpu, history=bool(history))


def run_fields(raw_gpu: Mapping[str, Any], *, history: bool) -> dict[str, Any]:
    stats = raw_gpu.get("stats", {})
    devices = list(raw_gpu.get("devices", ()))
    torch = raw_gpu.get("torch") or None
    observed = stats.get("util_observed_ns", 0)
    if stats.get("device_memory_readings", 0) > 0:
        memory_source = "device"
    elif stats.get("process_memory_readings", 0) > 0:
        memory_source = "process"
    elif stats.get("torch_ticks", 0) > 0:
        memory_source = "torch_reserved"
    else:
        memory_source = None
    if history:
        tracked = "torch_history"
    elif stats.get("torch_ticks", 0) > 0:
        tracked = "torch_ticks"
    else:
        tracked = "nvml_ticks" if memory_source in ("process", "device") else None
    peak = stats.get("peak_bytes", -1)
    out: dict[str, Any] = {
        "device_name": devices[0] if devices else None,
        "devices": devices,
        "peak_bytes": peak if peak >= 0 else None,
        "util_mean_pct": (100.0 * stats.get("busy_ns", 0) / observed) if observed > 0 else None,
        "util_s": stats.get("busy_ns", 0) / _NS_PER_S if stats.get("util_readings", 0) else None,
        "memory_source": memory_source,
        "alloc_source": tracked,
        "poll_interval_s": stats.get("poll_interval_ns", 0) / _NS_PER_S,
        "readings": stats.get("readings", 0),
        "unavailable": [f"{e.query}: {e.code} ({e.polls} polls)"
                        for e in (GpuError(*row) for row in raw_gpu.get("errors", ()))],
    }
    if raw_gpu.get("unavailable"):
        out["unavailable"].insert(0, f"nvml: {raw_gpu['unavailable']}")
    if torch is not None:
        out["torch"] = {k: torch[k] for k in ("max_allocated_bytes", "max_reserved_bytes",
                                              "allocated_end_bytes", "reserved_end_bytes")
                        if k in torch}
        if "history_error" in torch:
            out["unavailable"].append(f"torch: {torch['history_error']}")
        elif "history_complete" in torch and not torch["history_complete"]:
            out["unavailable"].append("torch: allocation history incomplete; per-tick figures used")
    return out
