"""speedscope export: the profile's sampled stacks in speedscope's file format.

Spec: https://www.speedscope.app/file-format-schema.json (jlfwong/speedscope
``src/lib/file-format-spec.ts``). We write one ``"sampled"`` profile per thread, unit
``seconds``: each distinct stack of ``profile.stacks`` is one sample, root first, weighted by
its sampled time (CPU + wait + run delay), so a thread's weights add up to its sampled time. Frames are
shared between the profiles; a frame is (file, function, line), so the flame graph is as
fine-grained as the line report. A stack with no Python frame (a native thread sampled before
any Python frame was known) is charged to a ``(no Python frame)`` pseudo-frame.

When the profile has memory a last profile, unit ``bytes``, weighs each reported line by the
bytes it allocated (sampled estimate). The profile file keeps memory per line, not per stack,
so these "stacks" are two frames deep: the function (at its first line), then the line. Use
speedscope's "Left Heavy" view to rank them.
"""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

from peakline import __version__
from peakline.model.profile import Profile

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
NO_PYTHON_FRAME = "(no Python frame)"


class _Frames:
    """speedscope's shared frame table, deduplicated by (name, file, line)."""

    def __init__(self) -> None:
        self.table: list[dict[str, Any]] = []
        self._index: dict[tuple, int] = {}

    def get(self, name: str, file: str | None = None, line: int | None = None) -> int:
        key = (name, file, line)
        index = self._index.get(key)
        if index is None:
            index = len(self.table)
            frame: dict[str, Any] = {"name": name}
            if file is not None:
                frame["file"] = file
            if line:
                frame["line"] = line
            self.table.append(frame)
            self._index[key] = index
        return index


def _frame_name(function: str, filename: str, lineno: int) -> str:
    """``work (app.py:12)``: the line is part of the name because the flame chart shows only
    names, and two lines of one function are two frames here."""
    base = os.path.basename(filename) or filename
    return f"{function} ({base}:{lineno or '?'})"


def _thread_label(profile: Profile, tid: int) -> str:
    for thread in profile.threads:
        if thread.tid == tid:
            name = thread.name or ("native thread" if not thread.python else "thread")
            return f"{name} (tid {tid})"
    return f"tid {tid}"


def to_speedscope(profile: Profile) -> dict[str, Any]:
    """The speedscope document as a JSON-ready dict."""
    frames = _Frames()
    ids = [frames.get(_frame_name(f[1], f[0], f[3]), f[0], f[3]) for f in profile.stacks.frames]
    by_thread: dict[int, tuple[list[list[int]], list[float]]] = {}
    for sample in profile.stacks.samples:
        weight = sample.total_s
        if weight <= 0:
            continue
        stack = [ids[i] for i in sample.frames] or [frames.get(NO_PYTHON_FRAME)]
        stacks, weights = by_thread.setdefault(sample.thread, ([], []))
        stacks.append(stack)
        weights.append(weight)
    profiles = []
    for tid in sorted(by_thread):
        stacks, weights = by_thread[tid]
        profiles.append({"type": "sampled", "name": f"{_thread_label(profile, tid)}: time",
                         "unit": "seconds", "startValue": 0, "endValue": sum(weights),
                         "samples": stacks, "weights": weights})
    if profile.has_memory:
        memory = _allocation_profile(profile, frames)
        if memory["samples"]:
            profiles.append(memory)
    return {"$schema": SCHEMA, "version": "0.0.1", "exporter": f"peakline {__version__}",
            "name": profile.program, "activeProfileIndex": 0,
            "shared": {"frames": frames.table}, "profiles": profiles}


def _allocation_profile(profile: Profile, frames: _Frames) -> dict[str, Any]:
    stacks, weights = [], []
    for filename, record in profile.files.items():
        functions = sorted(record.functions, key=lambda f: f.lineno)
        for line in record.lines:
            if line.alloc_bytes <= 0:
                continue
            owner = None  # the function that starts closest above the line
            for function in functions:
                if function.lineno <= line.lineno:
                    owner = function
            name = owner.name if owner is not None else "<module>"
            first = owner.lineno if owner is not None else 0
            stacks.append([frames.get(_frame_name(name, filename, first), filename, first),
                           frames.get(_frame_name(name, filename, line.lineno), filename,
                                      line.lineno)])
            weights.append(line.alloc_bytes)
    return {"type": "sampled", "name": "allocated bytes by line (no call stacks)",
            "unit": "bytes", "startValue": 0, "endValue": sum(weights),
            "samples": stacks, "weights": weights}


def render(profile: Profile, stream: TextIO) -> None:
    """Write the speedscope JSON of ``profile`` to ``stream``."""
    json.dump(to_speedscope(profile), stream, separators=(",", ":"), allow_nan=False)
    stream.write("\n")
