"""Run delay (runnable, not scheduled) is its own time category, not wait.

tests/programs/run_delay.py runs a pure-Python loop thread pinned to a CPU that N busy
processes share, beside a sleeping thread. The known answers: the loop's off-CPU time is run
delay (about SECONDS * N/(N+1) on an otherwise idle CPU; the kernel's own count, read by the
thread itself, is the exact figure) and its wait is about 0; the sleeper's off-CPU time is
wait, with almost no run delay.

Tolerances: the profile's run delay of a thread is the kernel's, split per tick over the
stacks charged in that tick, so the loop's lines together match the kernel's count up to the
thread's start and end (a tick, 20 ms, on each side) and the moments between the wall-clock
observation and the schedstat read; 0.1 s + 10% covers that with room for a loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from peakline_proc import PROGRAMS, marked_lines, run_peakline

N_BUSY = 2
SECONDS = 1.5


@pytest.fixture(scope="module")
def contended(tmp_path_factory):
    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("this kernel has no schedstat (CONFIG_SCHED_INFO)")
    tmp = tmp_path_factory.mktemp("run_delay")
    cpu = max(os.sched_getaffinity(0))
    busy = [subprocess.Popen([sys.executable, "-c",
                              f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
            for _ in range(N_BUSY)]
    try:
        truth_file = tmp / "truth.json"
        res = run_peakline(["--no-report", "--cpu-only", str(PROGRAMS / "run_delay.py"),
                            str(cpu), str(SECONDS), str(truth_file)], tmp)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert res.returncode == 0, res.stderr
    return res.profile(), json.loads(truth_file.read_text())


def _lines(profile, names):
    path = PROGRAMS / "run_delay.py"
    marks = marked_lines(path)
    wanted = {marks[n] for n in names}
    return [r for r in profile["files"][str(path)]["lines"] if r["lineno"] in wanted]


def test_a_spinning_thread_on_a_contended_cpu_has_run_delay_not_wait(contended):
    profile, truth = contended
    loop = truth["loop"]
    # The contention happened: N processes on the CPU leave the loop at most 1/(N+1) of it.
    assert loop["run_delay_s"] >= 0.8 * loop["wall_s"] * N_BUSY / (N_BUSY + 1), loop
    lines = _lines(profile, ("spin", "spin_body"))
    run_delay = sum(r["run_delay_s"] for r in lines)
    wait = sum(r["wait_s"] for r in lines)
    assert run_delay == pytest.approx(loop["run_delay_s"], abs=0.1 + 0.1 * loop["run_delay_s"]), \
        (lines, loop)
    assert wait <= 0.05 + 0.05 * loop["wall_s"], (lines, loop)
    thread = next(t for t in profile["threads"] if t["name"] == "loop")
    assert thread["run_delay_s"] == pytest.approx(loop["run_delay_s"],
                                                  abs=0.1 + 0.1 * loop["run_delay_s"]), thread
    assert thread["wait_s"] <= 0.1 + 0.05 * loop["wall_s"], thread


def test_a_sleeping_thread_has_wait_and_almost_no_run_delay(contended):
    profile, truth = contended
    sleeper = truth["sleeper"]
    (line,) = _lines(profile, ("sleep",))
    assert line["wait_s"] == pytest.approx(sleeper["wall_s"], abs=0.1), line
    assert line["run_delay_s"] <= 0.02 + sleeper["run_delay_s"], (line, sleeper)


def test_totals_and_categories_add_up(contended):
    profile, _ = contended
    totals = profile["totals"]
    lines = [r for f in profile["files"].values() for r in f["lines"]]
    for key in ("wait_s", "run_delay_s"):
        stacks = sum(s[key] for s in profile["stacks"]["samples"])
        assert totals[key] == pytest.approx(stacks, abs=1e-6), key
        assert sum(r[key] for r in lines) <= totals[key] + 1e-6, key
    loop = next(t for t in profile["threads"] if t["name"] == "loop")
    assert totals["run_delay_s"] >= loop["run_delay_s"] - 1e-6
