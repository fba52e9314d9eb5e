"""Checkers of the profile reader: (value, JSON path) -> normalised value, or ``_Invalid``.

Each profile field's declaration (peakline.model.schema, peakline.model.records) names one of
these. A failure travels as ``_Invalid(path, problem)``, the path reading like Python
(``files['/x.py'].lines[3].cpu_python_s``); the entry points (``Profile.from_dict``, the
profile file's reader) add the source and raise ``ProfileFormatError`` with one line
``<source>: <json path>: <problem>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from peakline.errors import ProfileFormatError


class _Invalid(Exception):
    """A validation failure at a JSON path; converted to ProfileFormatError at the entry points."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where = where
        self.problem = problem


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _show(value: Any) -> str:
    """A short, one-line rendering of a bad value for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ---- checkers: (value, where) -> normalised value, or raise _Invalid ----------------------


Checker = Callable[[Any, str], Any]


def _seconds(value: Any, where: str) -> float:
    """A duration in seconds: finite, non-negative; ints accepted and stored as float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(where, f"expected a number, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _Invalid(where, f"expected a finite number, got {_show(value)}")
    if number < 0:
        raise _Invalid(where, f"expected a non-negative number, got {_show(value)}")
    return number


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(where, f"expected an integer, got {_show(value)}")
    return value


def _count(value: Any, where: str) -> int:
    """A non-negative integer: sample counts, line numbers, ids, pids."""
    if _int(value, where) < 0:
        raise _Invalid(where, f"expected a non-negative integer, got {_show(value)}")
    return value


def _instance_of(kind: type, expected: str) -> Checker:
    def check(value: Any, where: str) -> Any:
        if not isinstance(value, kind):
            raise _Invalid(where, f"expected {expected}, got {_show(value)}")
        return value
    return check


_str = _instance_of(str, "a string")
_bool = _instance_of(bool, "true or false")
_object = _instance_of(dict, "an object")


def _nullable(check: Checker) -> Checker:
    return lambda value, where: None if value is None else check(value, where)


def _list_of(check: Checker) -> Checker:
    def checker(value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise _Invalid(where, f"expected a list, got {_show(value)}")
        return [check(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return checker


def _utc_timestamp(value: Any, where: str) -> str:
    """ISO-8601 with a zero UTC offset (``...Z`` or ``...+00:00``); kept as the string."""
    _str(value, where)
    try:
        # 3.10's fromisoformat reads only what isoformat writes: no "Z".
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        raise _Invalid(where, f"expected an ISO-8601 timestamp, got {_show(value)}") from None
    if parsed.utcoffset() != timedelta(0):
        raise _Invalid(where, f"expected a UTC timestamp, got {_show(value)}")
    return value


def _frame(value: Any, where: str) -> tuple:
    """``[file, function, first_lineno, lineno, ...]``; trailing extra columns are kept."""
    if not isinstance(value, list) or len(value) < 4:
        raise _Invalid(where, "expected [file, function, first_lineno, lineno], "
                              f"got {_show(value)}")
    return (_str(value[0], f"{where}[0]"), _str(value[1], f"{where}[1]"),
            _count(value[2], f"{where}[2]"), _count(value[3], f"{where}[3]"), *value[4:])


def _fraction(value: Any, where: str) -> float:
    """A probability or share: a number in [0, 1]."""
    number = _seconds(value, where)
    if number > 1:
        raise _Invalid(where, f"expected a number between 0 and 1, got {_show(value)}")
    return number


def _signed(value: Any, where: str) -> float:
    """A finite number of either sign (a rate of change)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(where, f"expected a finite number, got {_show(value)}")
    return float(value)


def _timeline(value: Any, where: str) -> list:
    """``[[seconds since start, bytes], ...]`` in time order."""
    points = _list_of(lambda v, w: v)(value, where)
    out = []
    for i, point in enumerate(points):
        at = f"{where}[{i}]"
        if not isinstance(point, list) or len(point) != 2:
            raise _Invalid(at, f"expected [seconds, bytes], got {_show(point)}")
        t = _seconds(point[0], f"{at}[0]")
        if out and t < out[-1][0]:
            raise _Invalid(f"{at}[0]", f"timeline must be in time order, got {t} after {out[-1][0]}")
        out.append([t, _int(point[1], f"{at}[1]")])
    return out


def _pair_line(value: Any, where: str) -> list:
    if not isinstance(value, list) or len(value) != 2:
        raise _Invalid(where, f"expected [file, lineno], got {_show(value)}")
    return [_str(value[0], f"{where}[0]"), _count(value[1], f"{where}[1]")]


def _one_of(*choices: str) -> Checker:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise _Invalid(where, f"expected one of {', '.join(choices)}, got {_show(value)}")
        return value
    return check


def _format_error(source: str, where: str, problem: str) -> ProfileFormatError:
    text = f"{source}: {where}: {problem}" if where else f"{source}: {problem}"
    return ProfileFormatError(text.replace("\r", "\\r").replace("\n", "\\n"))
