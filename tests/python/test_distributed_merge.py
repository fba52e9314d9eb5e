"""`peakline merge`: profiles taken anywhere merged into one, each process with its host
(peakline/model/merge.py, merge_profiles; docs/distributed.md)."""

from __future__ import annotations

import copy
import io
import json
import re
import subprocess
import sys

import pytest

from peakline.model.merge import merge_profiles
from peakline.model.profile import Profile
from peakline.model.profile_file import write_profile
from peakline.reporters import terminal


def _on_host(profile: Profile, host: str, pid: int, started_at: str) -> Profile:
    doc = copy.deepcopy(profile.to_dict())
    doc.update(hostname=host, pid=pid, started_at=started_at)
    return Profile.from_dict(doc)


def _merge_cli(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "peakline", "merge", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_profiles_from_two_hosts_add_up_per_line_and_keep_each_host(app_profile, tmp_path):
    from synthetic_memory import PEAK_BYTES, with_memory

    base = with_memory(app_profile)
    a = _on_host(base, "node-a", 100, "2024-05-01T12:00:00Z")
    b = _on_host(base, "node-b", 100, "2024-05-01T12:00:03Z")  # same pid, another machine
    merged = merge_profiles([b, a], sources=["b.json", "a.json"])
    # The earliest run is the base; its description stays.
    assert merged.hostname == "node-a" and merged.started_at == a.started_at
    assert [(p.hostname, p.pid) for p in merged.processes] == [("node-a", 100), ("node-b", 100)]
    # Two hosts: the offset comes from the wall clocks, not from incomparable monotonic ones.
    assert merged.processes[1].start_offset_s == pytest.approx(3.0)
    lines = {ln.lineno: ln for _, ln in merged.lines()}
    single = {ln.lineno: ln for _, ln in base.lines()}
    assert lines[3].cpu_python_s == pytest.approx(2 * single[3].cpu_python_s)
    assert lines[3].processes == 2
    assert merged.peak_bytes == PEAK_BYTES and merged.peak_bytes_sum == 2 * PEAK_BYTES

    out = io.StringIO()
    terminal.render(merged, out, width=160, color=False)
    text = out.getvalue()
    assert "pid 100 · on node-a" in text and "pid 100 · on node-b" in text, text

    # The command line: the same merge, written where asked; a third input that is itself a
    # merged profile contributes its processes, not itself as one.
    write_profile(a, tmp_path / "a.json")
    write_profile(b, tmp_path / "b.json")
    write_profile(merged, tmp_path / "ab.json")
    c = _on_host(base, "node-c", 7, "2024-05-01T12:00:05Z")
    write_profile(c, tmp_path / "c.json")
    result = _merge_cli(tmp_path, "ab.json", "c.json", "--outfile", "all.json")
    assert result.returncode == 0, result.stderr
    assert "merged 2 profiles (3 processes, hosts node-a, node-b, node-c)" in result.stderr
    doc = json.loads((tmp_path / "all.json").read_text())
    assert [p["hostname"] for p in doc["processes"]] == ["node-a", "node-b", "node-c"]
    line3 = next(ln for f in doc["files"].values() for ln in f["lines"] if ln["lineno"] == 3)
    assert line3["processes"] == 3
    assert doc["peak_bytes_sum"] == 3 * PEAK_BYTES
    assert "tree_peak_bytes" not in doc  # an input's children have no timeline of their own


def test_merge_refuses_foreign_corrupt_repeated_and_lonely_profiles(app_profile, tmp_path):
    write_profile(app_profile, tmp_path / "a.json")
    (tmp_path / "foreign.json").write_text('{"format": "speedscope"}')
    (tmp_path / "cut.json").write_text('{"format": "peakline", "vers')
    newer = app_profile.to_dict()
    newer["version"] = 99
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    cases = {"foreign.json": "foreign.json: format: not a peakline profile",
             "cut.json": "cut.json: not valid JSON",
             "newer.json": "newer.json",
             "a.json": "a.json is the same run as a.json",
             "missing.json": "missing.json"}
    for other, message in cases.items():
        result = _merge_cli(tmp_path, "a.json", other, "--outfile", "out.json")
        assert result.returncode == 3, (other, result.stderr)
        assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    result = _merge_cli(tmp_path, "a.json", "--outfile", "out.json")
    assert result.returncode == 3 and "at least two profiles" in result.stderr
    assert not (tmp_path / "out.json").exists()


def test_a_worker_killed_mid_task_is_listed_as_lost(tmp_path):
    from peakline_proc import PROGRAMS, run_peakline

    program = PROGRAMS / "worker_dies.py"
    result = run_peakline([str(program)], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "worker exit -9" in result.stdout
    doc = result.profile()
    lost = [p for p in doc["processes"] if not p["merged"]]
    # The spawn worker (and multiprocessing's resource tracker, which outlives nothing here
    # but may still be running) are listed without measurements; the killed one is among them,
    # its loss stated: which process, since when.
    (killed,) = [p for p in lost if "--multiprocessing-fork" in " ".join(p["argv"])]
    assert re.fullmatch(r"it ended without writing its profile \(killed, e\.g\. by SIGKILL, or "
                        r"crashed\): everything it did since its start at "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ is lost \(with --snapshot-every its "
                        r"profile up to its last snapshot is kept\)",
                        killed["not_merged_reason"]), killed
    assert "not merged (it ended without writing its profile" in result.stderr
