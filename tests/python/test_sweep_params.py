"""Value lists, targets, placeholders and the run grid of `peakline sweep` (sweep/params.py)."""

from __future__ import annotations

import pytest

from peakline.errors import UsageError
from peakline.sweep import params


@pytest.mark.parametrize("text, values", [
    ("1000,2000,4000", [1000, 2000, 4000]),
    ("1e5, 100_000x".replace("x", "0"), [100000, 1000000]),
    ("2**10,2**20", [1024, 1048576]),
    ("0.5,1.5,2.25", [0.5, 1.5, 2.25]),
    ("1e4..1e6x5", [10000, 31623, 100000, 316228, 1000000]),
    ("1..8x4", [1, 2, 4, 8]),
    ("0.1..10x3", [0.1, 1, 10]),
])
def test_value_lists(text, values):
    assert params.parse_values(text) == values
    assert all(isinstance(v, int) for v in params.parse_values(text) if float(v).is_integer())


@pytest.mark.parametrize("text, fragment", [
    ("", "empty value"), ("1,,2", "empty value"), ("abc", "not a number"),
    ("-5,1,2", "not a number"), ("0,1,2", "not a positive number"), ("1,1,2", "repeated"),
    ("1e4..1e6x1", "2 to 1000 values"), ("1e6..1e4x3", "must go up"), ("10**10**10", "too large"),
    ("1__0", "not a number"), ("1..3x5", "too many values"), ("nan,1,2", "not a number"),
])
def test_malformed_value_lists(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        params.parse_values(text)


def test_vary_and_targets():
    vary = params.parse_vary(["ROWS=1000,2000,3000", "COLS=10,20,40"])
    assert [(v.name, v.values) for v in vary] == [("ROWS", (1000, 2000, 3000)),
                                                  ("COLS", (10, 20, 40))]
    assert params.parse_targets(["ROWS=1e7"], vary) == {"ROWS": 10_000_000}
    assert len(params.grid(vary)) == 9
    assert params.grid(vary)[:2] == [{"ROWS": 1000, "COLS": 10}, {"ROWS": 1000, "COLS": 20}]


@pytest.mark.parametrize("texts, fragment", [
    (["ROWS"], "expected NAME=VALUES"), (["1ROWS=1,2,3"], "expected NAME=VALUES"),
    (["ROWS=1,2,3", "ROWS=4,5,6"], "given twice"), (["ROWS=1,x,3"], "--vary ROWS: not a number"),
])
def test_bad_vary(texts, fragment):
    with pytest.raises(UsageError, match=fragment):
        params.parse_vary(texts)


def test_bad_target():
    vary = params.parse_vary(["ROWS=1,2,3"])
    with pytest.raises(UsageError, match="not a varied name"):
        params.parse_targets(["COLS=5"], vary)
    with pytest.raises(UsageError, match="--target ROWS: not a number"):
        params.parse_targets(["ROWS=big"], vary)


def test_placeholders_are_substituted_with_as_arg_only():
    vary = params.parse_vary(["N=1e3,2e3,4e3"])
    args = ["--rows", "{N}", "--name=run-{N}", "{}", "{0}"]
    params.check_placeholders(args, vary, as_arg=True)
    assert params.substitute(args, {"N": 1000}) == ["--rows", "1000", "--name=run-1000", "{}",
                                                    "{0}"]
    with pytest.raises(UsageError, match=r"unknown placeholder \{M\}"):
        params.check_placeholders(["{M}", "{N}"], vary, as_arg=True)
    with pytest.raises(UsageError, match="does not appear"):
        params.check_placeholders(["--rows", "5"], vary, as_arg=True)
    with pytest.raises(UsageError, match="only replaced with --as arg"):
        params.check_placeholders(["{N}"], vary, as_arg=False)


def test_values_reach_the_program_as_plain_numbers():
    assert params.format_value(100000) == "100000"
    assert params.format_value(0.5) == "0.5"
    assert params.label({"N": 1000, "F": 0.25}) == "N=1000 F=0.25"
