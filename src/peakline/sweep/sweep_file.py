"""The sweep file (``sweep.json``): its writer and its validating reader. The spec is
docs/sweep.md; like the profile file it is JSON only, versioned by ``format`` and
``version``, and a reader error is one line (ProfileFormatError, exit status 3).

Layout (each run's profile stays a profile file of its own, next to the sweep file):

    {"format": "peakline-sweep", "version": 1,
     "program": ..., "argv": [...], "as": "env" | "arg", "run_options": [...],
     "vary": [{"name": "NUM_SAMPLES", "values": [...]}], "target": {NAME: V} | null,
     "repeat": 1, "started_at": ..., "elapsed_s": ..., "complete": true,
     "runs": [{"index", "params", "repeat", "status", "exit_code", "error", "profile", "log",
               "wall_s", "peak_bytes", "peak_rss_bytes", "cpu_s", "elapsed_s",
               "gpu_peak_bytes", "summary"}],
     "fits": {"program": {QUANTITY: FIT}, "program_by_name": {NAME: {QUANTITY: FIT}},
              "lines": [...], "functions": [...], "phases": [...], "at_target": [...]}}
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from peakline.model.checks import (_Invalid, _at, _count, _format_error, _int, _list_of,
                                   _nullable, _object, _seconds, _show, _str)
from peakline.model.profile_file import read_bytes, strict_json, utf8_text, write_text_atomically
from peakline.sweep.fit import MODELS

FORMAT_NAME = "peakline-sweep"
FORMAT_VERSION = 1
STATUSES = ("ok", "failed", "killed", "interrupted")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Invalid(where, f"expected a finite number, got {_show(value)}")
    return value


def _positive(value: Any, where: str) -> float:
    if _number(value, where) <= 0:
        raise _Invalid(where, f"expected a positive number, got {_show(value)}")
    return value


def _one_of(*choices: str):
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise _Invalid(where, f"expected one of {', '.join(choices)}, got {_show(value)}")
        return value
    return check


def _require(obj: dict, name: str, check, where: str) -> Any:
    if name not in obj:
        raise _Invalid(where, f"missing required field '{name}'")
    return check(obj[name], _at(where, name))


def _optional(obj: dict, name: str, check, where: str) -> Any:
    return check(obj[name], _at(where, name)) if obj.get(name) is not None else None


def _check_fit(value: Any, where: str) -> dict:
    fit = _object(value, where)
    _require(fit, "name", _str, where)
    _require(fit, "model", _one_of(*MODELS), where)
    for name in ("exponent", "quality", "r2_adj"):
        _optional(fit, name, _number, where)
    _optional(fit, "note", _str, where)
    prediction = fit.get("prediction")
    if prediction is not None:
        at = _at(where, "prediction")
        _object(prediction, at)
        for name in ("value", "low", "high"):
            _require(prediction, name, _number, at)
    coefficients = fit.get("coefficients")
    if coefficients is not None:
        for key, v in _object(coefficients, _at(where, "coefficients")).items():
            _number(v, _at(_at(where, "coefficients"), key))
    return fit


def _check_run(value: Any, where: str) -> dict:
    run = _object(value, where)
    params = _require(run, "params", _object, where)
    for key, v in params.items():
        _positive(v, f"{where}.params[{key!r}]")
    _require(run, "status", _one_of(*STATUSES), where)
    _require(run, "exit_code", _nullable(_int), where)
    for name in ("peak_bytes", "peak_rss_bytes", "gpu_peak_bytes"):
        _optional(run, name, _int, where)
    for name in ("elapsed_s", "wall_s", "cpu_s"):
        _optional(run, name, _seconds, where)
    for name in ("profile", "log", "error"):
        _optional(run, name, _str, where)
    summary = run.get("summary")
    if summary is not None:
        at = _at(where, "summary")
        _object(summary, at)
        for kind in ("lines", "functions", "phases"):
            _list_of(_object)(summary.get(kind, []), _at(at, kind))
        for i, line in enumerate(summary.get("lines", [])):
            _require(line, "file", _str, f"{at}.lines[{i}]")
            _require(line, "lineno", _count, f"{at}.lines[{i}]")
    return run


def validate(data: Any) -> dict:
    """The decoded sweep file, checked (``_Invalid`` on the first problem)."""
    obj = _object(data, "")
    if obj.get("format") != FORMAT_NAME:
        raise _Invalid("format" if "format" in obj else "",
                       f"not a peakline sweep file (format is {_show(obj.get('format'))})")
    version = _require(obj, "version", _count, "")
    if version > FORMAT_VERSION:
        raise _Invalid("version", f"written by a newer peakline (sweep format version "
                                  f"{version}; this peakline reads up to {FORMAT_VERSION}); "
                                  "upgrade peakline")
    if version < 1:
        raise _Invalid("version", f"unknown format version {version}")
    _require(obj, "program", _str, "")
    vary = _require(obj, "vary", _list_of(_object), "")
    names = []
    for i, v in enumerate(vary):
        names.append(_require(v, "name", _str, f"vary[{i}]"))
        _require(v, "values", _list_of(_positive), f"vary[{i}]")
    target = obj.get("target")
    if target is not None:
        for key, v in _object(target, "target").items():
            if key not in names:
                raise _Invalid(f"target[{key!r}]", "not a varied name")
            _positive(v, f"target[{key!r}]")
    runs = _require(obj, "runs", _list_of(_check_run), "")
    for i, run in enumerate(runs):
        if set(run["params"]) != set(names):
            raise _Invalid(f"runs[{i}].params", f"expected the varied names {names}")
    fits = _require(obj, "fits", _object, "")
    for quantity, fit in _object(fits.get("program", {}), "fits.program").items():
        _check_fit(fit, f"fits.program[{quantity!r}]")
    for kind in ("lines", "functions", "phases"):
        for i, fit in enumerate(_list_of(_object)(fits.get(kind, []), f"fits.{kind}")):
            _check_fit(fit, f"fits.{kind}[{i}]")
            _require(fit, "quantity", _str, f"fits.{kind}[{i}]")
    return obj


_SNIFF = re.compile(rb'^\s*\{\s*"format"\s*:\s*"peakline-sweep"')


def is_sweep_file(path: str | os.PathLike) -> bool:
    """True when the file starts as a sweep file does (``{"format": "peakline-sweep"``);
    anything else, unreadable files included, is left to the profile reader."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(256)
    except OSError:
        return False
    return bool(_SNIFF.match(head))


def loads_sweep(text: str | bytes, *, source: str = "<sweep>") -> dict:
    data = strict_json(utf8_text(text, source=source), source=source)
    try:
        return validate(data)
    except _Invalid as error:
        raise _format_error(source, error.where, error.problem) from None


def read_sweep(path: str | os.PathLike) -> dict:
    return loads_sweep(read_bytes(path), source=os.fspath(path))


def dumps_sweep(sweep: dict) -> str:
    body = {k: v for k, v in sweep.items() if k not in ("format", "version")}
    return json.dumps({"format": FORMAT_NAME, "version": FORMAT_VERSION, **body},
                      indent=1, allow_nan=False) + "\n"


def write_sweep(sweep: dict, path: str | os.PathLike) -> None:
    """Atomic, as profile files are (profile_file.write_text_atomically)."""
    write_text_atomically(dumps_sweep(sweep), path, encoding="utf-8")
