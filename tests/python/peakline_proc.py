"""Runs `python -m peakline ...` in a subprocess that is always reaped, and reads profiles.

Shared by the integration tests. The subprocess gets a hard timeout: a hung profiler fails
the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from peakline.session import free_threaded_build

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"

# Memory profiling is off on a free-threaded CPython (3.14t): a test of memory figures is
# skipped there (CPU profiling, and the one line saying so, are tested in test_free_threaded).
needs_memory = pytest.mark.skipif(
    free_threaded_build(), reason="memory profiling is not available on free-threaded CPython")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    profile_path: Path

    def profile(self) -> dict:
        return json.loads(self.profile_path.read_text())


def run_peakline(args: list[str], tmp_path: Path, *, outfile: str = "profile.json",
                 input: str | None = None, timeout: float = 120,
                 env: dict[str, str] | None = None) -> Result:
    out = tmp_path / outfile
    cmd = [sys.executable, "-m", "peakline", "run", "--outfile", str(out), *args]
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env={**os.environ, **(env or {})})
    return Result(proc.returncode, proc.stdout, proc.stderr, out)


def marked_lines(path: Path) -> dict[str, int]:
    """Line numbers of `# LINE name` markers in a calibration program."""
    marks = {}
    for i, text in enumerate(path.read_text().splitlines(), start=1):
        if "# LINE " in text:
            marks[text.split("# LINE ", 1)[1].strip()] = i
    return marks


def line_record(profile: dict, path: Path, lineno: int) -> dict:
    lines = profile["files"][str(path)]["lines"]
    for rec in lines:
        if rec["lineno"] == lineno:
            return rec
    raise AssertionError(f"{path.name}:{lineno} has no samples; lines: "
                         f"{[r['lineno'] for r in lines]}")


def cpu_s(rec: dict) -> float:
    return rec["cpu_python_s"] + rec["cpu_native_s"] + rec["cpu_system_s"]
