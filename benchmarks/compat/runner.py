"""Runs one test target in this process and records every test's outcome as JSON lines.

    python runner.py --out RESULTS.jsonl unittest test.test_json [--include PAT] [--exclude PAT]
    python runner.py --out RESULTS.jsonl pytest TESTS_DIR [-- PYTEST_ARGS...]

run.py starts it unprofiled and under `peakline run`, so it must behave the same in both: it
uses only the standard library (pytest is imported for pytest targets only), and it writes each
outcome as soon as it is known, flushed, so a run that is killed at its time limit still leaves
the outcomes it reached and the test that was running (a "start" line without an outcome).

Lines: {"event": "start", "id": ...}, {"event": "outcome", "id", "outcome", "detail",
"seconds"}, and a final {"event": "done", "exit": N}. Outcomes: passed, failed, error,
skipped, xfailed, xpassed. detail: the end of the traceback, or the skip reason.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
import traceback

DETAIL_LINES = 12
DETAIL_CHARS = 1500


class Recorder:
    def __init__(self, path: str):
        # Line-buffered, opened before any test runs: tests that close or redirect descriptors
        # (test_os, test_subprocess) do not touch an already-open Python file object's fd
        # unless they close it, and then the remaining lines are lost, not the earlier ones.
        self._file = open(path, "w", buffering=1, encoding="utf-8")

    def write(self, **record) -> None:
        try:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass


def _excerpt(text: str) -> str:
    lines = text.rstrip().splitlines()[-DETAIL_LINES:]
    return "\n".join(lines)[-DETAIL_CHARS:]


def _format_error(err) -> str:
    try:
        return _excerpt("".join(traceback.format_exception(*err)))
    except Exception:  # a broken exception object must not end the run
        return repr(err[1])


# --------------------------------------------------------------------------- unittest targets

def _select(suite, keep):
    """A copy of `suite` with the tests `keep` accepts, nesting kept.

    Nesting is kept because it is what `python -m unittest` runs: tests that look at the
    depth of their own stack (test_tracemalloc wants more than 10 frames) see the same.
    """
    import unittest
    selected = unittest.TestSuite()
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            inner = _select(item, keep)
            if inner.countTestCases():
                selected.addTest(inner)
        elif keep(item):
            selected.addTest(item)
    return selected


def run_unittest(recorder: Recorder, module: str, include: list[str], exclude: list[str],
                 resources: list[str] | None) -> int:
    import unittest

    if resources is not None:
        # What `python -m test -u a,b` sets: tests that need another resource are skipped.
        from test import support
        support.use_resources = list(resources)

    class Result(unittest.TestResult):
        def __init__(self):
            super().__init__()
            self._started = {}
            self._recorded = set()

        def _record(self, test, outcome, detail=""):
            test_id = test.id()
            self._recorded.add(test_id)
            seconds = time.perf_counter() - self._started.get(test_id, time.perf_counter())
            recorder.write(event="outcome", id=test_id, outcome=outcome, detail=detail,
                           seconds=round(seconds, 3))

        def startTest(self, test):
            super().startTest(test)
            self._started[test.id()] = time.perf_counter()
            recorder.write(event="start", id=test.id())

        def stopTest(self, test):
            super().stopTest(test)
            if test.id() not in self._recorded:
                # Failing subtests suppress addSuccess/addFailure of the test itself.
                self._record(test, "failed", "one or more subtests failed")

        def addSuccess(self, test):
            super().addSuccess(test)
            self._record(test, "passed")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._record(test, "failed", _format_error(err))

        def addError(self, test, err):
            super().addError(test, err)
            # Class and module fixtures report through an _ErrorHolder whose id() is the
            # fixture's description ("setUpClass (test.test_x.Case)").
            self._record(test, "error", _format_error(err))

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._record(test, "skipped", str(reason)[:DETAIL_CHARS])

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._record(test, "xfailed")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._record(test, "xpassed")

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None:
                failed = issubclass(err[0], test.failureException)
                self._record(subtest, "failed" if failed else "error", _format_error(err))

    def keep(test):
        return ((not include or any(fnmatch.fnmatchcase(test.id(), p) for p in include))
                and not any(fnmatch.fnmatchcase(test.id(), p) for p in exclude))

    suite = _select(unittest.defaultTestLoader.loadTestsFromName(module), keep)
    result = Result()
    suite.run(result)
    for loader_error in getattr(unittest.defaultTestLoader, "errors", []):
        recorder.write(event="outcome", id=f"{module} (loader)", outcome="error",
                       detail=_excerpt(loader_error), seconds=0.0)
    return 0 if result.wasSuccessful() else 1


# ----------------------------------------------------------------------------- pytest targets

def run_pytest(recorder: Recorder, tests_dir: str, extra: list[str]) -> int:
    import pytest

    class Plugin:
        def __init__(self):
            self._outcome = {}

        def pytest_runtest_logstart(self, nodeid, location):
            recorder.write(event="start", id=nodeid)

        def pytest_runtest_logreport(self, report):
            nodeid = report.nodeid
            if report.when == "call" or (report.when == "setup" and not report.passed):
                if hasattr(report, "wasxfail"):
                    outcome = "xfailed" if report.skipped else "xpassed"
                elif report.passed:
                    outcome = "passed"
                elif report.skipped:
                    outcome = "skipped"
                else:
                    outcome = "failed" if report.when == "call" else "error"
                self._outcome[nodeid] = (outcome, _detail(report), report.duration)
            elif report.when == "teardown":
                outcome, detail, seconds = self._outcome.pop(nodeid, ("passed", "", 0.0))
                if report.failed:
                    outcome, detail = "error", _detail(report)
                recorder.write(event="outcome", id=nodeid, outcome=outcome, detail=detail,
                               seconds=round(seconds, 3))

        def pytest_collectreport(self, report):
            if report.failed:
                recorder.write(event="outcome", id=f"{report.nodeid} (collection)",
                               outcome="error", detail=_detail(report), seconds=0.0)

    def _detail(report):
        if report.skipped and isinstance(report.longrepr, tuple):
            return str(report.longrepr[2])[:DETAIL_CHARS]
        text = getattr(report, "longreprtext", "") or ""
        return _excerpt(text) if text else ""

    args = [tests_dir, "-p", "no:cacheprovider", "-q", "--no-header", "-p", "no:randomly",
            *extra]
    return int(pytest.main(args, plugins=[Plugin()]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--path", action="append", default=[],
                        help="folder put first on sys.path (shim test modules)")
    sub = parser.add_subparsers(dest="kind", required=True)
    ut = sub.add_parser("unittest")
    ut.add_argument("module")
    ut.add_argument("--include", action="append", default=[])
    ut.add_argument("--exclude", action="append", default=[])
    ut.add_argument("--resources", help="comma list, as `python -m test -u` (default: all)")
    pt = sub.add_parser("pytest")
    pt.add_argument("tests_dir")
    pt.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    sys.path[0:0] = args.path
    recorder = Recorder(args.out)
    try:
        if args.kind == "unittest":
            resources = None if args.resources is None else \
                [r for r in args.resources.split(",") if r]
            status = run_unittest(recorder, args.module, args.include, args.exclude, resources)
        else:
            extra = [a for a in args.pytest_args if a != "--"]
            status = run_pytest(recorder, args.tests_dir, extra)
        recorder.write(event="done", exit=status)
    finally:
        recorder.close()
    return status


if __name__ == "__main__":
    # The runner's own module must not shadow anything the tests import.
    sys.path[0:1] = [p for p in sys.path[0:1] if os.path.abspath(p or ".") !=
                     os.path.dirname(os.path.abspath(__file__))]
    sys.exit(main())
