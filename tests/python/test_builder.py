"""build_profile against synthetic raw snapshots whose right answer is known by hand."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from peakline.errors import ProfileFormatError
from peakline.model import FileSelection, build_profile, dumps_profile

MS = 1_000_000
APP = "/home/u/app.py"
UTIL = "/home/u/util.py"
DECODER = "/usr/lib/python3.11/json/decoder.py"
NUMPY = "/home/u/.venv/lib/python3.11/site-packages/numpy/core/fromnumeric.py"


def line(profile, filename, lineno):
    matches = [r for r in profile.files[filename].lines if r.lineno == lineno]
    assert len(matches) == 1, (filename, lineno, profile.files[filename].lines)
    return matches[0]


def function(profile, filename, name):
    matches = [f for f in profile.files[filename].functions if f.name == name]
    assert len(matches) == 1, (filename, name)
    return matches[0]


def test_library_leaf_is_charged_to_the_calling_user_line(build):
    frames = [(APP, "main", 1, 7), (DECODER, "JSONDecoder.decode", 332, 337)]
    profile = build(frames, [(1, (1, 0), 5 * MS, 3 * MS, 1 * MS, 2 * MS, 8, 2)])

    assert list(profile.files) == [APP]  # the stdlib file is not reported
    charged = line(profile, APP, 7)
    assert (charged.cpu_python_s, charged.cpu_native_s, charged.cpu_system_s,
            charged.wait_s) == (0.005, 0.003, 0.001, 0.002)  # categories kept as measured
    assert charged.samples == 10
    assert profile.totals.unattributed_s == 0.0
    # stacks keep every frame, root first
    assert profile.stacks.frames[1][0] == DECODER
    assert profile.stacks.samples[0].frames == [0, 1]


def test_innermost_reported_frame_wins(build):
    frames = [(APP, "main", 1, 7), (UTIL, "helper", 10, 12), (DECODER, "decode", 332, 337)]
    profile = build(frames, [(1, (2, 1, 0), 4 * MS, 0, 0, 0, 4, 0)])
    assert line(profile, UTIL, 12).cpu_python_s == 0.004
    assert profile.files[APP].lines == []  # main only holds inclusive time
    main = function(profile, APP, "main")
    assert (main.self_s, main.inclusive_s, main.samples) == (0.0, 0.004, 0)
    helper = function(profile, UTIL, "helper")
    assert (helper.self_s, helper.inclusive_s, helper.samples) == (0.004, 0.004, 4)


def test_recursion_is_counted_once_per_row_in_inclusive_time(build):
    frames = [(APP, "fib", 3, 5), (APP, "fib", 3, 4), (APP, "main", 10, 11)]
    # fib -> fib -> fib -> main (leaf first), and a second shallower row
    profile = build(frames, [(1, (1, 0, 0, 2), 6 * MS, 0, 0, 0, 6, 0),
                             (1, (1, 2), 2 * MS, 0, 0, 1 * MS, 2, 1)])
    fib = function(profile, APP, "fib")
    assert fib.inclusive_s == pytest.approx(0.009)  # 6 + 3, not 3*6 + 3
    assert fib.self_s == pytest.approx(0.009)
    assert (fib.cpu_python_s, fib.wait_s) == (pytest.approx(0.008), pytest.approx(0.001))
    assert function(profile, APP, "main").inclusive_s == pytest.approx(0.009)
    assert line(profile, APP, 4).samples == 9


def test_library_frames_do_not_count_in_inclusive_time(build):
    frames = [(APP, "main", 1, 7), (DECODER, "decode", 332, 337)]
    profile = build(frames, [(1, (1, 0), 1 * MS, 0, 0, 0, 1, 0)])
    assert [f.name for f in profile.files[APP].functions] == ["main"]
    assert DECODER not in profile.files


def test_unattributed_rows_still_count_in_totals_threads_and_stacks(build):
    frames = [(DECODER, "decode", 332, 337), (APP, "main", 1, 2)]
    stacks = [(1, (), 0, 3 * MS, 0, 0, 3, 0),          # native thread before any Python stack
              (2, (0,), 2 * MS, 0, 0, 0, 2, 0),        # library-only stack
              (1, (1,), 5 * MS, 0, 0, 0, 5, 0)]
    profile = build(frames, stacks, threads=[])
    assert profile.totals.unattributed_s == pytest.approx(0.005)
    assert profile.totals.cpu_s == pytest.approx(0.010)
    assert profile.attributed_fraction == pytest.approx(0.5)
    assert {t.tid: t.cpu_s for t in profile.threads} == {1: pytest.approx(0.008),
                                                         2: pytest.approx(0.002)}
    assert len(profile.stacks.samples) == 3
    assert [s.frames for s in profile.stacks.samples if s.thread == 2] == [[0]]


def test_thread_records_use_core_accounting_and_meta_names(build, make_meta):
    frames = [(APP, "main", 1, 2)]
    stacks = [(1, (0,), 5 * MS, 0, 0, 0, 5, 0), (7, (0,), 0, 2 * MS, 0, 0, 2, 0),
              (9, (0,), 1 * MS, 0, 0, 0, 1, 0)]
    threads = [(1, True, 6 * MS, 4 * MS), (7, False, 2 * MS, 0)]  # tid 9: only in stacks
    meta = make_meta(thread_names={1: "MainThread", "7": "openblas"})
    profile = build(frames, stacks, threads=threads, meta=meta)
    records = {t.tid: t for t in profile.threads}
    assert [t.tid for t in profile.threads] == [1, 7, 9]
    assert (records[1].name, records[1].python, records[1].cpu_s, records[1].wait_s) == (
        "MainThread", True, 0.006, 0.004)
    assert (records[7].name, records[7].python) == ("openblas", False)
    assert (records[9].name, records[9].python, records[9].cpu_s) == (None, True, 0.001)


def test_run_delay_is_its_own_category_in_lines_functions_threads_stacks_and_totals(build):
    """The core's ninth stack column and fifth thread column: off-CPU time the thread was
    runnable but not scheduled. It is time like the others (in total_s, self_s, inclusive_s),
    never folded into wait."""
    frames = [(APP, "main", 1, 2)]
    stacks = [(1, (0,), 2 * MS, 0, 0, 1 * MS, 2, 3, 6 * MS)]
    profile = build(frames, stacks, threads=[(1, True, 2 * MS, 1 * MS, 6 * MS)])
    rec, fn = line(profile, APP, 2), function(profile, APP, "main")
    assert (rec.wait_s, rec.run_delay_s, rec.total_s) == (0.001, 0.006, pytest.approx(0.009))
    assert (fn.run_delay_s, fn.self_s, fn.inclusive_s) == (0.006, 0.009, 0.009)
    assert (profile.totals.wait_s, profile.totals.run_delay_s) == (0.001, 0.006)
    assert profile.sampled_s == pytest.approx(0.009)
    assert profile.stacks.samples[0].run_delay_s == 0.006
    assert (profile.threads[0].wait_s, profile.threads[0].run_delay_s) == (0.001, 0.006)


def test_cgroup_throttling_goes_to_totals_when_measured(build, make_meta):
    frames = [(APP, "main", 1, 2)]
    stacks = [(1, (0,), 2 * MS, 0, 0, 0, 2, 0)]
    measured = build(frames, stacks, meta=make_meta(cgroup_throttling=(0.25, 3)))
    assert (measured.totals.cgroup_throttled_s, measured.totals.cgroup_throttled_periods) == (
        0.25, 3)
    unknown = build(frames, stacks)
    assert unknown.totals.cgroup_throttled_s is None
    assert "cgroup_throttled_s" not in json.loads(dumps_profile(unknown))["totals"]


def test_missing_thread_names_give_null(build, make_meta):
    meta = make_meta()
    meta.pop("thread_names", None)
    profile = build([(APP, "main", 1, 2)], [(3, (0,), MS, 0, 0, 0, 1, 0)], meta=meta)
    assert profile.threads[0].name is None


def test_lines_are_summed_across_stacks_and_sorted(build):
    frames = [(APP, "f", 1, 9), (APP, "g", 20, 2), (APP, "main", 30, 31), (APP, "main", 30, 32)]
    stacks = [(1, (0, 2), 1 * MS, 0, 0, 0, 1, 0), (1, (0, 3), 2 * MS, 0, 0, 0, 2, 0),
              (2, (1, 2), 0, 0, 4 * MS, 0, 4, 0)]
    profile = build(frames, stacks)
    assert [r.lineno for r in profile.files[APP].lines] == [2, 9]
    assert line(profile, APP, 9).cpu_python_s == pytest.approx(0.003)
    assert line(profile, APP, 9).samples == 3
    assert line(profile, APP, 2).cpu_system_s == pytest.approx(0.004)
    assert [(f.lineno, f.name) for f in profile.files[APP].functions] == [
        (1, "f"), (20, "g"), (30, "main")]


def test_time_is_exact_nanoseconds_to_seconds(build):
    profile = build([(APP, "main", 1, 2)], [(1, (0,), 1, 0, 0, 0, 1, 0)] * 3)
    assert profile.totals.cpu_python_s == 3e-9
    assert line(profile, APP, 2).cpu_python_s == 3e-9


def test_invalid_frame_ids_are_dropped_and_counted(build):
    profile = build([(APP, "main", 1, 2)], [(1, (99, 0, -1), MS, 0, 0, 0, 1, 0)],
                    invalid_frames=2)
    assert line(profile, APP, 2).cpu_python_s == 0.001
    assert profile.sampling.invalid_frames == 4
    assert profile.stacks.samples[0].frames == [0]


def test_negative_line_number_becomes_line_zero(build):
    profile = build([(APP, "main", 1, -1)], [(1, (0,), MS, 0, 0, 0, 1, 0)])
    assert [r.lineno for r in profile.files[APP].lines] == [0]


def test_duplicate_raw_rows_are_merged_and_size_does_not_grow_with_run_length(build):
    frames = [(APP, "main", 1, 2), (DECODER, "decode", 332, 337)]
    short = build(frames, [(1, (1, 0), MS, 0, 0, 0, 1, 0)])
    long = build(frames, [(1, (1, 0), MS, 0, 0, 0, 1, 0)] * 5000)
    assert len(long.stacks.samples) == len(short.stacks.samples) == 1
    assert long.stacks.samples[0].cpu_samples == 5000
    assert len(dumps_profile(long)) < len(dumps_profile(short)) + 32  # only digits differ


def test_profile_only_overrides_library_exclusion(build):
    frames = [(APP, "main", 1, 7), (NUMPY, "sum", 2300, 2313)]
    stacks = [(1, (1, 0), 2 * MS, 0, 0, 0, 2, 0)]
    default = build(frames, stacks)
    assert line(default, APP, 7).cpu_python_s == 0.002
    only = build(frames, stacks, selection_=FileSelection(profile_only=["numpy"]))
    assert list(only.files) == [NUMPY]
    assert line(only, NUMPY, 2313).cpu_python_s == 0.002
    assert only.options.profile_only == ["numpy"]


def test_options_come_from_selection_meta_and_stats(make_raw, make_meta, selection):
    raw = make_raw([(APP, "main", 1, 2)], [(1, (0,), MS, 0, 0, 0, 1, 0)], cpu_interval_ns=5 * MS)
    meta = make_meta(options={"profile_all": True, "future_option": {"x": 1}})
    profile = build_profile(raw, meta=meta, selection=FileSelection(profile_exclude=["test_"]))
    assert profile.options.cpu_sampling_interval_s == 0.005
    assert profile.options.profile_all is False  # the selection that was applied wins
    assert profile.options.profile_exclude == ["test_"]
    assert profile.options.extra == {"future_option": {"x": 1}}


@pytest.mark.parametrize("started_at, expected", [
    (datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc), "2024-05-01T12:00:00Z"),
    (0, "1970-01-01T00:00:00Z"),
    ("2024-05-01T12:00:00+00:00", "2024-05-01T12:00:00+00:00"),
])
def test_started_at_accepts_datetime_epoch_and_text(build, make_meta, started_at, expected):
    profile = build([(APP, "main", 1, 2)], [], meta=make_meta(started_at=started_at))
    assert profile.started_at == expected


def test_meta_defaults_describe_this_process(build, make_meta):
    meta = make_meta()
    for key in ("python_version", "platform", "pid", "exit_code"):
        del meta[key]
    profile = build([], [], meta=meta)
    assert profile.pid > 0 and profile.python_version and profile.exit_code is None
    assert profile.files == {} and profile.sampled_s == 0.0


@pytest.mark.parametrize("override, fragment", [
    ({"elapsed_s": -1.0}, "elapsed_s: expected a non-negative number"),
    ({"program": None}, "program: expected a string, got null"),
    ({"started_at": "yesterday"}, "started_at: expected an ISO-8601 timestamp"),
])
def test_bad_meta_is_a_one_line_format_error(build, make_meta, override, fragment):
    with pytest.raises(ProfileFormatError) as error:
        build([(APP, "main", 1, 2)], [], meta=make_meta(**override))
    assert str(error.value).startswith("build_profile: ")
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_built_profile_is_valid_json_in_the_documented_shape(app_profile):
    data = json.loads(dumps_profile(app_profile))
    assert list(data)[:2] == ["format", "version"]
    assert set(data) == {"format", "version", "program", "argv", "python_version", "platform",
                         "pid", "started_at", "elapsed_s", "exit_code", "options", "sampling",
                         "totals", "threads", "files", "stacks", "hostname"}
    record = next(iter(data["files"].values()))
    assert set(record["lines"][0]) == {"lineno", "cpu_python_s", "cpu_native_s",
                                       "cpu_system_s", "wait_s", "run_delay_s", "samples"}
    assert set(record["functions"][0]) == {"name", "lineno", "cpu_python_s", "cpu_native_s",
                                           "cpu_system_s", "wait_s", "run_delay_s", "self_s",
                                           "inclusive_s", "samples"}
    assert set(data["stacks"]["samples"][0]) == {"thread", "frames", "cpu_python_s",
                                                 "cpu_native_s", "cpu_system_s", "wait_s",
                                                 "run_delay_s", "cpu_samples", "wait_samples"}


def test_documented_sum_invariants_hold(app_profile):
    attributed = sum(r.total_s for _, r in app_profile.lines())
    assert attributed + app_profile.totals.unattributed_s == pytest.approx(app_profile.sampled_s)
    for name in ("cpu_python_s", "cpu_native_s", "cpu_system_s", "wait_s", "run_delay_s"):
        stacked = sum(getattr(s, name) for s in app_profile.stacks.samples)
        assert stacked == pytest.approx(getattr(app_profile.totals, name))
    for _, f in app_profile.functions():
        assert f.self_s == pytest.approx(f.cpu_s + f.wait_s + f.run_delay_s)
        assert f.inclusive_s >= f.self_s
