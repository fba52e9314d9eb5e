"""Fuzzing `peakline view` end to end: whatever bytes the profile file holds, the command
either renders every output or prints one line `peakline: error: ...` and exits 3 — never a
traceback. (test_model.py fuzzes the reader alone; this adds the CLI and every renderer, which
must cope with anything the reader accepts: odd numbers, empty tables, strange file names.)

Runs in-process (cli.main.main) so hundreds of examples take seconds; test_view.py covers the
same contract through a real subprocess for the classic bad files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic_memory import with_memory

from peakline.cli import main as cli
from peakline.model.profile import Profile
from peakline.model.profile_file import dumps_profile
from peakline.reporters import html, speedscope, terminal

_SETTINGS = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 66), 2 ** 66)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
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


def _mutate(document, data):
    paths = [p for p in _paths(document) if p]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()):
                del parent[path[-1]]
            else:
                parent[path[-1]] = data.draw(_JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            continue
    return document


@st.composite
def _mutated_bytes(draw, valid: bytes):
    raw = bytearray(valid)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(0, len(raw) - 1)))
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
        if kind == "truncate":
            del raw[at:]
        elif kind == "flip" and raw:
            raw[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            raw[at:at] = draw(st.binary(max_size=4))
        else:
            del raw[at:at + draw(st.integers(1, 30))]
    return bytes(raw)


def run_view(path, tmp_dir) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = ["view", str(path), "--text", "--html", os.path.join(tmp_dir, "r.html"),
            "--speedscope", os.path.join(tmp_dir, "r.ss.json")]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    return code, out.getvalue(), err.getvalue()


def check_view(content: bytes, tmp_dir: str) -> None:
    path = os.path.join(tmp_dir, "fuzz.json")
    with open(path, "wb") as stream:
        stream.write(content)
    code, out, err = run_view(path, tmp_dir)
    if code == 0:
        assert out.startswith("peakline")
        json.load(open(os.path.join(tmp_dir, "r.ss.json")))
        return
    assert code == 3, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"peakline: error: {path}"), err
    assert out == ""


@_SETTINGS
@given(data=st.data())
def test_view_survives_byte_mutations(app_profile, tmp_path, data):
    valid = dumps_profile(with_memory(app_profile)).encode()
    check_view(data.draw(_mutated_bytes(valid)), str(tmp_path))


@_SETTINGS
@given(data=st.data())
def test_view_survives_structural_mutations(app_profile, tmp_path, data):
    document = _mutate(with_memory(app_profile).to_dict(), data)
    check_view(json.dumps(document).encode(), str(tmp_path))


@_SETTINGS
@given(lines=st.lists(st.fixed_dictionaries({
    "lineno": st.integers(0, 10 ** 6),
    "cpu_python_s": st.floats(0, 1e6), "wait_s": st.floats(0, 1e6),
    "alloc_python_bytes": st.integers(0, 2 ** 62), "alloc_native_bytes": st.integers(0, 2 ** 62),
    "net_bytes": st.integers(-(2 ** 62), 2 ** 62),
    "live_at_peak_bytes": st.integers(-(2 ** 40), 2 ** 62),
    "leak_likelihood": st.floats(0, 1), "leak_rate_bytes_s": st.floats(-1e12, 1e12),
    "copy_mb_s": st.floats(0, 1e9),
    "timeline": st.lists(st.tuples(st.floats(0, 1e4), st.integers(-(2 ** 40), 2 ** 62)),
                         max_size=5).map(lambda ps: [list(p) for p in sorted(ps)]),
}), max_size=4, unique_by=lambda d: d["lineno"]), width=st.integers(1, 300))
def test_renderers_accept_any_valid_numbers(app_profile, lines, width):
    """Extreme but valid values (huge, negative where allowed, line numbers past the end of
    the source, timelines outside the run) never break a renderer or the width."""
    document = with_memory(app_profile).to_dict()
    name = next(iter(document["files"]))
    base = {"cpu_native_s": 0.0, "cpu_system_s": 0.0, "samples": 1, "free_bytes": 0,
            "copy_bytes": 0}
    document["files"][name]["lines"] = sorted(({**base, **line} for line in lines),
                                              key=lambda r: r["lineno"])
    profile = Profile.from_dict(document)
    stream = io.StringIO()
    terminal.render(profile, stream, width=width, color=True)
    cut = max(width, terminal.MIN_WIDTH)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue())
    assert all(len(row) <= cut for row in plain.splitlines())
    json.dumps(speedscope.to_speedscope(profile), allow_nan=False)
    page = io.StringIO()
    html.render(profile, page)
    assert page.getvalue().count("</script>") == 3
