"""Budget names and values: the one table that `peakline check`, ``[tool.peakline.budgets]`` in
pyproject.toml, the pytest plugin and the JSON verdict all read (docs/gates.md).

A budget is named as its command-line flag without the dashes, with ``_`` for ``-``
(``--max-peak`` is ``max_peak``). Values are converted here and nowhere else:

* sizes (``512K``, ``200MB``, ``1.5GiB``; binary units, as everywhere in peakline) by
  cli/options.py's ``byte_size``;
* durations (``90s``, ``2m``, ``500ms``, ``1.5``: seconds) by ``parse_seconds``;
* rates (``10M``, ``10M/s``): bytes per second;
* ``no_leaks``: a flag (true/false);
* ``baseline`` (a profile path), ``tolerance`` (percent, default 10) and ``repeat`` (runs)
  say how a run is compared with a baseline profile.

Numbers given as numbers (pyproject, pytest keyword arguments) are bytes or seconds.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from peakline.errors import PeaklineError, UsageError

DEFAULT_TOLERANCE_PCT = 10.0
EXIT_OVER_BUDGET = 5  # `peakline check`: every budget was judged and at least one failed


class IncomparableError(PeaklineError):
    """A baseline or comparison profile that cannot be compared with this run (another
    program, another kind of measurement)."""

    exit_code = 3


_TIME_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_seconds(text: str) -> float:
    """``"90s"``, ``"2m"``, ``"500ms"``, ``"1h"``, ``"1.5"`` (seconds) -> seconds."""
    t = str(text).strip().lower()
    scale = 1.0
    for unit in sorted(_TIME_UNITS, key=len, reverse=True):
        if t.endswith(unit) and len(t) > len(unit):
            scale = _TIME_UNITS[unit]
            t = t[: -len(unit)].strip()
            break
    try:
        value = float(t)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (examples: 90s, 2m, 500ms, 1.5)") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a duration: {text!r}")
    return value * scale


def parse_size(text: str) -> int:
    from peakline.cli.options import byte_size
    return byte_size(str(text))


def parse_rate(text: str) -> float:
    """``"10M"`` or ``"10M/s"``: bytes per second."""
    t = str(text).strip()
    if t.lower().endswith("/s"):
        t = t[:-2]
    return float(parse_size(t))


def parse_flag(text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def parse_percent(text: str) -> float:
    try:
        value = float(str(text).strip().rstrip("%"))
    except ValueError:
        raise ValueError(f"not a percentage: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a percentage: {text!r}")
    return value


def parse_repeat(text: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"not a number of runs: {text!r}") from None
    if not 1 <= value <= 1000:
        raise ValueError(f"must be between 1 and 1000, got {text!r}")
    return value


@dataclass(frozen=True)
class BudgetSpec:
    """One budget (or comparison setting): its name, how its value is read, what it means."""

    name: str
    kind: str  # "size", "time", "rate", "flag", "path", "percent", "count"
    metavar: str
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def parse(self) -> Callable[[str], Any]:
        return _PARSERS[self.kind]


_PARSERS: dict[str, Callable[[str], Any]] = {
    "size": parse_size, "time": parse_seconds, "rate": parse_rate, "flag": parse_flag,
    "path": str, "percent": parse_percent, "count": parse_repeat,
}

# Judged budgets, in report order.
BUDGETS: tuple[BudgetSpec, ...] = (
    BudgetSpec("max_peak", "size", "SIZE", "exact heap peak (e.g. 200MB)"),
    BudgetSpec("max_rss", "size", "SIZE", "peak resident set size of the process"),
    BudgetSpec("max_gpu_peak", "size", "SIZE", "peak GPU memory"),
    BudgetSpec("max_time", "time", "SECONDS", "wall-clock time (e.g. 90s, 2m)"),
    BudgetSpec("max_cpu", "time", "SECONDS", "CPU time of all threads (e.g. 90s, 2m)"),
    BudgetSpec("max_leak_rate", "rate", "SIZE",
               "no line leaking faster than SIZE per second (e.g. 1M)"),
    BudgetSpec("no_leaks", "flag", "",
               "no line whose leak likelihood reaches the reports' threshold"),
    BudgetSpec("max_line_peak", "size", "SIZE",
               "no single line holding more than SIZE at the peak"),
)
# How a run is compared with a baseline profile.
SETTINGS: tuple[BudgetSpec, ...] = (
    BudgetSpec("baseline", "path", "OLD.json",
               "fail when peak, RSS, CPU time or a line's memory at the peak grew by more "
               "than --tolerance over this profile"),
    BudgetSpec("tolerance", "percent", "PCT",
               f"allowed growth over --baseline in percent (default {DEFAULT_TOLERANCE_PCT:g})"),
    BudgetSpec("repeat", "count", "N",
               "run the program N times; time figures are the median of the runs, memory "
               "figures the largest"),
)
SPECS: dict[str, BudgetSpec] = {s.name: s for s in (*BUDGETS, *SETTINGS)}
BUDGET_NAMES = tuple(s.name for s in BUDGETS)


def convert(name: str, value: Any, *, source: str) -> Any:
    """The value of budget ``name`` given as ``value`` (text, number or bool) in ``source``
    (e.g. ``--max-peak``, ``pyproject.toml``); UsageError with one line if it is wrong."""
    spec = SPECS.get(name)
    if spec is None:
        raise UsageError(f"{source}: unknown budget {name!r} (known: "
                         f"{', '.join(SPECS)})")
    try:
        if isinstance(value, bool):
            if spec.kind != "flag":
                raise ValueError(f"expected a {spec.kind}, got {value}")
            return value
        if isinstance(value, (int, float)) and spec.kind in ("size", "time", "rate",
                                                              "percent", "count"):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"must be a non-negative number, got {value!r}")
            if spec.kind == "count":
                return parse_repeat(str(value))
            return int(value) if spec.kind == "size" else float(value)
        if not isinstance(value, str):
            raise ValueError(f"expected text or a number, got {type(value).__name__}")
        return spec.parse(value)
    except ValueError as error:
        raise UsageError(f"{source}: {name}: {error}") from None


def convert_all(values: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    return {name: convert(name, value, source=source) for name, value in values.items()}


def parse_assignment(text: str, *, source: str) -> tuple[str, Any]:
    """``max_peak=1GB`` (``--peakline-budget``) -> ("max_peak", bytes); a bare name is a flag."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    return name, convert(name, value.strip() if sep else True, source=source)


# ---- pyproject.toml -------------------------------------------------------------------------

def find_pyproject(start: str) -> str | None:
    """The nearest pyproject.toml at or above ``start``."""
    folder = os.path.abspath(start)
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def config_budgets(pyproject: str | None, *, script: str | None = None,
                   module: str | None = None) -> dict[str, Any]:
    """``[tool.peakline.budgets]`` of ``pyproject``: the global values, then those of the table
    named after the script (a path relative to pyproject.toml's folder) or the module::

        [tool.peakline.budgets]
        max_peak = "1GB"
        [tool.peakline.budgets."scripts/train.py"]
        max_peak = "4GB"
        [tool.peakline.budgets."mypkg.serve"]      # peakline check -m mypkg.serve
        max_time = "30s"

    ``baseline`` paths are made relative to pyproject.toml's folder."""
    if pyproject is None:
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # 3.10: the same parser from PyPI (a dependency there)
        import tomli as tomllib

    source = pyproject
    try:
        with open(pyproject, "rb") as stream:
            data = tomllib.load(stream)
    except OSError as error:
        raise UsageError(f"{source}: cannot read: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{source}: not valid TOML: {error}") from None
    table = data.get("tool", {}).get("peakline", {}).get("budgets", {})
    if not isinstance(table, dict):
        raise UsageError(f"{source}: [tool.peakline.budgets] must be a table")
    root = os.path.dirname(os.path.abspath(pyproject))
    out: dict[str, Any] = {}
    targets: dict[str, dict] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            targets[key] = value
        else:
            out[key] = convert(key, value, source=f"{source}: [tool.peakline.budgets]")
    for key, value in targets.items():
        if _names_target(key, root, script, module):
            out.update(convert_all(value, source=f"{source}: [tool.peakline.budgets.{key!r}]"))
    if isinstance(out.get("baseline"), str):
        out["baseline"] = os.path.join(root, out["baseline"])
    return out


def _names_target(key: str, root: str, script: str | None, module: str | None) -> bool:
    if module is not None and key == module:
        return True
    if script is not None:
        return os.path.realpath(os.path.join(root, key)) == os.path.realpath(script)
    return False
