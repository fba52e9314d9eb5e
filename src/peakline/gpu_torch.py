"""PyTorch's CUDA caching allocator, read without importing torch (docs/gpu.md).

``TorchCudaProbe`` is handed to the core, whose aggregator calls it once per tick (20 ms, GIL
held, on the aggregator thread). It answers ``None`` until the program has imported torch AND
torch has initialised CUDA, then ``(allocated_bytes, reserved_bytes)`` summed over devices
(``torch.cuda.memory_allocated`` / ``memory_reserved``); the core charges the changes to the
line the main thread is on.

A tick is coarse for allocations: ``x = torch.empty(2**31, device="cuda")`` takes a millisecond,
so the next tick usually finds the program on a later line. For exact per-line figures the
probe also arms PyTorch's own allocation history
(``torch.cuda.memory._record_memory_history``, Python stacks only) as soon as it sees torch
imported — through ``torch.cuda._lazy_call``, so that it takes effect the moment CUDA is
initialised, before the first allocation. ``finish()`` takes the history at the end
(``torch.cuda.memory._snapshot()``), turns it off again, and replays it: every allocation is
charged to its innermost frame in a reported file; frees go back to the allocating line.
Anything missing (older torch, history unsupported, trace ring overflowed) is recorded in the
result and the per-tick figures stand.

Nothing here may raise into the core: every torch call is guarded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
# Annotations only: no typing import while the program runs (see peakline/api.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Trace ring size: enough for a few thousand training steps of a mid-size model; each entry
# keeps a Python stack. When it overflows the oldest events are lost and the replay is marked
# incomplete (the per-tick figures are used instead).
HISTORY_MAX_ENTRIES = 200_000


class TorchCudaProbe:
    def __init__(self, *, history: bool = True) -> None:
        self.active = False          # torch answered at least once
        self._history_wanted = history
        self._history_armed = False  # _lazy_call issued
        self.history_error: str | None = None
        self._history_baseline: int | None = None  # allocated bytes when the history began
        self._allocated_at_start: int | None = None  # ... when profiling began (first call)

    def __call__(self) -> tuple[int, int] | None:
        result = self._read()
        if self._allocated_at_start is None:
            self._allocated_at_start = result[0] if result else 0
        return result

    def _read(self) -> tuple[int, int] | None:
        torch = sys.modules.get("torch")
        if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
            return None  # not imported, or still being imported by the program
        try:
            cuda = torch.cuda
            if self._history_wanted and not self._history_armed:
                cuda._lazy_call(self._start_history)
                self._history_armed = True
            if not cuda.is_initialized():
                return None
            allocated = reserved = 0
            for device in range(cuda.device_count()):
                allocated += int(cuda.memory_allocated(device))
                reserved += int(cuda.memory_reserved(device))
        except Exception:  # noqa: BLE001 - a probe never raises into the core
            return None
        self.active = True
        return (allocated, reserved)

    def _start_history(self) -> None:
        torch = sys.modules.get("torch")
        try:
            torch.cuda.memory._record_memory_history(
                enabled="all", context="alloc", stacks="python", max_entries=HISTORY_MAX_ENTRIES)
            cuda = torch.cuda
            self._history_baseline = sum(int(cuda.memory_allocated(d))
                                         for d in range(cuda.device_count()))
        except Exception as exc:  # noqa: BLE001
            self.history_error = f"allocation history unavailable: {exc}"

    def finish(self, is_reported: Callable[[str], bool]) -> dict[str, Any] | None:
        """At stop: run-wide PyTorch figures, and the per-line replay of the allocation
        history when there is one. None when torch never ran on CUDA."""
        torch = sys.modules.get("torch")
        if torch is None or not self.active:
            return None
        out: dict[str, Any] = {}
        try:
            cuda = torch.cuda
            devices = range(cuda.device_count())
            out["allocated_end_bytes"] = sum(int(cuda.memory_allocated(d)) for d in devices)
            out["reserved_end_bytes"] = sum(int(cuda.memory_reserved(d)) for d in devices)
            out["max_allocated_bytes"] = sum(int(cuda.max_memory_allocated(d)) for d in devices)
            out["max_reserved_bytes"] = sum(int(cuda.max_memory_reserved(d)) for d in devices)
        except Exception:  # noqa: BLE001
            pass
        if self._history_armed and self.history_error is None:
            try:
                snapshot = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception as exc:  # noqa: BLE001
                self.history_error = f"allocation history unreadable: {exc}"
            else:
                replay = replay_history(snapshot.get("device_traces") or [], is_reported)
                # Complete only if nothing was allocated between the start of profiling and
                # the start of the history, and the replay accounts for every byte allocated
                # since (events lost from the ring break this).
                expected = out.get("allocated_end_bytes", -1) - (self._history_baseline or 0)
                if (replay["history_live_end_bytes"] != expected
                        or self._history_baseline != (self._allocated_at_start or 0)):
                    replay["history_complete"] = False
                out.update(replay)
        if self.history_error:
            out["history_error"] = self.history_error
        return out


def replay_history(device_traces: list, is_reported: Callable[[str], bool]) -> dict[str, Any]:
    """Per-line allocated / still-held / held-at-peak bytes from PyTorch trace entries
    (``{"action", "addr", "size", "frames": [{"filename", "line", "name"}, ...]}``, frames
    innermost first). Returns ``{"lines": [(file, lineno, alloc, net, live_at_peak)],
    "history_complete": bool, "history_peak_bytes": int, "history_live_end_bytes": int}``."""
    lines: dict[tuple[str, int], list[int]] = {}  # [alloc, net, net_at_epoch_start, epoch]
    live: dict[tuple[int, int], tuple[tuple[str, int] | None, int]] = {}
    total = peak = 0
    epoch = 1
    complete = True
    for device, trace in enumerate(device_traces):
        for entry in trace:
            action = entry.get("action")
            if action == "alloc":
                key = _charged_line(entry.get("frames") or (), is_reported)
                size = int(entry.get("size", 0))
                live[(device, entry.get("addr"))] = (key, size)
                total += size
                if key is not None:
                    acc = _touch(lines, key, epoch)
                    acc[0] += size
                    acc[1] += size
                if total > peak:
                    peak = total
                    epoch += 1
            elif action == "free_completed":
                block = live.pop((device, entry.get("addr")), None)
                if block is None:
                    complete = False  # allocated before the history began (or ring overflow)
                    continue
                key, size = block
                total -= size
                if key is not None:
                    _touch(lines, key, epoch)[1] -= size
    out = [(f, n, acc[0], acc[1], acc[2] if acc[3] == epoch else acc[1])
           for (f, n), acc in sorted(lines.items())]
    return {"lines": out, "history_complete": complete, "history_peak_bytes": peak,
            "history_live_end_bytes": total}


def _touch(lines: dict, key: tuple[str, int], epoch: int) -> list[int]:
    acc = lines.get(key)
    if acc is None:
        acc = lines[key] = [0, 0, 0, epoch]
    elif acc[3] != epoch:
        acc[2] = acc[1]
        acc[3] = epoch
    return acc


def _charged_line(frames, is_reported: Callable[[str], bool]) -> tuple[str, int] | None:
    for frame in frames:  # innermost first: the innermost reported frame wins
        filename = frame.get("filename", "")
        if filename and is_reported(filename):
            return (filename, max(0, int(frame.get("line", 0))))
    return None
