"""CPU attribution against programs whose true answer is known (tests/programs/).

Sampling is weight-carrying: each sample carries the thread CPU time since that thread's
previous sample, so per-line totals are exact up to the time after a thread's last sample
(at most one interval, 10 ms, per thread). Tolerances below are sized from that bound plus
the scheduler-tick granularity of CPU timers, not from repeated runs.
"""

from __future__ import annotations

import json
import sys

import pytest

from peakline.session import free_threaded_build
from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline


@pytest.fixture(scope="module")
def cpu_split(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cpu_split")
    res = run_peakline(["--no-report", str(PROGRAMS / "cpu_split.py")], tmp)
    assert res.returncode == 0, res.stderr
    return res.profile()


def test_pure_python_loop_is_python_time(cpu_split):
    path = PROGRAMS / "cpu_split.py"
    rec = line_record(cpu_split, path, marked_lines(path)["python_loop"])
    assert cpu_s(rec) > 0.03
    assert rec["cpu_python_s"] / cpu_s(rec) >= 0.85, rec


def test_calling_python_functions_is_python_time(cpu_split):
    # 3.10 builds and releases the callee's frame in C, outside the eval loop, while the
    # caller's current op is a call: that is still Python time.
    path = PROGRAMS / "cpu_split.py"
    rec = line_record(cpu_split, path, marked_lines(path)["python_calls"])
    assert cpu_s(rec) > 0.03
    assert rec["cpu_python_s"] / cpu_s(rec) >= 0.85, rec


@pytest.mark.parametrize("name", ["native_hash", "native_sort"])
def test_builtin_and_extension_calls_are_native_time(cpu_split, name):
    path = PROGRAMS / "cpu_split.py"
    rec = line_record(cpu_split, path, marked_lines(path)[name])
    assert cpu_s(rec) > 0.1, rec
    assert rec["cpu_native_s"] / cpu_s(rec) >= 0.8, rec


def test_sleep_is_wait_time_not_cpu(cpu_split):
    path = PROGRAMS / "cpu_split.py"
    rec = line_record(cpu_split, path, marked_lines(path)["sleep"])
    # The 0.8 s sleep is off-CPU time: waiting, and on a loaded machine some run delay too (the
    # wake-ups runnable but not scheduled; with a compiler running beside the test, wait alone
    # once read 0.686 s).
    assert 0.7 <= rec["wait_s"] + rec.get("run_delay_s", 0.0) <= 1.0, rec
    assert rec["wait_s"] >= 0.5, rec
    assert cpu_s(rec) < 0.03, rec


def test_totals_add_up(cpu_split):
    totals = cpu_split["totals"]
    line_sum = {k: 0.0 for k in ("cpu_python_s", "cpu_native_s", "cpu_system_s", "wait_s")}
    for f in cpu_split["files"].values():
        for rec in f["lines"]:
            for k in line_sum:
                line_sum[k] += rec[k]
    for k, v in line_sum.items():
        assert v == pytest.approx(totals[k] - 0.0, abs=totals["unattributed_s"] + 1e-6), k
    sampled = sum(totals[k] for k in line_sum)
    # Everything the program did (~1.5 s CPU + 0.8 s sleep) is in the profile, and the
    # profile cannot hold more time than elapsed per thread.
    assert 1.5 <= sampled <= cpu_split["elapsed_s"] * 1.05


@pytest.mark.parametrize("mode", ["python", "native", "short"])
def test_threads_are_sampled_by_their_own_cpu_time(tmp_path, mode):
    """Three threads doing 4:2:1 units of work: the profiler's per-function CPU matches each
    thread's own measured CPU time (time.thread_time) and the 4:2:1 split. "short": ten
    rounds of three new threads of ~48, 24 and 12 ms — a thread's CPU counts from its birth
    to its end, not from the next tick to its last sample."""
    truth_file = tmp_path / "truth.json"
    res = run_peakline(["--no-report", str(PROGRAMS / "threads_421.py"), mode, str(truth_file)],
                       tmp_path)
    assert res.returncode == 0, res.stderr
    truth = json.loads(truth_file.read_text())
    profile = res.profile()
    funcs = {f["name"]: f for f in profile["files"][str(PROGRAMS / "threads_421.py")]["functions"]}
    measured = {name: cpu_s(funcs[name]) for name in ("weight4", "weight2", "weight1")}
    for name, true_s in truth.items():
        # The CPU after a thread's last sample is not seen: one interval (10 ms), two when a
        # loaded machine delays the tick-driven timer expiry; plus 5%.
        assert measured[name] == pytest.approx(true_s, abs=0.02 + 0.05 * true_s), (name, measured, truth)
    # Shares against the shares the threads really burned: the work is 4:2:1 units, but what
    # a unit costs varies with contention (seen on 3.13: 62:25:13), and that is the program,
    # not the profiler.
    total = sum(measured.values())
    true_total = sum(truth[name] for name in measured)
    for name in ("weight4", "weight2", "weight1"):
        assert measured[name] / total == pytest.approx(truth[name] / true_total, abs=0.03), (
            measured, truth)
    names = {t["name"] for t in profile["threads"]}
    assert {"weight4", "weight2", "weight1", "MainThread"} <= names


@pytest.mark.parametrize("n, iterations", [(400, 30_000), (100, 150_000), (40, 400_000),
                                           (10, 1_500_000)])
def test_short_lived_threads_cpu_is_counted(tmp_path, n, iterations):
    """Thread-per-task: N threads in sequence, each from ~0.7 ms to ~40 ms of CPU. The CPU on
    the program's lines matches the process CPU time of the loop (time.process_time, which
    counts every thread), within 30 ms + 10%: what is not seen is the main thread's time
    after its last sample and each thread's last microseconds, after its exit tail is read
    (cpu/thread_exit_tail.h)."""
    if n == 400 and free_threaded_build():
        # A free-threaded 3.14 spends ~0.25 ms of CPU per thread after the thread's last Python
        # code (tearing its thread state down: 0.05 ms with the GIL); without the exit tail 400
        # threads of ~1 ms lose ~25% of the loop's CPU there (3.14.0rc1t: 0.60 s of 0.80 s).
        # The exit tail's effect there is not measured (docs/architecture.md).
        pytest.skip("sub-millisecond threads on free-threaded CPython: not yet measured with exit tails")
    path = PROGRAMS / "threads_lifetime.py"
    truth_file = tmp_path / "truth.json"
    res = run_peakline(["--no-report", "--cpu-only", str(path), str(n), str(iterations),
                        str(truth_file)], tmp_path)
    assert res.returncode == 0, res.stderr
    truth = json.loads(truth_file.read_text())["loop_cpu_s"]
    profile = res.profile()
    lines = profile["files"][str(path)]["lines"]
    measured = sum(cpu_s(rec) for rec in lines)
    assert measured == pytest.approx(truth, abs=0.03 + 0.1 * truth), (measured, truth)
    # The work is on the work line when a thread got a sample; a thread that ended before its
    # first one is charged to where the main thread was then: the line that started it (the
    # thread ran while start() waited for the GIL) or joined it. Either way CPU, not wait.
    marks = marked_lines(path)
    by_line = {rec["lineno"]: cpu_s(rec) for rec in lines}
    funcs = {f["name"]: cpu_s(f) for f in profile["files"][str(path)]["functions"]}
    charged = (funcs.get("work", 0.0) + by_line.get(marks["start"], 0.0)
               + by_line.get(marks["join"], 0.0))
    assert charged >= 0.8 * truth, (by_line, truth)
    if iterations >= 400_000:  # threads of ~10 ms and more: most of it on the work itself
        assert funcs.get("work", 0.0) >= 0.6 * truth, (funcs, by_line, truth)


@pytest.mark.parametrize("mode", [[], ["--cpu-only"]], ids=["full", "cpu-only"])
def test_cpu_a_thread_spends_tearing_itself_down_is_counted(tmp_path, mode):
    """Twenty threads each keep an object in a threading.local whose __del__ burns 20 ms of CPU
    when the interpreter clears the thread's data: after the thread's last Python frame, with
    its sampling signal blocked. That CPU (0.4 s of the loop's ~0.45 s) is read at the thread's
    exit and counted where its end was: each thread's own CPU includes it, and the file's
    lines add up to the loop's process CPU time."""
    path = PROGRAMS / "thread_local_teardown.py"
    truth_file = tmp_path / "truth.json"
    res = run_peakline(["--no-report", *mode, str(path), "20", "0.02", str(truth_file)],
                       tmp_path)
    assert res.returncode == 0, res.stderr
    truth = json.loads(truth_file.read_text())
    assert truth["teardowns"] == 20 and truth["teardown_cpu_s"] >= 0.4
    profile = res.profile()
    lines = profile["files"][str(path)]["lines"]
    measured = sum(cpu_s(rec) for rec in lines)
    loop = truth["loop_cpu_s"]
    assert measured == pytest.approx(loop, abs=0.03 + 0.1 * loop), (measured, truth)
    workers = [t for t in profile["threads"] if (t["name"] or "").startswith("Thread-")]
    assert len(workers) == 20, profile["threads"]
    assert all(t["cpu_s"] >= 0.02 for t in workers), workers


def test_wait_inside_a_gil_holding_bytecode_stays_on_its_line(tmp_path):
    """A BINARY_OP that copies hundreds of MB holds the GIL; the main thread shares its CPU with
    a busy process, so it waits for the CPU inside that bytecode. The tick that measures wait
    needs the GIL and gets it only on the next line: the wait must still be charged to the
    copy line (each sample charges the off-CPU time before it to its own line)."""
    import os
    import subprocess
    import sys

    path = PROGRAMS / "gil_hold_wait.py"
    cpu = max(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c",
                             f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        truth_file = tmp_path / "truth.json"
        res = run_peakline(["--no-report", "--cpu-only", str(path), str(cpu), str(truth_file)],
                           tmp_path)
    finally:
        busy.kill()
        busy.wait()
    assert res.returncode == 0, res.stderr
    off = json.loads(truth_file.read_text())["off_cpu_s"]
    assert off > 0.3, off  # the contention happened
    profile = res.profile()
    marks = marked_lines(path)
    # Off-CPU time: waiting for the CPU is run delay now, split off wait (test_run_delay.py).
    copy = line_record(profile, path, marks["copy"])
    copy_wait = copy["wait_s"] + copy.get("run_delay_s", 0.0)
    trivial = [r for r in profile["files"][str(path)]["lines"] if r["lineno"] == marks["trivial"]]
    trivial_wait = trivial[0]["wait_s"] + trivial[0].get("run_delay_s", 0.0) if trivial else 0.0
    # What is left for the next line: the time from the copy's last sample to the tick.
    assert copy_wait >= 0.7 * off, (copy_wait, trivial_wait, off)
    assert trivial_wait <= 0.15 * off, (copy_wait, trivial_wait, off)


def test_cpu_of_a_thread_without_user_frames_goes_to_where_the_main_thread_was(tmp_path):
    """Workers running only library code (builtin sum) have their CPU stitched under the main
    thread's stack as it was when each sample was taken — the start/join lines — not as it is
    at the tick that drains them (often the sleep that follows)."""
    path = PROGRAMS / "library_worker.py"
    truth_file = tmp_path / "truth.json"
    res = run_peakline(["--no-report", "--cpu-only", str(path), str(truth_file)], tmp_path)
    assert res.returncode == 0, res.stderr
    truth = json.loads(truth_file.read_text())["loop_cpu_s"]
    profile = res.profile()
    marks = marked_lines(path)
    by_line = {rec["lineno"]: cpu_s(rec) for rec in profile["files"][str(path)]["lines"]}
    waited_on = by_line.get(marks["start"], 0.0) + by_line.get(marks["join"], 0.0)
    assert waited_on == pytest.approx(truth, abs=0.03 + 0.1 * truth), (by_line, truth)
    assert by_line.get(marks["sleep"], 0.0) <= 0.02 + 0.02 * truth, (by_line, truth)
