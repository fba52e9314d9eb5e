"""Child processes are profiled and merged into the parent's profile (docs/processes.md).

Every program runs in a subprocess with a timeout (peakline_proc.run_peakline), so a hang in
a pool fails the test instead of the suite."""

from __future__ import annotations

import re

import subprocess
import sys

import pytest

from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline

POOL = PROGRAMS / "mp_pool.py"
VARIANTS = PROGRAMS / "mp_variants.py"
JOBLIB = PROGRAMS / "joblib_fit.py"


def _plain(program, *args, timeout=120):
    return subprocess.run([sys.executable, str(program), *args], capture_output=True,
                          text=True, timeout=timeout)


def _merged(profile):
    return [p for p in profile.get("processes", []) if p["merged"]]


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_pool_workers_work_shows_on_the_worker_function_lines(tmp_path, method):
    expected = _plain(POOL, method)
    result = run_peakline([str(POOL), method], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected.stdout  # same results as unprofiled
    profile = result.profile()
    workers = [p for p in _merged(profile) if p["pid"] != profile["pid"]]
    assert len(workers) >= 2, profile.get("processes")
    marks = marked_lines(POOL)
    loop = line_record(profile, POOL, marks["worker_loop"])
    body = line_record(profile, POOL, marks["worker_body"])
    worker_cpu = cpu_s(loop) + cpu_s(body)
    total_cpu = (profile["totals"]["cpu_python_s"] + profile["totals"]["cpu_native_s"]
                 + profile["totals"]["cpu_system_s"])
    # The workers do all the arithmetic and time it themselves (about 0.4 s of CPU here); the
    # parent only waits. Measured: within 2% of the truth for all three start methods;
    # +-30% leaves room for a loaded machine and the lines around the loop.
    truth = float(re.search(r"worker cpu_s ([0-9.]+)", result.stderr).group(1))
    assert 0.7 * truth <= worker_cpu <= 1.3 * truth, (worker_cpu, truth, total_cpu)
    assert worker_cpu >= 0.5 * total_cpu
    assert max(loop.get("processes", 1), body.get("processes", 1)) >= 2


def test_process_executor_subprocess_and_fork_keep_results_and_exit_codes(tmp_path):
    expected = _plain(VARIANTS, "fork")
    result = run_peakline([str(VARIANTS), "fork"], tmp_path, timeout=120)
    assert result.returncode == expected.returncode == 0, result.stderr
    assert result.stdout == expected.stdout
    assert "process exitcode 3" in result.stdout and "fork 7" in result.stdout
    processes = result.profile()["processes"]
    merged = _merged(result.profile())
    # parent, Process, 2 executor workers, the subprocess, the os.fork child
    assert len(merged) >= 6, processes
    exit_codes = {p.get("exit_code") for p in merged}
    assert {3, 7} <= exit_codes
    assert any("sum(i*i" in p["program"] for p in merged)  # the sys.executable subprocess


def test_no_children_option_leaves_children_alone(tmp_path):
    result = run_peakline(["--no-children", str(POOL), "spawn"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "processes" not in result.profile()


def test_joblib_scikit_learn_n_jobs_2_finishes_and_is_profiled(tmp_path):
    pytest.importorskip("sklearn")
    result = run_peakline([str(JOBLIB)], tmp_path, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "scores" in result.stdout
    profile = result.profile()
    workers = [p for p in _merged(profile)
               if p["pid"] != profile["pid"] and "loky" in p["program"]]
    assert len(workers) == 2, profile.get("processes")
    assert all(w["cpu_s"] > 0 for w in workers)
    fit = line_record(profile, JOBLIB, marked_lines(JOBLIB)["fit"])
    assert cpu_s(fit) + fit["wait_s"] > 0


def test_merge_adds_lines_counts_processes_and_keeps_the_largest_peak(build, app_source):
    from peakline.model.merge import merge_processes

    ms = 1_000_000
    frames = [(app_source, "work", 2, 3), (app_source, "<module>", 1, 12)]
    parent = build(frames, [(1, (0, 1), 100 * ms, 0, 0, 0, 10, 0)])
    child = build(frames[::-1], [(2, (1, 0), 300 * ms, 0, 0, 0, 30, 0)])
    child.pid, child.extra["parent_pid"] = 4243, parent.pid
    parent.peak_bytes, child.peak_bytes = 100, 700
    merged = merge_processes(parent, [child], [{"pid": 9, "program": "late"}])
    line = next(rec for rec in merged.files[app_source].lines if rec.lineno == 3)
    assert line.cpu_python_s == pytest.approx(0.4)
    assert line.samples == 40 and line.processes == 2
    assert merged.totals.cpu_python_s == pytest.approx(0.4)
    assert merged.peak_bytes == 700 and merged.peak_bytes_sum == 800
    assert [p.pid for p in merged.processes] == [parent.pid, 4243, 9]
    assert [p.merged for p in merged.processes] == [True, True, False]
    assert {t.tid for t in merged.threads} == {1, 2}
    # frame ids of the child's stack were re-indexed into the merged frame table
    child_stack = next(s for s in merged.stacks.samples if s.thread == 2)
    names = [merged.stacks.frames[i][1] for i in child_stack.frames]
    assert names == ["<module>", "work"]


def test_merge_sums_process_cpu_and_keeps_each_processs_sampling_warning(build, app_source):
    from peakline.model.merge import merge_processes

    frames = [(app_source, "work", 2, 3)]
    parent = build(frames, [(1, (0,), 1_000_000, 0, 0, 0, 1, 0)])
    child = build(frames, [(2, (0,), 1_000_000, 0, 0, 0, 1, 0)])
    child.pid = 4243
    parent.sampling.process_cpu_s, child.sampling.process_cpu_s = 1.5, 2.0
    child.sampling.warning = "CPU sampling covered only 0.00 s"
    merged = merge_processes(parent, [child])
    assert merged.sampling.process_cpu_s == pytest.approx(3.5)
    assert merged.sampling.warning == "process 4243: CPU sampling covered only 0.00 s"
