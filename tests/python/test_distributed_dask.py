"""`peakline run` on a program that starts a Dask LocalCluster: the worker processes are
profiled as children, the tasks' function (shipped by value) is charged on its real lines,
and each worker's peak holds what its task held (docs/distributed.md)."""

from __future__ import annotations

import re

import pytest

from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline

CLUSTER = PROGRAMS / "dask_local_cluster.py"
MIB = 1 << 20


def test_local_cluster_workers_are_profiled_per_worker_on_the_task_lines(tmp_path):
    pytest.importorskip("distributed")
    result = run_peakline(["--no-report", str(CLUSTER)], tmp_path, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "results [41943040]" in result.stdout
    truth = float(re.search(r"worker cpu_s ([0-9.]+)", result.stderr).group(1))
    doc = result.profile()
    marks = marked_lines(CLUSTER)
    loop = line_record(doc, CLUSTER, marks["burn_loop"])
    body = line_record(doc, CLUSTER, marks["burn_body"])
    # Measured: 0.94 of 1.00 s (2 cores, load ~6).
    assert 0.75 * truth <= cpu_s(loop) + cpu_s(body) <= 1.15 * truth, (loop, body, truth)
    # The tasks ran in (at least) two processes other than the program, each a worker that
    # held a 40 MiB block at its peak.
    hold = line_record(doc, CLUSTER, marks["hold"])
    assert hold["processes"] == 2, hold
    workers = [p for p in doc["processes"]
               if p["merged"] and p["pid"] != doc["pid"] and (p["peak_bytes"] or 0) >= 40 * MIB]
    assert len(workers) == 2, doc["processes"]
    assert doc["peak_bytes_sum"] >= 80 * MIB
    assert 40 * MIB <= hold["live_at_peak_bytes"] <= 2 * 41 * MIB, hold


PLUGIN = PROGRAMS / "dask_plugin.py"


def test_dask_profile_api_profiles_each_worker_of_a_cluster_peakline_did_not_start(tmp_path):
    pytest.importorskip("distributed")
    import json
    import subprocess
    import sys

    out = tmp_path / "workers.json"
    proc = subprocess.run([sys.executable, str(PLUGIN), str(out)], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = float(re.search(r"truth ([0-9.]+)", proc.stdout).group(1))
    workers = json.loads(proc.stdout.splitlines()[-1])["workers"]
    doc = json.loads(out.read_text())
    # One process per worker, named by its address, each holding its task's 40 MiB at its
    # peak; the sum of the workers' peaks is given.
    assert sorted(p["node_id"] for p in doc["processes"]) == sorted(workers)
    assert len(workers) == 2
    assert all(40 * MIB <= p["peak_bytes"] <= 48 * MIB for p in doc["processes"]), doc["processes"]
    assert doc["peak_bytes_sum"] == sum(p["peak_bytes"] for p in doc["processes"])
    marks = marked_lines(PLUGIN)
    burnt = cpu_s(line_record(doc, PLUGIN, marks["burn_loop"])) + \
        cpu_s(line_record(doc, PLUGIN, marks["burn_body"]))
    # Measured: 0.78 of 1.00 s (the task threads existed before the sessions started: their
    # CPU counts from the first tick that registers them).
    assert 0.6 * truth <= burnt <= 1.15 * truth, (burnt, truth)
    assert line_record(doc, PLUGIN, marks["burn_body"])["processes"] == 2
