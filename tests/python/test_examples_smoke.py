"""The examples in examples/ run under `peakline run` and show up in their own profile.

Each example runs in a subprocess (reaped by subprocess.run's timeout) at a tiny size, with
the README's command shape: copied to <tmp>/examples/ and run as
`python -m peakline run examples/<name>.py` from <tmp>, so the default profile name
(peakline-<stem>.json in the cwd) and absolute file keys are checked as well.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
ML_MODULES = ("numpy", "pandas", "sklearn")


def _run_example(name: str, cwd: pathlib.Path, env_extra: dict[str, str]):
    """Copies examples/<name> under cwd and runs it by its relative path, as the README does."""
    (cwd / "examples").mkdir()
    shutil.copy(EXAMPLES / name, cwd / "examples" / name)
    env = dict(os.environ, **env_extra)
    result = subprocess.run(
        [sys.executable, "-m", "peakline", "run", f"examples/{name}"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )
    return result


def _file_entry(profile: dict, script: pathlib.Path) -> dict:
    # The format keys files by absolute path, even when the script was given relatively.
    relative = [path for path in profile["files"] if not os.path.isabs(path)]
    assert not relative, f"profile keys files by relative path: {relative}"
    wanted = os.path.realpath(script)
    for path, entry in profile["files"].items():
        if os.path.realpath(path) == wanted:
            return entry
    raise AssertionError(f"{script} not in the profile's files: {sorted(profile['files'])}")


def _total_seconds(entry: dict) -> float:
    return sum(line["cpu_python_s"] + line["cpu_native_s"] + line["cpu_system_s"] + line["wait_s"]
               for line in entry["lines"])


def _check_profile(tmp_path: pathlib.Path, script: pathlib.Path) -> dict:
    profile_path = tmp_path / f"peakline-{script.stem}.json"
    assert profile_path.is_file(), f"default profile {profile_path.name} not written"
    profile = json.loads(profile_path.read_text())
    entry = _file_entry(profile, script)
    assert entry["lines"], "no line records for the example"
    assert _total_seconds(entry) > 0
    assert profile["elapsed_s"] > 0
    return profile


@pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ML_MODULES),
    reason="examples/ml_pipeline.py needs numpy, pandas and scikit-learn: "
           "pip install '.[examples]'",
)
def test_ml_pipeline_runs_under_peakline(tmp_path):
    result = _run_example("ml_pipeline.py", tmp_path, {"NUM_SAMPLES": "3000", "NUM_FEATURES": "6"})
    assert result.returncode == 0, result.stderr[-4000:]
    assert "ml_pipeline: 3000 samples x 6 features" in result.stdout
    _check_profile(tmp_path, tmp_path / "examples" / "ml_pipeline.py")


def test_pure_python_runs_under_peakline(tmp_path):
    result = _run_example("pure_python.py", tmp_path, {"SCALE": "0.1"})
    assert result.returncode == 0, result.stderr[-4000:]
    assert "pure_python:" in result.stdout
    _check_profile(tmp_path, tmp_path / "examples" / "pure_python.py")
