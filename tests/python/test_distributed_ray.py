"""Ray: `peakline run` on a program that starts a local Ray cluster profiles its tasks and
actors on every worker through the job's runtime_env (worker_process_setup_hook) and merges
the workers' profiles, per worker, with the lines of the tasks and the actor
(docs/distributed.md, "Ray"). Real Ray on this machine: each run starts a cluster (several
seconds), so each program runs once per module."""

from __future__ import annotations

import io
import os
import re

import pytest

from peakline.model.profile import Profile
from peakline.reporters import html, terminal
from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline

PROGRAM = PROGRAMS / "ray_tasks_actor.py"
MIB = 1 << 20


def _run(argument: str, tmp):
    """The program under `peakline run`. Ray gives its node 30 s to register, a fixed limit
    that a loaded machine can miss before any of peakline's work begins: that start-up
    failure is retried once."""
    for attempt in (1, 2):
        result = run_peakline(["--no-report", str(PROGRAM), argument], tmp, timeout=300)
        if result.returncode == 0 or attempt == 2 or \
                "The current node timed out during startup" not in result.stderr:
            break
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    """The program with its bad cases (a worker without peakline, one killed mid-task), Ray
    shut down by its own exit handler."""
    pytest.importorskip("ray")
    return _run("bad", tmp_path_factory.mktemp("ray"))


def _workers(doc):
    return [p for p in doc["processes"] if p.get("ray_worker_id")]


def test_tasks_and_actor_are_merged_per_worker_against_the_truth(ray_run):
    doc = ray_run.profile()
    truth = float(re.search(r"tasks cpu_s ([0-9.]+)", ray_run.stdout).group(1))
    marks = marked_lines(PROGRAM)
    burnt = cpu_s(line_record(doc, PROGRAM, marks["burn_loop"])) + \
        cpu_s(line_record(doc, PROGRAM, marks["burn_body"]))
    # Measured: 1.16 of the tasks' 1.20 s (2 cores, load ~10).
    assert 0.75 * truth <= burnt <= 1.15 * truth, (burnt, truth)
    workers = _workers(doc)
    node = workers[0]["node_id"]
    assert node and all(w["node_id"] == node and w["hostname"] == doc["hostname"]
                        for w in workers), workers
    # The actor's worker holds its 100 MiB at its own peak, on the line that made it.
    actor_pid = int(re.search(r"actor pid (\d+)", ray_run.stdout).group(1))
    actor = [w for w in workers if w["pid"] == actor_pid]
    assert len(actor) == 1 and actor[0]["ray_actor"] == "Holder", workers
    assert 100 * MIB <= actor[0]["peak_bytes"] <= 140 * MIB, actor
    hold = line_record(doc, PROGRAM, marks["hold"])
    assert 100 * MIB <= hold["live_at_peak_bytes"] <= 101 * MIB, hold
    # The tasks ran in other workers than the actor's, which name their function.
    burners = [w for w in workers if "burn" in (w.get("ray_tasks") or [])]
    assert burners and actor_pid not in {w["pid"] for w in burners}, workers
    assert line_record(doc, PROGRAM, marks["burn_body"])["processes"] == len(burners)
    # Each worker's own peak, and their sum with the driver's.
    merged = [p for p in doc["processes"] if p["merged"]]
    assert doc["peak_bytes"] == max(p["peak_bytes"] for p in merged)
    assert doc["peak_bytes_sum"] == sum(p["peak_bytes"] for p in merged)


def test_bad_cases_are_named_in_the_profile(ray_run):
    doc = ray_run.profile()
    # A worker where peakline cannot be imported: named, with the reason.
    pid = int(re.search(r"unprofiled pid (\d+)", ray_run.stdout).group(1))
    unprofiled = [p for p in doc["processes"] if p["pid"] == pid]
    assert len(unprofiled) == 1 and not unprofiled[0]["merged"], doc["processes"]
    assert "peakline cannot be imported there" in unprofiled[0]["not_merged_reason"]
    assert f"pid {pid} on" in unprofiled[0]["not_merged_reason"]
    # The worker killed mid-task: what it handed in before is kept, the loss is stated.
    assert "worker died" in ray_run.stdout
    partial = [w for w in _workers(doc) if w.get("partial_reason")]
    lost = [p for p in doc["processes"] if "ended before it handed in"
            in (p.get("not_merged_reason") or "")]
    assert len(partial) + len(lost) >= 1, doc["processes"]
    for worker in partial:
        assert "what it did after that is missing" in worker["partial_reason"]


def test_terminal_report_lists_the_workers_with_their_actor(ray_run):
    profile = Profile.from_dict(ray_run.profile())
    out = io.StringIO()
    terminal.render(profile, out, width=200, color=False)
    text = out.getvalue()
    actor_pid = int(re.search(r"actor pid (\d+)", ray_run.stdout).group(1))
    assert re.search(rf"pid {actor_pid} · on \S+ \(node [0-9a-f]+\) · Ray worker [0-9a-f]{{8}}, "
                     r"actor Holder\b", text), text
    assert re.search(r"Ray worker [0-9a-f]{8}, tasks burn\b", text), text
    assert "peakline cannot be imported there" in text
    page = io.StringIO()
    html.render(profile, page)
    assert re.search(r'"processNames": ?\[[^\]]*"Ray worker [0-9a-f]{8}, actor Holder', page.getvalue())


def test_hand_in_before_ray_shutdown_keeps_every_worker(tmp_path):
    pytest.importorskip("ray")
    result = _run("shutdown", tmp_path)
    doc = result.profile()
    handed = int(re.search(r"handed in (\d+)", result.stdout).group(1))
    workers = _workers(doc)
    assert handed == len(workers) >= 2, doc["processes"]
    assert not any(w.get("partial_reason") for w in workers), workers
    truth = float(re.search(r"tasks cpu_s ([0-9.]+)", result.stdout).group(1))
    marks = marked_lines(PROGRAM)
    burnt = cpu_s(line_record(doc, PROGRAM, marks["burn_loop"])) + \
        cpu_s(line_record(doc, PROGRAM, marks["burn_body"]))
    assert 0.75 * truth <= burnt <= 1.15 * truth, (burnt, truth)


# ---- without a cluster -------------------------------------------------------------------

def test_a_ray_without_the_set_up_hook_is_refused_clearly(monkeypatch, capsys):
    import sys
    import types

    import peakline.ray as support
    from peakline.errors import ProfilerStateError

    with pytest.raises(ProfilerStateError, match=r"Ray 2\.8\.1 lacks the runtime_env "
                       r"worker_process_setup_hook .*Ray >= 2\.9"):
        support.check_ray_version("2.8.1")
    support.check_ray_version("2.9.0")
    support.check_ray_version("2.60.0rc1")
    # The hook in a profiled driver with such a Ray: the job runs as it would, its workers
    # unprofiled, and the driver's stderr says why, once.
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(__version__="2.8.1"))
    monkeypatch.setenv("PEAKLINE_RAY_DRIVER", str(os.getpid()))
    monkeypatch.setenv("PEAKLINE_CHILD_OPTIONS", "{}")
    monkeypatch.setattr(support, "_refused", None)
    env = {"env_vars": {"A": "1"}}
    assert support.runtime_env_hook(env) is env
    assert support.runtime_env_hook(None) is None
    err = capsys.readouterr().err
    assert err.count("Ray 2.8.1 lacks") == 1, err
    assert support._collector is None


def test_the_hook_acts_only_in_the_profiled_driver(monkeypatch):
    import peakline.ray as support

    monkeypatch.setenv("PEAKLINE_RAY_DRIVER", str(os.getpid() + 1))  # inherited from it
    monkeypatch.setenv("PEAKLINE_CHILD_OPTIONS", "{}")
    env = {"env_vars": {"A": "1"}}
    assert support.runtime_env_hook(env) is env


def test_ray_processes_are_told_apart_from_the_program(tmp_path):
    from peakline._ray_env import is_ray_process

    ray_dir = tmp_path / "site-packages" / "ray"
    (ray_dir / "_private" / "workers").mkdir(parents=True)
    worker = str(ray_dir / "_private" / "workers" / "default_worker.py")
    assert is_ray_process(["python", "-u", worker, "--node-ip-address=127.0.0.1"])
    assert is_ray_process(["python", "-X", "utf8", worker])
    assert is_ray_process(["python", "-m", "ray.util.client.server"])
    assert not is_ray_process(["python", "-m", "raytracer"])
    assert not is_ray_process(["python", str(tmp_path / "ray" / "main.py")])  # no package
    assert not is_ray_process(["python", "-c", "import ray"])
    assert not is_ray_process(["python", "train.py", str(worker)])


def test_exec_drops_the_hook_and_restores_the_programs_own():
    from peakline.child import environment_without_peakline

    env = {"RAY_RUNTIME_ENV_HOOK": "peakline.ray.runtime_env_hook", "PEAKLINE_RAY_DRIVER": "1",
           "PEAKLINE_RAY_PREVIOUS_HOOK": "mine.hook", "KEEP": "x"}
    assert environment_without_peakline(env) == {"RAY_RUNTIME_ENV_HOOK": "mine.hook",
                                                 "KEEP": "x"}
    env.pop("PEAKLINE_RAY_PREVIOUS_HOOK")
    assert environment_without_peakline(env) == {"KEEP": "x"}
    assert environment_without_peakline({b"RAY_RUNTIME_ENV_HOOK": b"other"}) == \
        {b"RAY_RUNTIME_ENV_HOOK": b"other"}
