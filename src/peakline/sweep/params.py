"""The varied names and their values: ``--vary NAME=V1,V2,...``, ``--target NAME=V`` and the
runs they make (the cross product), with ``{NAME}`` placeholders in the program's arguments.

Value syntax (one comma-separated list; every value a positive number):

    1000, 1e5, 2.5e6, 100_000, 2**20     single values
    1e4..1e6x5                           5 values spaced evenly on a log scale, ends included

A value is kept as an int when it is integral (``1e5`` -> 100000), so the program reads
``NUM_SAMPLES=100000`` whether it calls ``int()`` or ``float()``. Log-spaced values between
integer ends are rounded to integers.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from peakline.errors import UsageError

Number = int | float

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NUMBER = re.compile(r"[0-9][0-9_]*(\.[0-9_]*)?([eE][+-]?[0-9]+)?\Z|\.[0-9]+([eE][+-]?[0-9]+)?\Z")
_RANGE = re.compile(r"(?P<lo>[^.].*?)\.\.(?P<hi>.+?)x(?P<count>[0-9]+)\Z")
MAX_RANGE_COUNT = 1000


def parse_number(text: str) -> Number:
    """``1e5``, ``100_000``, ``2**20``, ``0.5`` -> a positive int or float. ValueError if not."""
    t = text.strip()
    if "**" in t:
        base, _, power = t.partition("**")
        try:
            value: Number = float(parse_number(base)) ** float(parse_number(power))
        except OverflowError:
            raise ValueError(f"too large: {text!r}") from None
    else:
        if not _NUMBER.match(t) or "__" in t or t.endswith("_"):
            raise ValueError(f"not a number: {text!r}")
        value = float(t.replace("_", ""))
    if isinstance(value, complex) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"not a positive number: {text!r}")
    if value == int(value) and abs(value) < 2 ** 63:
        return int(value)
    return float(value)


def parse_values(text: str) -> list[Number]:
    """The value list of one ``--vary``; ValueError with the offending item."""
    values: list[Number] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"empty value in {text!r}")
        ranged = _RANGE.match(item)
        if ranged:
            values.extend(_log_range(ranged["lo"], ranged["hi"], ranged["count"], item))
        else:
            values.append(parse_number(item))
    if len(set(values)) != len(values):
        raise ValueError(f"repeated value in {text!r} (use --repeat to run a size again)")
    return values


def _log_range(lo_text: str, hi_text: str, count_text: str, item: str) -> list[Number]:
    lo, hi, count = parse_number(lo_text), parse_number(hi_text), int(count_text)
    if not 2 <= count <= MAX_RANGE_COUNT:
        raise ValueError(f"{item!r}: a range needs 2 to {MAX_RANGE_COUNT} values")
    if hi <= lo:
        raise ValueError(f"{item!r}: the range must go up (LOW..HIGHxCOUNT)")
    step = (math.log(hi) - math.log(lo)) / (count - 1)
    out = [math.exp(math.log(lo) + i * step) for i in range(count)]
    out[0], out[-1] = lo, hi
    if isinstance(lo, int) and isinstance(hi, int):
        rounded = [int(round(v)) for v in out]
        if len(set(rounded)) != count:
            raise ValueError(f"{item!r}: too many values for that integer range")
        return rounded
    return [parse_number(f"{v:.12g}") for v in out]  # 1.0000000000000004 -> 1


def format_value(value: Number) -> str:
    """How a value reaches the program: ``100000``, ``0.5`` (never ``1e+05``)."""
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def split_assignment(text: str, option: str) -> tuple[str, str]:
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise UsageError(f"{option} {text!r}: expected NAME=VALUES with NAME a letter or _ "
                         "followed by letters, digits or _")
    return name, rest


@dataclass(frozen=True)
class Vary:
    name: str
    values: tuple[Number, ...]


def parse_vary(texts: Sequence[str]) -> list[Vary]:
    """Every ``--vary``; UsageError (one line) for a malformed one."""
    out: list[Vary] = []
    for text in texts:
        name, rest = split_assignment(text, "--vary")
        if any(v.name == name for v in out):
            raise UsageError(f"--vary {name} is given twice")
        try:
            values = parse_values(rest)
        except ValueError as error:
            raise UsageError(f"--vary {name}: {error}") from None
        out.append(Vary(name, tuple(values)))
    return out


def parse_targets(texts: Sequence[str], vary: Sequence[Vary]) -> dict[str, Number]:
    names = [v.name for v in vary]
    out: dict[str, Number] = {}
    for text in texts:
        name, rest = split_assignment(text, "--target")
        if name not in names:
            raise UsageError(f"--target {name}: not a varied name (varied: {', '.join(names)})")
        try:
            out[name] = parse_number(rest)
        except ValueError as error:
            raise UsageError(f"--target {name}: {error}") from None
    return out


def grid(vary: Sequence[Vary]) -> list[dict[str, Number]]:
    """Every combination, the first name varying slowest."""
    return [dict(zip((v.name for v in vary), combo))
            for combo in itertools.product(*(v.values for v in vary))]


def placeholders(args: Sequence[str]) -> set[str]:
    return {m.group(1) for arg in args for m in _PLACEHOLDER.finditer(arg)}


def check_placeholders(args: Sequence[str], vary: Sequence[Vary], as_arg: bool) -> None:
    """``--as arg``: every ``{NAME}`` is a varied name and every varied name is used.
    ``--as env``: a ``{NAME}`` of a varied name would reach the program verbatim, so it is
    refused with the hint."""
    names = {v.name for v in vary}
    found = placeholders(args)
    if as_arg:
        unknown = sorted(found - names)
        if unknown:
            raise UsageError(f"unknown placeholder {{{unknown[0]}}} in the program's arguments "
                             f"(varied: {', '.join(sorted(names))})")
        unused = [v.name for v in vary if v.name not in found]
        if unused:
            raise UsageError(f"--as arg: {{{unused[0]}}} does not appear in the program's "
                             "arguments, so every run would be the same")
    elif found & names:
        name = sorted(found & names)[0]
        raise UsageError(f"{{{name}}} in the program's arguments is only replaced with "
                         "--as arg (the default, --as env, sets an environment variable)")


def substitute(args: Sequence[str], params: dict[str, Number]) -> list[str]:
    return [_PLACEHOLDER.sub(lambda m: format_value(params[m.group(1)])
                             if m.group(1) in params else m.group(0), arg) for arg in args]


def label(params: dict[str, Number]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())
