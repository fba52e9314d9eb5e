"""Runs `python -m peakline ...` in a subprocess that is always reaped, and reads profiles.

Shared by the integration tests. The subprocess gets a hard timeout: a hung profiler fails
the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
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
                 env: dict[str, str] | None = None, expect_fault: bool = False) -> Result:
    out = tmp_path / outfile
    cmd = [sys.executable, "-m", "peakline", "run", "--outfile", str(out), *args]
    # Unless a test makes its program fault on purpose (expect_fault), `peakline run` dying of
    # a fault is a defect: the failure then shows every thread's Python stack (faulthandler)
    # and, from the core, the native ones.
    full_env = {**os.environ, **(env or {})}
    diagnose = {}
    if not expect_fault:
        full_env = {"PYTHONFAULTHANDLER": "1", **full_env}
        diagnose["preexec_fn"] = _allow_core_dump
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env=full_env, **diagnose)
    stderr = proc.stderr
    if -proc.returncode in _FAULTS and not expect_fault:
        every, faulting = crash_backtraces(tmp_path)
        # All of it in the test's captured output (pytest shows it with the failure); the
        # faulting thread's native stack also at the end of stderr, which the tests' assertion
        # messages show the last few thousand characters of.
        print(f"peakline run died of signal {-proc.returncode}; its stderr:\n{proc.stderr}\n"
              f"--- native backtraces ---\n{every}")
        stderr += f"\n--- the faulting thread's native backtrace ---\n{faulting}"
    return Result(proc.returncode, proc.stdout, stderr, out)


_FAULTS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}


def _allow_core_dump() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


def crash_backtraces(folder: Path) -> tuple[str, str]:
    """(every thread's native backtrace, the faulting thread's) from the core file a crash
    left in ``folder`` (the kernel's default core_pattern), or why there is none."""
    cores = sorted(folder.glob("core*"), key=lambda p: p.stat().st_mtime)
    if not cores:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
        why = f"[no core file in {folder}; core_pattern is {pattern!r}]"
        return why, why
    if shutil.which("gdb") is None:
        why = f"[core file {cores[-1]}; gdb is not installed]"
        return why, why
    mark = "=== the faulting thread ==="
    try:
        proc = subprocess.run(
            ["gdb", "-batch", "-nx", "-ex", "set print frame-arguments none",
             "-ex", "thread apply all bt 30", "-ex", f"echo {mark}\\n", "-ex", "bt 16",
             sys.executable, str(cores[-1])],
            capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        why = f"[gdb timed out on {cores[-1]}]"
        return why, why
    every, _, faulting = proc.stdout.partition(mark)
    return every, faulting or proc.stdout[-3000:] + proc.stderr[-1000:]


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


def holds_block(measured: int | None, block: int) -> bool:
    """Whether a line's memory figure is that of a large block it holds, as it should be.

    A block much larger than the sampling interval is counted exactly (200 MiB at 512 KiB:
    p = 1 - e^-400), but the line also keeps the block's small Python object (a numpy array's
    96 bytes, a bytearray's 56), sampled about once in 5,500 runs, when it weighs one interval.
    Equality with the block alone was that flake; one object cannot give a second sample."""
    return measured is not None and block <= measured < block + (1 << 20)


def cpu_s(rec: dict) -> float:
    return rec["cpu_python_s"] + rec["cpu_native_s"] + rec["cpu_system_s"]
