"""speedscope export: structurally valid per the file-format spec, weights that add up."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from collections import defaultdict

from synthetic_memory import with_memory

from peakline.reporters import speedscope

PROGRAM = """\
import threading

def spin(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

worker = threading.Thread(target=spin, args=(2_000_000,), name="worker")
worker.start()
spin(3_000_000)
worker.join()
"""


def check_document(doc: dict) -> None:
    """The rules of speedscope's file-format-spec.ts for "sampled" profiles."""
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert frames and all(isinstance(f["name"], str) and f["name"] for f in frames)
    for f in frames:
        assert set(f) <= {"name", "file", "line", "col"}
        assert "line" not in f or (isinstance(f["line"], int) and f["line"] > 0)
    assert 0 <= doc["activeProfileIndex"] < len(doc["profiles"])
    for profile in doc["profiles"]:
        assert profile["type"] == "sampled"
        assert profile["unit"] in ("seconds", "bytes")
        assert len(profile["samples"]) == len(profile["weights"]) > 0
        for stack in profile["samples"]:
            assert stack and all(isinstance(i, int) and 0 <= i < len(frames) for i in stack)
        assert all(w > 0 for w in profile["weights"])
        assert profile["startValue"] == 0
        assert math.isclose(profile["endValue"], sum(profile["weights"]), rel_tol=1e-12)


def sampled_by_thread(profile) -> dict[int, float]:
    out: dict[int, float] = defaultdict(float)
    for s in profile.stacks.samples:
        out[s.thread] += s.total_s  # CPU + wait + run delay
    return {tid: v for tid, v in out.items() if v > 0}


def test_synthetic_profile_exports_one_time_profile_per_thread(app_profile):
    doc = speedscope.to_speedscope(app_profile)
    check_document(doc)
    timed = [p for p in doc["profiles"] if p["unit"] == "seconds"]
    assert len(timed) == 1 and timed[0]["name"] == "MainThread (tid 1): time"
    assert math.isclose(timed[0]["endValue"], app_profile.sampled_s, rel_tol=1e-12)
    frames = doc["shared"]["frames"]
    names = [[frames[i]["name"] for i in stack] for stack in timed[0]["samples"]]
    # root first: every stack starts at the module, the hot one ends in work()
    assert all(n[0] == "<module> (app.py:12)" for n in names if len(n) > 1)
    assert ["<module> (app.py:12)", "main (app.py:10)", "work (app.py:3)"] in names
    assert ["(no Python frame)"] in names  # the empty stack's 20 ms are kept
    json_frame = [f for f in frames if f["name"].startswith("JSONDecoder.decode")][0]
    assert json_frame["file"].endswith("json/decoder.py") and json_frame["line"] == 337


def test_no_memory_profile_without_memory(app_profile):
    assert all(p["unit"] == "seconds" for p in speedscope.to_speedscope(app_profile)["profiles"])


def test_allocated_bytes_profile_when_the_profile_has_memory(app_profile):
    profile = with_memory(app_profile)
    doc = speedscope.to_speedscope(profile)
    check_document(doc)
    memory = [p for p in doc["profiles"] if p["unit"] == "bytes"]
    assert len(memory) == 1
    assert memory[0]["endValue"] == sum(line.alloc_bytes for _, line in profile.lines())
    frames = doc["shared"]["frames"]
    leaves = {frames[s[-1]]["name"]: w for s, w in zip(memory[0]["samples"], memory[0]["weights"])}
    assert leaves["work (app.py:5)"] == 200 << 20
    assert leaves["main (app.py:9)"] == 80 << 20


def test_render_writes_one_json_document(app_profile):
    stream = io.StringIO()
    speedscope.render(app_profile, stream)
    assert json.loads(stream.getvalue()) == speedscope.to_speedscope(app_profile)


def test_real_run_with_threads(tmp_path):
    script = tmp_path / "spin.py"
    script.write_text(PROGRAM)
    out = tmp_path / "spin.speedscope.json"
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--no-report", "-o",
                           str(tmp_path / "p.json"), "--speedscope", str(out), str(script)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"speedscope profile written to {out}" in proc.stderr
    doc = json.loads(out.read_text())
    check_document(doc)
    from peakline.model import read_profile
    profile = read_profile(tmp_path / "p.json")
    expected = sampled_by_thread(profile)
    timed = [p for p in doc["profiles"] if p["unit"] == "seconds"]
    assert len(timed) == len(expected) >= 2  # the main thread and "worker"
    for tid, p in zip(sorted(expected), timed):
        assert f"(tid {tid})" in p["name"]
        assert math.isclose(sum(p["weights"]), expected[tid], rel_tol=1e-9)
    assert any("worker" in p["name"] for p in timed)
    frames = doc["shared"]["frames"]
    assert any(f["name"].startswith("spin (spin.py:") for f in frames)
