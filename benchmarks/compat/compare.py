"""Per-test outcomes of one run, and the comparison of profiled runs with unprofiled ones.

A run's outcomes come from the JSON lines runner.py wrote. A test that started but has no
outcome was running when the run ended (killed at its time limit, or the process died): it
gets "timeout" or "crashed". Comparison: the unprofiled (baseline) runs give each test its
expected outcome; a test whose baseline runs disagree, or that is listed in
targets.KNOWN_FLAKY, is flaky and never counted as a difference (nor is a different exit status when only flaky
tests came out differently). Every other test whose outcome
under a profiled mode is not its baseline outcome is a difference (a test missing from one side
counts too, as "absent").
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import pathlib

ABSENT = "absent"


@dataclasses.dataclass
class RunResult:
    target: str
    mode: str  # "plain" or a peakline mode
    index: int  # baseline runs: 0, 1, ...; profiled runs: 0
    exit_code: int | None
    wall_s: float
    timed_out: bool
    finished: bool  # the runner wrote its final "done" line
    outcomes: dict[str, str]
    details: dict[str, str]
    stderr_tail: str = ""
    profile_written: bool | None = None  # peakline modes: a readable profile was written
    command: list[str] = dataclasses.field(default_factory=list)
    slowest: dict[str, float] = dataclasses.field(default_factory=dict)  # 3 slowest tests, s


def read_outcomes(path: pathlib.Path, *, timed_out: bool,
                  seconds: dict[str, float] | None = None) -> tuple[dict, dict, bool]:
    """Outcomes and failure texts by test id, and whether the runner finished; each test's
    duration goes into `seconds` when given."""
    outcomes: dict[str, str] = {}
    details: dict[str, str] = {}
    started: list[str] = []
    finished = False
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the end of the process
            event = record.get("event")
            if event == "start":
                started.append(record["id"])
            elif event == "outcome":
                outcomes[record["id"]] = record["outcome"]
                if seconds is not None:
                    seconds[record["id"]] = float(record.get("seconds") or 0.0)
                if record.get("detail"):
                    details[record["id"]] = record["detail"]
            elif event == "done":
                finished = True
    if not finished:
        running = [t for t in started if t not in outcomes]
        if running:
            outcomes[running[-1]] = "timeout" if timed_out else "crashed"
    return outcomes, details, finished


@dataclasses.dataclass
class Difference:
    test: str
    baseline: str
    profiled: str
    baseline_detail: str
    profiled_detail: str
    explanation: str = ""


@dataclasses.dataclass
class Comparison:
    target: str
    mode: str
    tests: int
    identical: int
    differences: list[Difference]
    flaky: dict[str, str]  # test -> why it counts as flaky
    exit_codes: tuple  # (baseline exit codes..., profiled exit code)
    notes: list[str]


def flaky_tests(baselines: list[RunResult], known: dict[str, str]) -> dict[str, str]:
    """Tests whose outcome varies between baseline runs, plus the known-flaky ones."""
    flaky = {}
    tests = set().union(*(b.outcomes for b in baselines)) if baselines else set()
    for test in sorted(tests):
        seen = [b.outcomes.get(test, ABSENT) for b in baselines]
        if len(set(seen)) > 1:
            flaky[test] = "unprofiled runs disagree: " + " / ".join(seen)
        for pattern, why in known.items():
            if fnmatch.fnmatchcase(test, pattern):
                flaky.setdefault(test, why)
    return flaky


def compare(baselines: list[RunResult], profiled: RunResult, *,
            known_flaky: dict[str, str], explained: dict[str, str],
            flaky: dict[str, str] | None = None) -> Comparison:
    flaky = dict(flaky_tests(baselines, known_flaky) if flaky is None else flaky)
    reference = baselines[0]
    tests = sorted(set(reference.outcomes) | set(profiled.outcomes))
    for test in profiled.outcomes:
        for pattern, why in known_flaky.items():
            if test not in flaky and fnmatch.fnmatchcase(test, pattern):
                flaky[test] = why
    differences, identical = [], 0
    for test in tests:
        expected = reference.outcomes.get(test, ABSENT)
        got = profiled.outcomes.get(test, ABSENT)
        if test in flaky:
            continue
        if expected == got:
            identical += 1
            continue
        why = next((text for pattern, text in explained.items()
                    if fnmatch.fnmatchcase(test, pattern)), "")
        differences.append(Difference(test, expected, got, reference.details.get(test, ""),
                                      profiled.details.get(test, ""), why))
    notes = []
    baseline_codes = [b.exit_code for b in baselines]
    # A test runner's exit status follows its tests' outcomes: when only flaky tests came out
    # differently, so may the status, and that is no difference either.
    flaky_changed = any(reference.outcomes.get(t, ABSENT) != profiled.outcomes.get(t, ABSENT)
                        for t in flaky)
    if (profiled.exit_code not in baseline_codes and not profiled.timed_out
            and not (flaky_changed and not differences)):
        notes.append(f"exit status {profiled.exit_code} (unprofiled: "
                     f"{', '.join(map(str, baseline_codes))})")
    if profiled.timed_out:
        notes.append(f"killed at the time limit after {profiled.wall_s:.0f} s")
    elif not profiled.finished:
        notes.append("the runner did not finish (the process ended early)")
    if profiled.profile_written is False:
        notes.append("no readable profile was written")
    return Comparison(profiled.target, profiled.mode, len(tests), identical, differences,
                      {t: w for t, w in flaky.items() if t in set(tests)},
                      (*baseline_codes, profiled.exit_code), notes)


def counts(outcomes: dict[str, str]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for outcome in outcomes.values():
        tally[outcome] = tally.get(outcome, 0) + 1
    return dict(sorted(tally.items()))
