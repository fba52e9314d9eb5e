"""Interleaved measurement: one subprocess per (repetition, workload, tool).

Within a repetition every workload is run once under every tool, and the tool order rotates
from one repetition to the next, so slow drifts of the machine (thermal, noisy neighbours, page
cache) spread over all tools instead of landing on one. Wall time is time.perf_counter() around
the whole subprocess: interpreter start-up, the profiler's own set-up and its output writing are
all part of what a user waits for. Peak RSS comes from wait4()'s rusage (largest process in the
tree that was reaped), and the size of whatever the tool wrote is recorded for issue 6's cost
table.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import tools as tools_mod
from . import workloads as workloads_mod


@dataclasses.dataclass
class Measurement:
    workload: str
    tool: str
    repetition: int  # -1 for warm-up runs (not recorded)
    wall_s: float
    exit_code: int
    max_rss_kb: int
    output_bytes: int
    stderr_tail: str = ""


def _run_once(argv: list[str], scratch: pathlib.Path, timeout_s: float) -> tuple[float, int, int, str]:
    stderr_path = scratch / "stderr.txt"
    with open(stderr_path, "wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr, cwd=scratch)
        timer = threading.Timer(timeout_s, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
    tail = stderr_path.read_text(errors="replace")[-2000:] if process.returncode else ""
    return wall, process.returncode, usage.ru_maxrss, tail


def _output_bytes(scratch: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in scratch.rglob("*")
               if p.is_file() and p.name != "stderr.txt")


def preflight(env, workload, tools: list, *, timeout_s: float) -> dict[str, str]:
    """Runs `workload` once, small, under every tool; returns {tool name: stderr} of failures.

    SCALE 0.05 (~0.1 s): long enough for py-spy to attach, which fails on programs that exit
    first.

    A broken install (say, an extension that does not import) then costs seconds, not a
    whole benchmark run of failed measurements.
    """
    failures = {}
    for tool in tools:
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="peakline-bench-"))
        try:
            _, code, _, tail = _run_once(tool.build(env, workload.args(0.05), scratch),
                                         scratch, timeout_s)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if code != 0:
            failures[tool.name] = f"exit {code}: {tail.strip()[-1500:]}"
    return failures


def measure(env, workloads: list, tools: list, *, scale: float, repetitions: int,
            warmup: int, timeout_s: float, verbose: bool = True) -> list[Measurement]:
    results: list[Measurement] = []
    schedule = [(-1 - i) for i in range(warmup)] + list(range(repetitions))
    for repetition in schedule:
        for workload in workloads:
            shift = repetition % len(tools)
            order = tools[shift:] + tools[:shift]
            if repetition < 0:
                order = [t for t in tools if t.name == "plain"] or tools[:1]
            for tool in order:
                scratch = pathlib.Path(tempfile.mkdtemp(prefix="peakline-bench-"))
                try:
                    argv = tool.build(env, workload.args(scale), scratch)
                    wall, code, rss, tail = _run_once(argv, scratch, timeout_s)
                    output = _output_bytes(scratch)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                if repetition < 0:
                    continue
                results.append(Measurement(workload.name, tool.name, repetition, wall, code,
                                           rss, output, tail))
                if verbose:
                    status = "ok" if code == 0 else f"EXIT {code}"
                    print(f"[bench] rep {repetition + 1}/{repetitions} {workload.name:<15} "
                          f"{tool.name:<13} {wall:7.2f} s  {status}", file=sys.stderr, flush=True)
    return results
