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
    # Per task key prefix (the plugin's transition hook): the 4 burn tasks, their CPU, and
    # the 40 MiB each raised its worker's heap by.
    (keys,) = doc["task_keys"]
    assert (keys["prefix"], keys["tasks"], keys["processes"]) == ("burn", 4, 2), keys
    assert 0.9 * truth <= keys["cpu_s"] <= 1.3 * truth + 0.1, (keys, truth)
    assert 40 * MIB <= keys["rise_bytes"] <= 44 * MIB, keys


TASK_KEYS = PROGRAMS / "dask_task_keys.py"


def test_run_breaks_the_workers_down_per_task_key_prefix(tmp_path):
    pytest.importorskip("distributed")
    import io

    from peakline.model.profile import Profile
    from peakline.reporters import html, terminal

    result = run_peakline(["--no-report", str(TASK_KEYS)], tmp_path, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    truth = float(re.search(r"burn cpu_s ([0-9.]+)", result.stdout).group(1))
    held = int(re.search(r"hold bytes ([0-9]+)", result.stdout).group(1))
    doc = result.profile()
    keys = {r["prefix"]: r for r in doc["task_keys"]}
    assert set(keys) == {"burn", "hold"}, doc["task_keys"]
    burn, hold = keys["burn"], keys["hold"]
    assert (burn["tasks"], hold["tasks"]) == (4, 2)
    # The window's CPU is the worker process's while the task ran: the loop's own (the
    # truth, measured in the task as process CPU) plus the task's dispatch around it.
    assert 0.9 * truth <= burn["cpu_s"] <= 1.3 * truth + 0.1, (burn, truth)
    # The hold tasks sleep: their windows hold only the worker's own background CPU
    # (measured: 0.18 s for both, load ~19).
    assert hold["cpu_s"] < 0.5 * truth, hold
    # Each hold task raised its worker's heap by its block (and little else); the burn tasks
    # allocate nothing that lasts.
    assert held <= hold["rise_bytes"] <= held + 4 * MIB, hold
    assert hold["peak_bytes"] >= held
    assert burn["rise_bytes"] < 4 * MIB, burn
    assert 1 <= hold["processes"] <= 2 and 1 <= burn["processes"] <= 2

    profile = Profile.from_dict(doc)
    out = io.StringIO()
    terminal.render(profile, out, width=200, color=False)
    text = out.getvalue()
    assert "Tasks by key prefix" in text, text
    assert re.search(r"hold . 2 tasks in [12] process(es)? . CPU", text), text
    page = io.StringIO()
    html.render(profile, page)
    assert '<section id="task-keys"' in page.getvalue()
    assert '"prefix":"burn"' in page.getvalue()


HIDDEN = PROGRAMS / "dask_hidden_worker.py"


def test_workers_without_peakline_or_that_died_are_named_and_the_others_profiled(tmp_path):
    pytest.importorskip("distributed")
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(HIDDEN), str(tmp_path / "hide")],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hidden = re.search(r"^hidden (\S+)$", proc.stdout, re.M).group(1)
    killed = re.search(r"^killed (\S+)$", proc.stdout, re.M).group(1)
    error = re.search(r"^error (.*)$", proc.stdout, re.M).group(1)
    reasons = dict(part.split(": ", 1) for part in
                   error.removeprefix("peakline.dask: workers not profiled: ").split("; "))
    assert reasons[hidden] == ("peakline cannot be imported there (ImportError: No module "
                               "named peakline (hidden for this worker))"), error
    assert re.fullmatch(r"left the cluster before its profile was collected \(the worker "
                        r"\(pid \d+\) died or was retired\): its profile is lost",
                        reasons[killed]), error
    assert len(reasons) == 2, error
    # The survivor, and the worker the killed one's nanny started (when it joined in time).
    profiled = json.loads(re.search(r"^profiled (.*)$", proc.stdout, re.M).group(1))
    assert 1 <= len(profiled) <= 2 and not {hidden, killed} & set(profiled), profiled
    assert int(re.search(r"^lines (\d+)$", proc.stdout, re.M).group(1)) > 0
