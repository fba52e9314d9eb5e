"""A pool worker killed mid-task (SIGKILL: no exit handler runs) under `peakline run
--snapshot-every`: its profile up to its last partial snapshot is merged and marked partial
(docs/distributed.md). Without snapshots the loss is stated:
test_distributed_merge.py, test_a_worker_killed_mid_task_is_listed_as_lost."""

from __future__ import annotations

import re

from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline

KILLED = PROGRAMS / "pool_worker_killed.py"


def _worker(doc: dict) -> dict:
    (worker,) = [p for p in doc["processes"] if p["pid"] != doc["pid"]]
    return worker


def test_a_killed_worker_keeps_its_profile_up_to_its_last_snapshot(tmp_path):
    result = run_peakline(["--no-report", "--snapshot-every", "0.2", str(KILLED)], tmp_path,
                          timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pool broken" in result.stdout
    truth = float(re.search(r"burnt ([0-9.]+)", result.stdout).group(1))
    doc = result.profile()
    worker = _worker(doc)
    assert worker["merged"] and worker["partial_until_s"] > 0, worker
    assert worker["parent_pid"] == doc["pid"]
    marks = marked_lines(KILLED)
    burnt = cpu_s(line_record(doc, KILLED, marks["burn_loop"])) + \
        cpu_s(line_record(doc, KILLED, marks["burn_body"]))
    # Measured: 0.89 of 1.00 s (the snapshot after the loop; load ~19).
    assert 0.6 * truth <= burnt <= 1.15 * truth, (burnt, truth)

