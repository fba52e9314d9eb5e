"""Only CPython 3.10 to 3.15 is profiled: any other interpreter gets one line naming the
supported versions, before the program runs and before the core is loaded. The other
interpreters are faked in a subprocess (sys.implementation / sys.version_info replaced before
peakline is imported); pip and CMake refuse real ones at install time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from peakline.interpreter import unsupported_reason

FAKES = {
    "PyPy 3.10": "sys.implementation = types.SimpleNamespace(**{**vars(sys.implementation), "
                 "'name': 'pypy'})",
    "CPython 3.9": "sys.version_info = Version(3, 9, 18, 'final', 0)",
    "CPython 3.16": "sys.version_info = Version(3, 16, 0, 'alpha', 1)",
}

PRELUDE = """\
import collections, sys, types
Version = collections.namedtuple("Version", "major minor micro releaselevel serial")
{fake}
if "{shown}" == "PyPy 3.10":
    sys.version_info = Version(3, 10, 14, "final", 0)
"""


def run_faked(shown, body, tmp_path):
    code = PRELUDE.format(fake=FAKES[shown], shown=shown) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


def test_this_interpreter_is_supported():
    assert unsupported_reason() is None


@pytest.mark.parametrize("shown", sorted(FAKES))
def test_peakline_run_refuses_in_one_line_before_the_program_runs(shown, tmp_path):
    (tmp_path / "app.py").write_text("open('ran', 'w').close()\n")
    res = run_faked(shown, """
        from peakline.cli.main import main
        sys.exit(main(["run", "app.py"]))
    """, tmp_path)
    assert res.returncode == 4, res.stderr
    assert res.stderr.splitlines() == [
        f"peakline: error: peakline supports CPython 3.10 to 3.15 only; this is {shown} "
        f"({sys.executable})"]
    assert not (tmp_path / "ran").exists()
    assert not list(tmp_path.glob("peakline-*.json"))


@pytest.mark.parametrize("shown", sorted(FAKES))
def test_the_api_refuses_with_the_same_line_and_loads_no_core(shown, tmp_path):
    res = run_faked(shown, """
        import peakline
        from peakline.errors import UnsupportedInterpreterError
        try:
            peakline.start()
        except UnsupportedInterpreterError as error:
            print(error)
        print("core loaded:", "peakline._core" in sys.modules)
    """, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"peakline supports CPython 3.10 to 3.15 only; this is {shown} ({sys.executable})",
        "core loaded: False"]
