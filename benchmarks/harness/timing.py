"""Interleaved measurement: one subprocess per (repetition, workload, tool).

Within a repetition every workload is run once under every tool, and the tool order rotates
from one repetition to the next, so slow drifts of the machine (thermal, noisy neighbours, page
cache) spread over all tools instead of landing on one. Wall time is time.perf_counter() around
the whole subprocess: interpreter start-up, the profiler's own set-up and its output writing are
all part of what a user waits for. Peak RSS comes from wait4()'s rusage (largest process in the
tree that was reaped), and the size of whatever the tool wrote is recorded for the cost table.
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
    timed_out: bool = False  # killed at the tool's run_timeout_s (or --timeout)


# A capped tool's process tree is killed past this resident size: Scalene 2.4's memory mode
# grew to 11 GiB within seconds here (machine: 23 GiB), on a machine shared with other work.
CAPPED_RSS_LIMIT_KB = 8 * 1024 * 1024


def _group_rss_kb(pgid: int) -> int:
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat: the process group
                continue
            total += int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)  # field 24: rss
        except (OSError, IndexError, ValueError):
            continue
    return total


GNU_TIME = pathlib.Path("/usr/bin/time")


def _watch_memory(pid: int, limit_kb: int, done: threading.Event) -> None:
    while not done.wait(0.25):
        if _group_rss_kb(pid) > limit_kb:
            _kill_group(pid)
            return


def _run_once(argv: list[str], scratch: pathlib.Path, timeout_s: float,
              env: dict | None = None,
              memory_limit_kb: int | None = None) -> tuple[float, int, int, str]:
    stderr_path = scratch / "stderr.txt"
    # ru_maxrss survives exec: a child forked (or vforked) from this harness starts with the
    # harness's own peak RSS as its floor, so wait4's figure would never fall below it. GNU
    # time forks the measured program from its own small process and reports that child's
    # peak, which is the program's own.
    maxrss_file = None
    if GNU_TIME.exists():
        fd, maxrss_file = tempfile.mkstemp(prefix="peakline-bench-maxrss-")
        os.close(fd)
        argv = [str(GNU_TIME), "-f", "%M", "-o", maxrss_file, *argv]
    with open(stderr_path, "wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr, cwd=scratch, env=env,
                                   start_new_session=True)
        # Kill the whole session: tools that re-exec or fork helpers leave no stragglers.
        timer = threading.Timer(timeout_s, _kill_group, (process.pid,))
        timer.start()
        done = threading.Event()
        if memory_limit_kb:
            threading.Thread(target=_watch_memory, args=(process.pid, memory_limit_kb, done),
                             daemon=True).start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
            done.set()
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
    max_rss_kb = usage.ru_maxrss
    if maxrss_file is not None:
        try:
            lines = pathlib.Path(maxrss_file).read_text().split()
            max_rss_kb = int(lines[-1]) if lines else max_rss_kb
            # time exits 128+N for a program killed by signal N (a kill of the whole group
            # kills time too and reads as -N already)
            if process.returncode > 128 and any(w == "signal" for w in lines):
                process.returncode = 128 - process.returncode
        except (OSError, ValueError):
            pass
        finally:
            os.unlink(maxrss_file)
    tail = stderr_path.read_text(errors="replace")[-2000:] if process.returncode else ""
    return wall, process.returncode, max_rss_kb, tail


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, 9)
    except OSError:
        pass


def _output_bytes(scratch: pathlib.Path) -> int:
    return sum(p.stat().st_size for p in scratch.rglob("*")
               if p.is_file() and p.name != "stderr.txt")


def preflight(envs, workload, tools: list, *, timeout_s: float) -> dict[str, str]:
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
            limit = min(timeout_s, tool.run_timeout_s or timeout_s)
            _, code, _, tail = _run_once(
                tool.build(envs.for_run(workload, tool), workload.args(0.05), scratch),
                scratch, limit,
                memory_limit_kb=CAPPED_RSS_LIMIT_KB if tool.run_timeout_s else None)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if code == -9 and tool.run_timeout_s:
            continue  # a capped tool hit its cap: slow, not broken
        if code != 0:
            failures[tool.name] = f"exit {code}: {tail.strip()[-1500:]}"
    return failures


def measure(envs, workloads: list, tools: list, *, scale: float, repetitions: int,
            warmup: int, timeout_s: float, verbose: bool = True) -> list[Measurement]:
    """`envs` (environment.BenchEnvs) gives each (workload, tool) its environment: the plain
    run and the tool runs of a workload use the same one (the workload's), except a tool
    registered in the torch environment on purpose."""
    results: list[Measurement] = []
    schedule = [(-1 - i) for i in range(warmup)] + list(range(repetitions))
    for repetition in schedule:
        for workload in workloads:
            shift = repetition % len(tools)
            order = tools[shift:] + tools[:shift]
            if repetition < 0:
                order = [t for t in tools if t.name == "plain"] or tools[:1]
            for tool in order:
                if (repetition >= 0 and tool.max_repetitions is not None
                        and repetition >= tool.max_repetitions):
                    continue
                limit = min(timeout_s, tool.run_timeout_s or timeout_s)
                scratch = pathlib.Path(tempfile.mkdtemp(prefix="peakline-bench-"))
                try:
                    argv = tool.build(envs.for_run(workload, tool), workload.args(scale),
                                      scratch)
                    wall, code, rss, tail = _run_once(
                        argv, scratch, limit,
                        memory_limit_kb=CAPPED_RSS_LIMIT_KB if tool.run_timeout_s else None)
                    output = _output_bytes(scratch)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                if repetition < 0:
                    continue
                timed_out = code == -9 and wall >= limit * 0.99
                if timed_out:
                    tail = f"killed after {limit:.0f} s (the tool's time limit)"
                elif code == -9 and tool.run_timeout_s:
                    # ru_maxrss may miss the grown process (a grandchild): name the cause only.
                    tail = (f"killed after {wall:.0f} s: past the harness's memory limit for "
                            f"capped tools ({CAPPED_RSS_LIMIT_KB / 2**20:.0f} GiB) or by the "
                            f"OOM killer\n" + tail)
                results.append(Measurement(workload.name, tool.name, repetition, wall, code,
                                           rss, output, tail, timed_out))
                if verbose:
                    status = "ok" if code == 0 else f"EXIT {code}"
                    print(f"[bench] rep {repetition + 1}/{repetitions} {workload.name:<15} "
                          f"{tool.name:<13} {wall:7.2f} s  {status}", file=sys.stderr, flush=True)
    return results
