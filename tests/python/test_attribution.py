"""Stack attribution edge cases: work done on behalf of a user line without that line being on
the working thread's stack (thread pools, BLAS threads), and stacks deeper than the capture
budget (the root, where the user's line is, is kept)."""

from __future__ import annotations

import pytest

from peakline_proc import PROGRAMS, cpu_s, line_record, marked_lines, run_peakline

MiB = 1 << 20


@pytest.fixture(scope="module")
def stitched(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stitch")
    res = run_peakline(["--no-report", str(PROGRAMS / "stitch_deep.py")], tmp)
    assert res.returncode == 0, res.stderr
    return res.profile()


def test_thread_pool_work_is_charged_to_the_line_that_handed_it_out(stitched):
    path = PROGRAMS / "stitch_deep.py"
    rec = line_record(stitched, path, marked_lines(path)["pool"])
    workers = [t for t in stitched["threads"] if t["name"] and "ThreadPoolExecutor" in t["name"]]
    worker_cpu = sum(t["cpu_s"] for t in workers)
    assert worker_cpu > 0.1, stitched["threads"]
    # The workers' hashing lands on the pool line (the main thread only waits there).
    assert cpu_s(rec) >= 0.8 * worker_cpu, (rec, worker_cpu)
    assert rec["cpu_native_s"] >= 0.6 * worker_cpu, (rec, worker_cpu)
    # No worker CPU is left without a user line (their *waiting* is not stitched: an idle
    # pool thread is not the program waiting).
    frames = stitched["stacks"]["frames"]
    user_file = str(PROGRAMS / "stitch_deep.py")
    orphan_cpu = sum(
        s["cpu_python_s"] + s["cpu_native_s"] + s["cpu_system_s"]
        for s in stitched["stacks"]["samples"]
        if not any(frames[i][0] == user_file for i in s["frames"]))
    assert orphan_cpu < 0.1 * worker_cpu, orphan_cpu


def test_deep_library_stacks_keep_the_users_root_line(stitched):
    path = PROGRAMS / "stitch_deep.py"
    rec = line_record(stitched, path, marked_lines(path)["deep"])
    # deepcopy rebuilds the 64 MiB list at the bottom of ~450 library frames.
    assert rec["alloc_python_bytes"] + rec["alloc_native_bytes"] >= 60 * MiB, rec
    assert stitched["sampling"]["truncated_stacks"] > 0
    assert stitched["memory"]["unattributed_alloc_bytes"] < 8 * MiB
