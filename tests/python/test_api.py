"""The Python API in an ordinary interpreter (no launcher): with/start/stop/decorator/phase."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from peakline.model.phases import phase_fields
from peakline.session import PhaseRecord
from peakline_proc import PROGRAMS, marked_lines, needs_memory

MB = 1024 * 1024


def _python(args, tmp_path, timeout=120):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)


@needs_memory
def test_with_block_profiles_a_200_mb_numpy_allocation(tmp_path):
    pytest.importorskip("numpy")
    program = PROGRAMS / "api_numpy_200mb.py"
    out = tmp_path / "api.json"
    proc = _python([program, out], tmp_path)
    assert proc.returncode == 0, proc.stderr
    profile = json.loads(out.read_text())
    assert profile["exit_code"] is None
    assert profile["peak_bytes"] >= 200 * MB  # exact count
    line = next(rec for rec in profile["files"][str(program)]["lines"]
                if rec["lineno"] == marked_lines(program)["alloc"])
    alloc = line["alloc_python_bytes"] + line["alloc_native_bytes"]
    assert 190 * MB <= alloc <= 215 * MB  # far above the 512 KiB mean: sampled ~surely
    phases = {p["name"]: p for p in profile["phases"]}
    assert phases["alloc"]["peak_bytes"] >= 200 * MB
    assert phases["alloc"]["net_bytes"] >= 190 * MB
    assert phases["alloc"]["end_s"] >= phases["alloc"]["start_s"]
    assert phases["sum"]["start_s"] >= phases["alloc"]["end_s"]
    assert f"peak {profile['peak_bytes']}" in proc.stdout


def test_start_stop_decorator_and_errors(tmp_path):
    program = PROGRAMS / "api_forms.py"
    out = tmp_path / "forms.json"
    proc = _python([program, out], tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"decorated_result": sum(i * i for i in range(300_000)),
                      "decorated_has_profile": True, "double_start": "refused",
                      "phases": ["loop"], "has_memory": False, "double_stop": "refused"}
    assert out.exists()
    assert "peakline" in proc.stderr or proc.stderr == ""  # decorator report=False: quiet


def test_phase_figures_come_from_the_exact_timeline():
    timeline = [[0.0, 0], [0.1, 100], [0.15, 900], [0.2, 300], [0.5, 50]]
    phases = [PhaseRecord("a", 0, 0.05, 0.25, cpu_s=0.1), PhaseRecord("b", 0, 0.3, 0.6)]
    a, b = phase_fields(phases, timeline)
    assert (a["start_bytes"], a["end_bytes"], a["peak_bytes"], a["net_bytes"]) == \
        (0, 300, 900, 300)
    assert (b["start_bytes"], b["end_bytes"], b["peak_bytes"]) == (300, 50, 300)
    assert phase_fields(phases, None)[0].keys() == {"name", "depth", "start_s", "end_s",
                                                      "cpu_s"}
