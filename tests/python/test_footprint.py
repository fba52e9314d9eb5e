"""peakline's own memory while the program runs: what it has loaded into the process.

The benchmark (benchmarks/, docs/benchmarks.md "Cost") measures the bytes; these tests pin
the decisions behind them, which a harmless-looking import would silently undo:

* The model, the reporters and the heavy standard modules they use (dataclasses pulls in
  inspect, about 1 MiB) are imported when the profile is built, not while the program runs.
* Parsing `peakline run`'s options and starting the program load no more than they need: no
  argparse (with re, gettext, shutil: ~1.7 MiB), no runpy.run_path (pkgutil, typing: ~0.6 MiB).
* The core carries its own C++ runtime: the shared libstdc++ is not mapped into a profiled
  program that does not load it itself (it cost 0.95 MiB of resident pages).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from peakline_proc import run_peakline

PROGRAM = """
import sys
modules = sorted(sys.modules)  # before this program imports anything itself
maps = open("/proc/self/maps").read()
import json
print(json.dumps({"modules": modules, "libstdcxx": "libstdc++" in maps}))
"""

# Imported by peakline only after the program has finished.
LATE = ["peakline.model.profile", "peakline.model.builder", "peakline.model.memory_builder",
        "peakline.model.profile_file", "peakline.reporters.terminal",
        "peakline.reporters._filters", "dataclasses", "inspect", "ast", "datetime", "platform",
        # Never, on the common path: the option parser is argparse only for --help and
        # errors (cli/options.py); a plain script runs without runpy.run_path, which imports
        # pkgutil and typing (runner.py); the selection needs no sysconfig, the CPU split no
        # dis, the children's options no json.
        "argparse", "gettext", "shutil", "pkgutil", "typing", "sysconfig", "dis", "json"]


@pytest.mark.parametrize("mode", [[], ["--cpu-only"]], ids=["full", "cpu-only"])
def test_the_program_runs_without_peaklines_report_code_loaded(tmp_path, mode):
    script = tmp_path / "show.py"
    script.write_text(PROGRAM)
    # What this interpreter loads anyway (a site-packages .pth may import some of them).
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    baseline = json.loads(plain.stdout.strip().splitlines()[-1])
    result = run_peakline([*mode, "--no-report", str(script)], tmp_path)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert "peakline._core" in seen["modules"]  # it did run under peakline
    early = [m for m in LATE if m in seen["modules"] and m not in baseline["modules"]]
    assert early == []
    if not baseline["libstdcxx"]:
        assert seen["libstdcxx"] is False
    # ... and the profile was still built and written afterwards.
    assert result.profile()["format"] == "peakline"
