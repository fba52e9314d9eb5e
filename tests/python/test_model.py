"""The Profile model and file format v1: round trips, validation errors, fuzzing; FileSelection."""

from __future__ import annotations

import copy
import json
import os
import re
import sysconfig

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import peakline.model.profile as profile_module
import peakline.model.profile_file as profile_file_module
from peakline.errors import ProfileFormatError
from peakline.model.selection import has_stdlib_component
from peakline.model import (
    FORMAT_VERSION,
    FileSelection,
    LineRecord,
    Profile,
    dumps_profile,
    loads_profile,
    read_profile,
    write_profile,
)
from peakline.model.checks import _count, _Invalid
from peakline.model import schema
from peakline.reporters import json_report

# ---- round trips --------------------------------------------------------------------------


def test_write_then_read_gives_an_equal_profile(app_profile, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    path = out / "profile.json"
    write_profile(app_profile, path)
    loaded = read_profile(path)
    assert loaded == app_profile
    assert loaded.to_dict() == app_profile.to_dict()
    assert [p.name for p in out.iterdir()] == ["profile.json"]  # no temp file left


def test_json_report_writes_the_profile_file(app_profile, tmp_path):
    import io
    stream = io.StringIO()
    json_report.render(app_profile, stream)
    path = tmp_path / "p.json"
    write_profile(app_profile, path)
    assert stream.getvalue() == path.read_text()
    assert loads_profile(stream.getvalue()) == app_profile


def test_unknown_fields_survive_read_then_write(app_profile):
    data = app_profile.to_dict()
    data["timeline"] = [[0.0, 1024]]
    data["totals"]["peak_bytes"] = 4096
    data["options"]["memory"] = True
    data["threads"][0]["gpu_util_s"] = 0.5
    record = next(iter(data["files"].values()))
    record["lines"][0]["tpu_util_s"] = 0.25  # gpu_util_s is a known field
    record["functions"][0]["net_bytes"] = -7
    record["leaks"] = []
    data["stacks"]["frames"][0].append("extra column")
    data["stacks"]["samples"][0]["alloc_bytes"] = 9
    again = Profile.from_dict(json.loads(json.dumps(data))).to_dict()
    assert again == data
    assert loads_profile(json.dumps(data)).files[next(iter(data["files"]))].lines[0].extra == {
        "tpu_util_s": 0.25}


def test_known_optional_fields_are_validated_when_present_and_omitted_when_none():
    # The mechanism later memory/GPU fields use: one more optional field in the record's
    # declaration, which makes the model's attribute too.
    @schema.record
    class NpuLine(LineRecord):
        _FIELDS = LineRecord._FIELDS + (schema._optional("npu_bytes", _count),)

    base = {"lineno": 3, "cpu_python_s": 0, "cpu_native_s": 0, "cpu_system_s": 0,
            "wait_s": 0, "samples": 1}
    assert "npu_bytes" not in NpuLine._from_json(base, "x").to_dict()
    record = NpuLine._from_json({**base, "npu_bytes": 64}, "x")
    assert record.npu_bytes == 64 and record.extra == {}
    assert record.to_dict()["npu_bytes"] == 64
    with pytest.raises(_Invalid) as error:
        NpuLine._from_json({**base, "npu_bytes": -1}, "x")
    assert error.value.where == "x.npu_bytes"
    # The memory fields are built in the same way.
    assert "alloc_python_bytes" not in LineRecord._from_json(base, "x").to_dict()
    with pytest.raises(_Invalid) as error:
        LineRecord._from_json({**base, "alloc_python_bytes": -1}, "x")
    assert error.value.where == "x.alloc_python_bytes"


def test_atomic_write_keeps_the_old_file_when_the_rename_fails(app_profile, tmp_path,
                                                                 monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    path = out / "profile.json"
    path.write_text("old")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(profile_file_module.os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_profile(app_profile, path)
    assert path.read_text() == "old"
    assert [p.name for p in out.iterdir()] == ["profile.json"]


def test_written_file_follows_the_umask(app_profile, tmp_path):
    old = os.umask(0o022)
    try:
        write_profile(app_profile, tmp_path / "p.json")
    finally:
        os.umask(old)
    assert (tmp_path / "p.json").stat().st_mode & 0o777 == 0o644


def test_queries(app_profile, app_source):
    hottest = app_profile.hottest_lines(2)
    assert [(f, r.lineno) for f, r in hottest] == [(app_source, 3), (app_source, 9)]
    assert app_profile.hottest_lines(0) == []
    assert sorted(r.lineno for _, r in app_profile.lines()) == [3, 5, 9, 11]
    totals = app_profile.file_totals()[app_source]
    assert totals.cpu_python_s == pytest.approx(0.605)
    assert totals.cpu_native_s == pytest.approx(0.3)
    assert totals.wait_s == pytest.approx(0.5)
    assert app_profile.sampled_s == pytest.approx(1.425)
    assert app_profile.attributed_fraction == pytest.approx(1 - 0.02 / 1.425)
    assert {name for _, f in app_profile.functions() for name in [f.name]} == {
        "<module>", "main", "work"}


# ---- validation errors --------------------------------------------------------------------

def _valid(app_profile):
    return app_profile.to_dict()


def _first_file(data):
    return next(iter(data["files"]))


def _mutate(path_and_value):
    """Set data[...path...] = value; a value of DELETE removes the key."""
    def apply(data):
        *parents, last = path_and_value[0]
        target = data
        for key in parents:
            target = target[_first_file(data)] if key == "FILE" else target[key]
        if path_and_value[1] is DELETE:
            del target[last]
        else:
            target[last] = path_and_value[1]
        return data
    return apply


DELETE = object()

BAD_DOCUMENTS = [
    (_mutate((["format"], "scalene")), "format: not a peakline profile (format is 'scalene')"),
    (_mutate((["format"], DELETE)), "not a peakline profile (no 'format' field)"),
    (_mutate((["version"], FORMAT_VERSION + 1)), "version: written by a newer peakline"),
    (_mutate((["version"], 0)), "version: unknown format version 0"),
    (_mutate((["version"], "1")), "version: expected an integer, got '1'"),
    (_mutate((["program"], DELETE)), "missing required field 'program'"),
    (_mutate((["totals", "wait_s"], DELETE)), "totals: missing required field 'wait_s'"),
    (_mutate((["elapsed_s"], -0.5)), "elapsed_s: expected a non-negative number, got -0.5"),
    (_mutate((["elapsed_s"], True)), "elapsed_s: expected a number, got true"),
    (_mutate((["pid"], 1.5)), "pid: expected an integer, got 1.5"),
    (_mutate((["argv"], "app.py")), "argv: expected a list, got 'app.py'"),
    (_mutate((["argv", 0], 3)), "argv[0]: expected a string, got 3"),
    (_mutate((["exit_code"], "0")), "exit_code: expected an integer, got '0'"),
    (_mutate((["started_at"], "2024-05-01T12:00:00+02:00")), "started_at: expected a UTC"),
    (_mutate((["options", "profile_all"], 1)), "options.profile_all: expected true or false"),
    (_mutate((["sampling", "dropped_samples"], -1)), "sampling.dropped_samples: expected a "
                                                     "non-negative integer, got -1"),
    (_mutate((["threads"], {})), "threads: expected a list, got an object"),
    (_mutate((["threads", 0, "name"], 5)), "threads[0].name: expected a string, got 5"),
    (_mutate((["files", "FILE", "lines", 0, "cpu_native_s"], -1e-9)),
     "].lines[0].cpu_native_s: expected a non-negative number"),
    (_mutate((["files", "FILE", "functions"], None)), "].functions: expected a list, got null"),
    (_mutate((["files", "FILE", "lines", 1, "lineno"], 3)),
     "].lines[1].lineno: lines must be sorted by lineno without repeats, got 3 after 3"),
    (_mutate((["stacks", "frames", 0], ["a.py", "f", 1])),
     "stacks.frames[0]: expected [file, function, first_lineno, lineno]"),
    (_mutate((["stacks", "samples", 0, "frames", 0], 10_000)),
     "stacks.samples[0].frames[0]: frame id 10000 out of range (7 frames)"),
    (_mutate((["stacks", "samples", 0, "wait_s"], 10 ** 400)),
     "stacks.samples[0].wait_s: expected a finite number"),
]


@pytest.mark.parametrize("mutate, fragment", BAD_DOCUMENTS)
def test_bad_documents_raise_one_line_errors(app_profile, tmp_path, mutate, fragment):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(mutate(_valid(app_profile))))
    with pytest.raises(ProfileFormatError) as error:
        read_profile(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ")
    assert fragment in message
    assert "\n" not in message


def test_error_message_names_the_exact_field(app_profile, app_source):
    data = _valid(app_profile)
    data["files"] = {"/x.py": {"lines": [dict(r.to_dict()) for r in
                                         app_profile.files[app_source].lines],
                               "functions": []}}
    data["files"]["/x.py"]["lines"][3]["cpu_python_s"] = "abc"
    with pytest.raises(ProfileFormatError) as error:
        Profile.from_dict(data, source="profile.json")
    assert str(error.value) == (
        "profile.json: files['/x.py'].lines[3].cpu_python_s: expected a number, got 'abc'")


def test_non_finite_numbers_in_a_dict_are_rejected(app_profile):
    data = _valid(app_profile)
    data["stacks"]["samples"][0]["cpu_python_s"] = float("nan")
    with pytest.raises(ProfileFormatError) as error:
        Profile.from_dict(data, source="p.json")
    assert str(error.value) == ("p.json: stacks.samples[0].cpu_python_s: "
                                "expected a finite number, got nan")


def test_duplicate_thread_ids_are_rejected(app_profile):
    data = _valid(app_profile)
    data["threads"].append(copy.deepcopy(data["threads"][0]))
    with pytest.raises(ProfileFormatError, match=r"threads\[1\]\.tid: duplicate thread id 1"):
        Profile.from_dict(data)


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty file, not a profile"),
    (b"   \n", "empty file, not a profile"),
    (b"[1, 2]", "expected an object, got a list"),
    (b"\"peakline\"", "expected an object, got 'peakline'"),
    (b"{\"format\": \"peakline\", \"version\": 1", "not valid JSON (truncated or corrupt)"),
    (b"\xff\xfe{}", "not UTF-8 text"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    (b"1" * 5000, "not valid JSON"),  # beyond int()'s digit limit: ValueError, not JSON error
    (b'{"format": "peakline", "future": NaN}', "NaN is not a number JSON allows"),
    (b'{"format": "peakline", "future": 1e999}', "number 1e999 is out of range"),
])
def test_corrupt_files_raise_one_line_errors(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ProfileFormatError) as error:
        read_profile(path)
    assert fragment in str(error.value)
    assert str(error.value).startswith(str(path))
    assert "\n" not in str(error.value)


def test_truncated_profile_file_is_rejected(app_profile, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(dumps_profile(app_profile)[:-40])
    with pytest.raises(ProfileFormatError, match="truncated or corrupt"):
        read_profile(path)


def test_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(ProfileFormatError, match="cannot read: No such file"):
        read_profile(tmp_path / "absent.json")


def test_file_names_with_newlines_keep_the_message_on_one_line(app_profile):
    data = _valid(app_profile)
    data["files"]["/evil\nname.py"] = {"lines": 3, "functions": []}
    with pytest.raises(ProfileFormatError) as error:
        Profile.from_dict(data, source="a\nb.json")
    assert "\n" not in str(error.value)


# ---- fuzzing: the reader either loads a file or raises ProfileFormatError, nothing else ----

@st.composite
def _mutated_text(draw, valid_text):
    text = valid_text
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "replace", "insert", "delete"]))
        at = draw(st.integers(0, max(0, len(text) - 1)))
        if kind == "truncate":
            text = text[:at]
        elif kind == "replace":
            text = text[:at] + draw(st.sampled_from(list('0-9.e"{}[],:nulltruefalse \\x'))) + \
                text[at + 1:]
        elif kind == "insert":
            text = text[:at] + draw(st.text(max_size=4)) + text[at:]
        else:
            text = text[:at] + text[at + draw(st.integers(1, 20)):]
    return text


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats()
    | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5),
                                                                      children, max_size=3),
    max_leaves=6)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, prefix + (index,))


def _load_or_format_error(text):
    try:
        profile = loads_profile(text, source="fuzz.json")
    except ProfileFormatError as error:
        assert "\n" not in str(error) and str(error).startswith("fuzz.json")
        return
    # anything that loads must write and load again to the same thing
    assert loads_profile(dumps_profile(profile)) == profile


_FUZZ_SETTINGS = settings(max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ_SETTINGS
@given(data=st.data())
def test_fuzz_text_mutations(app_profile, data):
    _load_or_format_error(data.draw(_mutated_text(dumps_profile(app_profile))))


@_FUZZ_SETTINGS
@given(data=st.data())
def test_fuzz_structural_mutations(app_profile, data):
    document = app_profile.to_dict()
    paths = [p for p in _paths(document) if p]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            action = data.draw(st.sampled_from(["delete", "replace", "add"]))
            if action == "delete":
                del parent[path[-1]]
            elif action == "add" and isinstance(parent[path[-1]], (dict, list)):
                target = parent[path[-1]]
                value = data.draw(_JSON_VALUES)
                if isinstance(target, dict):
                    target[data.draw(st.text(max_size=8))] = value
                else:
                    target.append(value)
            else:
                parent[path[-1]] = data.draw(_JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    _load_or_format_error(json.dumps(document))


# ---- FileSelection ------------------------------------------------------------------------

STDLIB = "/usr/lib/python3.11"


@pytest.mark.parametrize("filename, reported", [
    ("/home/u/app.py", True),
    ("relative/app.py", True),
    ("/usr/lib/python3.11/json/decoder.py", False),           # stdlib (library_dirs)
    ("/opt/conda/lib/python3.12/threading.py", False),        # another interpreter's stdlib
    ("/opt/py/lib/python3.13t/asyncio/events.py", False),     # free-threaded build layout
    ("/home/u/.venv/lib/python3.11/site-packages/numpy/core/fromnumeric.py", False),
    ("/usr/lib/python3/dist-packages/yaml/__init__.py", False),
    ("/opt/bundle/dist-packages/yaml/__init__.py", False),
    ("/opt/bundle/site-packages/yaml/__init__.py", False),
    ("C:\\Python311\\Lib\\site-packages\\pandas\\core\\frame.py", False),
    ("<frozen importlib._bootstrap>", False),
    ("<frozen os>", False),
    ("<string>", False),
    ("", False),
    ("<stdin>", True),
    ("<console>", True),
    ("<ipython-input-3-8f1c2f4a1b2c>", True),
    ("<cell line: 1>", True),
    ("/tmp/ipykernel_4242/1234567.py", True),                 # Jupyter cell file
])
def test_default_selection_reports_user_code_only(filename, reported):
    assert FileSelection(library_dirs=[STDLIB]).is_reported(filename) is reported


@pytest.mark.parametrize("key", ["stdlib", "platstdlib", "purelib", "platlib"])
def test_default_selection_covers_this_interpreters_sysconfig_paths(key):
    # The selection no longer reads sysconfig (it is not imported while the program runs):
    # every directory sysconfig names must still be a library by the rules it does use.
    path = sysconfig.get_paths()[key]
    for name in ("json/decoder.py", "pkg/mod.py"):
        assert FileSelection().is_reported(os.path.join(path, name)) is False, (key, path)
        # ... also through the path rules alone, as for another interpreter's profile
        assert FileSelection(library_dirs=[]).is_reported(os.path.join(path, name)) is False
    assert FileSelection(library_dirs=[]).is_reported("/home/u/app.py") is True


_STDLIB_COMPONENT_RE = re.compile(r"[/\\]lib(64)?[/\\]python\d+(\.\d+)?t?[/\\]", re.IGNORECASE)


@pytest.mark.parametrize("path", [
    "/usr/lib/python3.11/json/decoder.py", "/usr/lib64/python3.13t/os.py",
    "C:\\Py\\Lib\\python3.12\\x.py", "/opt/LIB/PYTHON3/x.py", "/a/lib/python3./x.py",
    "/a/lib/python3.x/y.py", "/a/lib/python/x.py", "/a/mylib/python3.11/x.py",
    "/a/lib/python3.11", "/a/lib/python3.11t/", "/a/lib/python3.11tt/x", "/lib/python3/lib/python3.9/a",
    "/a/lib64/python310/x.py", "/a/lib/pythonista/x.py", "/a/lib/python3.11.2/x.py",
    "/home/u/python3.11/lib/x.py", "lib/python3.11/x.py", "/a/lib/python3.11\\x.py",
])
def test_stdlib_component_rule_matches_the_regex_it_replaced(path):
    assert has_stdlib_component(path) is bool(_STDLIB_COMPONENT_RE.search(path))


def test_library_dirs_exclude_files_under_them_only():
    selection = FileSelection(library_dirs=["/srv/vendored"])
    assert selection.is_reported("/srv/vendored/lib.py") is False
    assert selection.is_reported("/srv/vendored-not/app.py") is True


def test_peakline_own_files_are_never_reported():
    own = profile_module.__file__
    assert FileSelection().is_reported(own) is False
    assert FileSelection(profile_all=True).is_reported(own) is False
    assert FileSelection(profile_only=["peakline"]).is_reported(own) is False


def test_profile_all_reports_libraries_and_pseudo_files():
    selection = FileSelection(profile_all=True, library_dirs=[STDLIB])
    assert selection.is_reported("/usr/lib/python3.11/json/decoder.py")
    assert selection.is_reported("<frozen os>")


def test_profile_only_requires_a_match_and_overrides_library_exclusion():
    selection = FileSelection(profile_only=["numpy", "app"], library_dirs=[STDLIB])
    assert selection.is_reported("/v/lib/python3.11/site-packages/numpy/linalg.py")
    assert selection.is_reported("/home/u/app.py")
    assert not selection.is_reported("/home/u/other.py")


def test_profile_exclude_wins_over_everything():
    selection = FileSelection(profile_all=True, profile_only=["app"], profile_exclude=["tests/"])
    assert not selection.is_reported("/home/u/tests/app_test.py")
    assert selection.is_reported("/home/u/app.py")


def test_empty_substrings_are_ignored():
    selection = FileSelection(profile_only=[""], profile_exclude=[""], library_dirs=[STDLIB])
    assert selection.profile_only == () and selection.profile_exclude == ()
    assert selection.is_reported("/home/u/app.py")


def test_answers_are_cached(monkeypatch):
    selection = FileSelection(library_dirs=[STDLIB])
    calls = []
    original = FileSelection._decide
    monkeypatch.setattr(FileSelection, "_decide",
                        lambda self, name: calls.append(name) or original(self, name))
    for _ in range(3):
        assert selection.is_reported("/home/u/app.py")
    assert calls == ["/home/u/app.py"]


# ---- the spec's example stays valid -------------------------------------------------------

def test_the_example_in_the_spec_loads_with_the_reference_reader():
    spec = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "profile-format.md")
    with open(spec, encoding="utf-8") as stream:
        text = stream.read()
    example = text.split("```json", 1)[1].split("```", 1)[0]
    profile = loads_profile(example, source="profile-format.md")
    assert profile.files["/home/u/app.py"].lines[0].lineno == 7
    assert profile.totals.unattributed_s == 0.002


def test_opcode_table_matches_dis():
    # session.all_opmap rebuilds dis._all_opmap from the opcode module (dis is not imported
    # while the program runs); CI runs this on every supported CPython.
    import dis

    from peakline.session import all_opmap, call_opcode_table
    assert all_opmap() == getattr(dis, "_all_opmap", dis.opmap)
    table = call_opcode_table()
    # 3.10 has no CALL: it calls by CALL_FUNCTION (and _KW, _EX) and CALL_METHOD.
    calls = [name for name in ("CALL", "CALL_FUNCTION", "CALL_METHOD") if name in dis.opmap]
    assert calls and all(table[dis.opmap[name]] == 1 for name in calls)
    assert table[dis.opmap["LOAD_FAST"]] == 0
    # A specialised call of a Python function runs no C callable (3.11+); one of a builtin does.
    ops = getattr(dis, "_all_opmap", dis.opmap)
    if "CALL_PY_EXACT_ARGS" in ops:
        assert table[ops["CALL_PY_EXACT_ARGS"]] == 0
        builtin = next(name for name in ("CALL_BUILTIN_O", "CALL_NO_KW_BUILTIN_O",
                                         "PRECALL_NO_KW_BUILTIN_O") if name in ops)
        assert table[ops[builtin]] == 1


_OPTION_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@given(_OPTION_VALUES)
@settings(max_examples=300, deadline=None)
def test_child_options_json_reads_back_like_json_dumps(value):
    # peakline.child writes the children's options without the json module (see json_text).
    from peakline.child import json_text
    text = json_text(value)
    assert text.isascii()
    assert json.loads(text) == json.loads(json.dumps(value))
