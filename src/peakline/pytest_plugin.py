"""pytest plugin (entry point ``pytest11``): budgets and profiles per test (docs/gates.md).

Off unless used. It only looks at a test when the test carries the marker, uses the
``peakline_profile`` fixture, or pytest runs with ``--peakline``; any other test runs as if the
plugin were not installed (one marker lookup per test).

* ``@pytest.mark.peakline(max_peak="200MB", max_time="2s", no_leaks=True, ...)``: profiles the
  test's call (not its fixtures' set-up) and fails it when a budget is exceeded; the failure
  message is the budget report with the lines responsible. Budget names and values are those
  of `peakline check` (peakline.gates.budgets); ``baseline="old.json"`` and ``tolerance``
  compare with a saved profile. The marker also takes what ``peakline.start`` takes
  (``cpu_only=True``, ``memory_sampling_interval=65536``, ...: peakline/run_options.py),
  checked as the API checks them.
* ``--peakline``: profile every test; the terminal summary lists the tests with the largest
  peaks and the longest times. ``--peakline-dir DIR``: keep one profile per test there.
  ``--peakline-budget max_peak=1GB`` (repeatable): a budget for every profiled test (a
  marker's own values win). ``--peakline-baseline-dir DIR``: compare each profiled test with
  ``DIR/<test>.json`` when that file exists (a directory kept by ``--peakline-dir``).
* ``peakline_profile`` fixture: ``with peakline_profile: work()`` then assert on
  ``peakline_profile.profile`` (a peakline.model.Profile). In a marked test the budgets are
  judged on that profile.

With pytest-xdist every worker profiles its own tests (one process, one profile at a time);
the figures travel to the controller in the reports' ``user_properties``.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

import pytest

_MARKER = "peakline"
_PROPERTY = "peakline"
_SUMMARY_TOP = 10


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.all = bool(config.getoption("peakline"))
        self.dir = config.getoption("peakline_dir")
        self.baseline_dir = config.getoption("peakline_baseline_dir")
        self.budgets: dict[str, Any] = {}
        from peakline.errors import UsageError
        from peakline.gates.budgets import parse_assignment

        try:
            for text in config.getoption("peakline_budget") or ():
                name, value = parse_assignment(text, source="--peakline-budget")
                self.budgets[name] = value
            if "repeat" in self.budgets:
                raise UsageError("--peakline-budget: repeat is for `peakline check` only")
        except UsageError as error:
            raise pytest.UsageError(str(error)) from None
        if self.dir or self.baseline_dir or self.budgets:
            self.all = True
        self.records: list[tuple[str, dict[str, Any]]] = []


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("peakline", "peakline profiles and budgets per test")
    group.addoption("--peakline", action="store_true", default=False,
                    help="profile every test with peakline; list the largest peaks and times")
    group.addoption("--peakline-dir", metavar="DIR", default=None,
                    help="keep one peakline profile per test in DIR (implies --peakline)")
    group.addoption("--peakline-budget", metavar="NAME=VALUE", action="append", default=[],
                    help="a budget for every test, e.g. max_peak=1GB (implies --peakline)")
    group.addoption("--peakline-baseline-dir", metavar="DIR", default=None,
                    help="compare each test with DIR/<test>.json when it exists (implies "
                         "--peakline)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "peakline(**budgets): profile this test with peakline and fail it when a "
                   "budget is exceeded (max_peak='200MB', max_time='2s', no_leaks=True, ...)")
    config.stash[_STATE] = _State(config)


def profile_filename(nodeid: str) -> str:
    """A file name for a test's profile: readable, unique, not too long."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.") or "test"
    if len(name) > 120:
        name = name[:100] + "-" + hashlib.sha1(nodeid.encode()).hexdigest()[:12]
    return name + ".json"


class ProfileFixture:
    """What the ``peakline_profile`` fixture gives a test: ``with peakline_profile: ...``
    profiles the block (``peakline_profile(cpu_only=True)`` passes options to
    peakline.start); ``.profile`` is the Profile afterwards."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.profile = None
        self._options: dict[str, Any] = {}

    def __call__(self, **options: Any) -> ProfileFixture:
        self._options = options
        return self

    def __enter__(self) -> ProfileFixture:
        import peakline

        options = {"program": self.nodeid, **self._options}
        self.profile = None
        peakline.start(**options)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        import peakline

        self.profile = peakline.stop()
        self._options = {}


@pytest.fixture
def peakline_profile(request: pytest.FixtureRequest) -> ProfileFixture:
    """Profiles a block of the test: ``with peakline_profile: ...``; then
    ``peakline_profile.profile`` is its Profile."""
    fixture = ProfileFixture(request.node.nodeid)
    request.node.stash[_FIXTURE] = fixture
    return fixture


_FIXTURE = pytest.StashKey[ProfileFixture]()


def _marker_budgets(item: pytest.Item) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the marker's budgets, its profiling options), both empty without the marker."""
    marker = item.get_closest_marker(_MARKER)
    if marker is None:
        return {}, {}
    from peakline import run_options
    from peakline.errors import UsageError
    from peakline.gates.budgets import convert_all

    if marker.args:
        raise UsageError(f"@pytest.mark.{_MARKER} takes budgets as keyword arguments, e.g. "
                         "max_peak='200MB'")
    options = {k: v for k, v in marker.kwargs.items() if k in run_options.BY_KEYWORD}
    try:
        run_options.from_keywords(options)
    except ValueError as error:
        raise UsageError(f"@pytest.mark.{_MARKER}: {error}") from None
    values = convert_all({k: v for k, v in marker.kwargs.items() if k not in options},
                         source=f"@pytest.mark.{_MARKER}")
    if "repeat" in values:
        raise UsageError(f"@pytest.mark.{_MARKER}: repeat is for `peakline check` only")
    return values, options


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    state = item.config.stash[_STATE]
    marked = item.get_closest_marker(_MARKER) is not None
    uses_fixture = "peakline_profile" in getattr(item, "fixturenames", ())
    if not (marked or state.all):
        return (yield)
    from peakline.errors import PeaklineError

    try:
        marked_budgets, options = _marker_budgets(item)
        budgets = {**state.budgets, **marked_budgets}
    except PeaklineError as error:
        pytest.fail(f"peakline: {error}", pytrace=False)
    if uses_fixture:
        result = yield  # the test profiles what it wants with the fixture
        fixture = item.stash.get(_FIXTURE, None)
        profile = fixture.profile if fixture is not None else None
        if profile is None:
            if budgets:
                pytest.fail("peakline: the test uses peakline_profile but profiled nothing, "
                            "so its budgets cannot be judged", pytrace=False)
            return result
        _finish(item, state, profile, budgets)
        return result

    import peakline


    if peakline.is_profiling():  # e.g. the whole run is under `peakline run -m pytest`
        return (yield)
    peakline.start(**{"program": item.nodeid, **options})
    try:
        result = yield
    except BaseException:  # the test's own failure is its verdict; its profile is kept
        _finish(item, state, peakline.stop(), budgets, judge=False)
        raise
    _finish(item, state, peakline.stop(), budgets)
    return result


def _finish(item: pytest.Item, state: _State, profile, budgets: dict[str, Any], *,
            judge: bool = True) -> None:
    from peakline.gates.verdict import cpu_s, render_text
    from peakline.gates.verdict import judge as judge_profiles

    name = profile_filename(item.nodeid)
    if state.dir:
        from peakline.model.profile_file import write_profile

        os.makedirs(state.dir, exist_ok=True)
        write_profile(profile, os.path.join(state.dir, name))
    item.user_properties.append((_PROPERTY, {
        "peak_bytes": profile.peak_bytes, "elapsed_s": profile.elapsed_s,
        "cpu_s": cpu_s(profile)}))
    if not judge:
        return
    baseline = None
    path = budgets.pop("baseline", None)
    if path is None and state.baseline_dir:
        candidate = os.path.join(state.baseline_dir, name)
        path = candidate if os.path.exists(candidate) else None
    if path is not None:
        from peakline.errors import PeaklineError
        from peakline.model.profile_file import read_profile

        try:
            baseline = read_profile(path)
        except PeaklineError as error:
            pytest.fail(f"peakline: {error}", pytrace=False)
    judged = {k: v for k, v in budgets.items() if k != "tolerance"} or baseline is not None
    if not judged:
        return
    from peakline.errors import PeaklineError

    try:
        verdict = judge_profiles([profile], budgets, baseline=baseline)
    except PeaklineError as error:
        pytest.fail(f"peakline: {error}", pytrace=False)
    if not verdict.ok:
        pytest.fail(f"peakline: over budget in {item.nodeid}\n{render_text(verdict)}",
                    pytrace=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for key, value in getattr(report, "user_properties", ()):
        if key == _PROPERTY and isinstance(value, dict):
            _RECORDS.append((report.nodeid, value))


# Reports reach pytest_runtest_logreport without their config; the controller's records
# live here (one pytest session per process).
_RECORDS: list[tuple[str, dict[str, Any]]] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _RECORDS.clear()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.all or not _RECORDS:
        return
    if hasattr(config, "workerinput"):  # an xdist worker: the controller summarises
        return
    from peakline.reporters._format import human_bytes

    tr = terminalreporter
    tr.section("peakline")
    by_peak = sorted((r for r in _RECORDS if r[1].get("peak_bytes") is not None),
                     key=lambda r: -r[1]["peak_bytes"])[:_SUMMARY_TOP]
    if by_peak:
        tr.write_line("largest heap peaks:")
        for nodeid, rec in by_peak:
            tr.write_line(f"  {human_bytes(rec['peak_bytes']):>11}  {nodeid}")
    by_time = sorted(_RECORDS, key=lambda r: -r[1]["elapsed_s"])[:_SUMMARY_TOP]
    tr.write_line("longest (wall time, CPU time):")
    for nodeid, rec in by_time:
        tr.write_line(f"  {rec['elapsed_s']:9.3f} s {rec['cpu_s']:9.3f} s  {nodeid}")
    if state.dir:
        tr.write_line(f"profiles: {os.path.abspath(state.dir)}")
