"""The compatibility suite (benchmarks/compat/run.py) in the test suite.

Its --smoke part runs three small CPython regression-test modules (test_json, test_mmap,
test_tracemalloc: about 15 s when the machine is quiet) unprofiled and under `peakline run`
(full mode) and requires every test's outcome to be the same. The detector itself is checked on
a test module that behaves differently when peakline is loaded: a suite that cannot see a
difference would pass anything.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
RUNNER = BENCH / "compat" / "runner.py"

pytest.importorskip("test.support", reason="the interpreter has no CPython test package")


@pytest.fixture
def compat(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    from compat import compare, report, targets

    return compare, report, targets


def test_smoke_modules_have_their_unprofiled_outcomes_under_peakline(tmp_path, compat):
    compare, report, targets = compat
    md, raw = tmp_path / "compat.md", tmp_path / "compat.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "compat" / "run.py"), "--smoke", "--quiet",
         "--python", sys.executable, "--report", str(md), "--json", str(raw)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    data = json.loads(raw.read_text())
    found = report.comparisons(data)
    differences = {(c.target, d.test): (d.baseline, d.profiled, d.profiled_detail[-600:])
                   for c in found for d in c.differences}
    assert not differences, differences
    assert not [c.notes for c in found if c.notes]
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {(r["target"], r["mode"]): r for r in data["runs"]}
    assert {t for t, _ in runs} == {"test_json", "test_mmap", "test_tracemalloc"}
    for (target, mode), run in runs.items():
        # The runner saw the whole module, not an import error: these modules hold 40-170
        # tests each, nearly all of which pass here. A run fails as a whole only through a
        # known-flaky test (whose failure text is shown if anything else failed).
        failing = {t: run["details"].get(t, "")[-800:] for t, o in run["outcomes"].items()
                   if o in ("failed", "error")}
        assert run["finished"], (target, mode, run["stderr_tail"])
        assert not set(failing) - set(targets.KNOWN_FLAKY), (target, mode, failing)
        assert run["exit_code"] == (1 if failing else 0), (target, mode, run["stderr_tail"])
        passed = sum(1 for o in run["outcomes"].values() if o == "passed")
        assert passed >= 30, (target, mode, compare.counts(run["outcomes"]))
        if mode == "full":
            assert run["profile_written"] is True, (target, run["stderr_tail"])
    assert "**No differences**" in md.read_text()


_PROBE = textwrap.dedent("""
    import sys
    import unittest


    class Probe(unittest.TestCase):
        def test_same(self):
            self.assertEqual(sum(range(10)), 45)

        def test_sees_no_profiler(self):
            self.assertNotIn("peakline", sys.modules, "a profiler is loaded")

        @unittest.skip("never runs")
        def test_skipped(self):
            pass

        def test_subtests(self):
            for i in range(3):
                with self.subTest(i=i):
                    self.assertLess(i, 2)
""")


def _run_probe(tmp_path, mode):
    folder = tmp_path / "probe"
    folder.mkdir(exist_ok=True)
    (folder / "compat_probe.py").write_text(_PROBE)
    out = tmp_path / f"{mode}.jsonl"
    prefix = [sys.executable] if mode == "plain" else [
        sys.executable, "-m", "peakline", "run", "--no-report",
        "--outfile", str(tmp_path / "profile.json")]
    done = subprocess.run([*prefix, str(RUNNER), "--out", str(out), "--path", str(folder),
                           "unittest", "compat_probe"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    return done, out


def test_a_test_that_behaves_differently_under_peakline_is_reported(tmp_path, compat):
    compare, _, _ = compat
    runs = {}
    for mode in ("plain", "full"):
        done, out = _run_probe(tmp_path, mode)
        assert done.returncode == 1, done.stderr[-2000:]  # the failing subtest, both times
        outcomes, details, finished = compare.read_outcomes(out, timed_out=False)
        assert finished
        runs[mode] = compare.RunResult("probe", mode, 0, done.returncode, 1.0, False, finished,
                                       outcomes, details)
    plain = runs["plain"].outcomes
    assert plain["compat_probe.Probe.test_same"] == "passed"
    assert plain["compat_probe.Probe.test_sees_no_profiler"] == "passed"
    assert plain["compat_probe.Probe.test_skipped"] == "skipped"
    assert plain["compat_probe.Probe.test_subtests (i=2)"] == "failed"
    assert plain["compat_probe.Probe.test_subtests"] == "failed"
    result = compare.compare([runs["plain"]], runs["full"], known_flaky={}, explained={})
    assert [(d.test, d.baseline, d.profiled) for d in result.differences] == [
        ("compat_probe.Probe.test_sees_no_profiler", "passed", "failed")]
    assert "a profiler is loaded" in result.differences[0].profiled_detail
    assert result.identical == len(plain) - 1


def test_flaky_tests_are_listed_not_counted(compat):
    compare, _, _ = compat

    def run(mode, index, **outcomes):
        return compare.RunResult("t", mode, index, 0, 1.0, False, True, outcomes, {})

    baselines = [run("plain", 0, a="passed", b="passed", c="failed"),
                 run("plain", 1, a="passed", b="failed", c="failed")]
    profiled = run("full", 0, a="failed", b="passed", c="failed", d="passed")
    result = compare.compare(baselines, profiled, known_flaky={"c": "known to vary"},
                             explained={"a": "because"})
    assert {d.test: (d.baseline, d.profiled, d.explanation) for d in result.differences} == {
        "a": ("passed", "failed", "because"), "d": (compare.ABSENT, "passed", "")}
    assert set(result.flaky) == {"b", "c"}
    assert result.flaky["b"].startswith("unprofiled runs disagree")
    assert result.identical == 0


def test_an_exit_status_that_only_flaky_tests_changed_is_no_difference(compat):
    compare, _, _ = compat

    def run(mode, exit_code, **outcomes):
        return compare.RunResult("t", mode, 0, exit_code, 1.0, False, True, outcomes, {})

    baselines = [run("plain", 1, a="passed", c="failed")]  # c failed unprofiled: status 1
    flaky_only = compare.compare(baselines, run("full", 0, a="passed", c="passed"),
                                 known_flaky={"c": "known to vary"}, explained={})
    assert (flaky_only.differences, flaky_only.notes) == ([], [])
    with_a_real_one = compare.compare(baselines, run("full", 0, a="failed", c="passed"),
                                      known_flaky={"c": "known to vary"}, explained={})
    assert [d.test for d in with_a_real_one.differences] == ["a"]
    assert with_a_real_one.notes == ["exit status 0 (unprofiled: 1)"]
    steady = compare.compare(baselines, run("full", 0, a="passed", c="failed"),
                             known_flaky={"c": "known to vary"}, explained={})
    assert steady.notes == ["exit status 0 (unprofiled: 1)"]  # no test explains the status


def test_a_killed_run_names_the_test_that_was_running(tmp_path, compat):
    compare, _, _ = compat
    path = tmp_path / "cut.jsonl"
    path.write_text('{"event": "start", "id": "x.a"}\n'
                    '{"event": "outcome", "id": "x.a", "outcome": "passed"}\n'
                    '{"event": "start", "id": "x.b"}\n{"event": "outc')
    outcomes, _, finished = compare.read_outcomes(path, timed_out=True)
    assert not finished
    assert outcomes == {"x.a": "passed", "x.b": "timeout"}
