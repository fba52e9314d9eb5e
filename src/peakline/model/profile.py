"""The Profile model and the reference reader/writer of the profile file format, version 1.

The format's spec is docs/profile-format.md; this module is its executable form. Renderers,
budget gates and comparisons read only this model, never the C++ extension.

Design:

* Every record is a dataclass whose JSON shape is one table, ``_FIELDS``: name, checker and
  serialiser. The same table drives validation (``from_dict``) and output (``to_dict``), so the
  two cannot drift apart.
* Forward compatibility inside a major version: fields this reader does not know are kept,
  unvalidated, in the record's ``extra`` dict and written back verbatim, so read -> write by an
  older peakline loses nothing. Fields added later (memory, GPU) go into ``_FIELDS`` with
  ``required=False``: validated when present, omitted from output when ``None``.
* Validation errors are one line: ``<source>: <json path>: <problem>`` where the path reads like
  Python (``files['/x.py'].lines[3].cpu_python_s``). Inside this module they travel as
  ``_Invalid(path, problem)``; the entry points add the source name and raise
  ``ProfileFormatError``.
* JSON only, never pickle: a profile is data from an untrusted place (a CI artifact).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from peakline.errors import ProfileFormatError

FORMAT_NAME = "peakline"
FORMAT_VERSION = 1  # major version; additive changes (new fields) do not bump it


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


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(where, f"expected a string, got {_show(value)}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(where, f"expected true or false, got {_show(value)}")
    return value


def _nullable(check: Checker) -> Checker:
    return lambda value, where: None if value is None else check(value, where)


def _list_of(check: Checker) -> Checker:
    def checker(value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise _Invalid(where, f"expected a list, got {_show(value)}")
        return [check(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return checker


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise _Invalid(where, f"expected an object, got {_show(value)}")
    return value


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


def _activity(value: Any, where: str) -> dict:
    """``{bucket_s, cpu_s: [s], lines: [[file, lineno]], main_line: [index | -1]}``: the
    process's CPU per interval and the line its main thread was on (docs/profile-format.md)."""
    obj = _object(value, where)
    for name in ("bucket_s", "cpu_s", "lines", "main_line"):
        if name not in obj:
            raise _Invalid(_at(where, name), "missing")
    bucket = _seconds(obj["bucket_s"], _at(where, "bucket_s"))
    if bucket <= 0:
        raise _Invalid(_at(where, "bucket_s"), f"expected a positive number, got {bucket}")
    cpu = _list_of(_seconds)(obj["cpu_s"], _at(where, "cpu_s"))
    lines = _list_of(lambda v, w: _pair_line(v, w))(obj["lines"], _at(where, "lines"))
    main = _list_of(_int)(obj["main_line"], _at(where, "main_line"))
    if len(main) != len(cpu):
        raise _Invalid(_at(where, "main_line"), f"expected {len(cpu)} entries (one per "
                                                f"bucket of cpu_s), got {len(main)}")
    for i, index in enumerate(main):
        if not -1 <= index < len(lines):
            raise _Invalid(f"{_at(where, 'main_line')}[{i}]",
                           f"expected -1 or an index into lines, got {index}")
    return {**obj, "bucket_s": bucket, "cpu_s": cpu, "lines": lines, "main_line": main}


def _pair_line(value: Any, where: str) -> list:
    if not isinstance(value, list) or len(value) != 2:
        raise _Invalid(where, f"expected [file, lineno], got {_show(value)}")
    return [_str(value[0], f"{where}[0]"), _count(value[1], f"{where}[1]")]


def _submitted_work(value: Any, where: str) -> dict:
    """``{lines: [{file, lineno, cpu_s, pids}], unlinked_cpu_s}`` (docs/profile-format.md)."""
    obj = _object(value, where)
    rows = _list_of(_object)(obj.get("lines"), _at(where, "lines"))
    for i, row in enumerate(rows):
        at = f"{_at(where, 'lines')}[{i}]"
        _str(row.get("file"), _at(at, "file"))
        _count(row.get("lineno"), _at(at, "lineno"))
        _seconds(row.get("cpu_s"), _at(at, "cpu_s"))
        _list_of(_count)(row.get("pids"), _at(at, "pids"))
    _seconds(obj.get("unlinked_cpu_s"), _at(where, "unlinked_cpu_s"))
    return obj


def _optional(name: str, check: Checker) -> "_Field":
    return _Field(name, check, required=False)


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Field:
    name: str
    check: Checker
    dump: Callable[[Any], Any] = _same
    required: bool = True


def _record_field(name: str, record: type[_Record]) -> _Field:
    return _Field(name, record._from_json, lambda r: r.to_dict())


def _record_list_field(name: str, record: type[_Record]) -> _Field:
    return _Field(name, _list_of(record._from_json), lambda rs: [r.to_dict() for r in rs])


# run_delay_s: off-CPU time the thread was runnable but not scheduled (CPU contention). Split
# off wait_s by the core; optional on read (0 in files written before it existed).
_CATEGORY_NAMES = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "wait_s", "run_delay_s")


def _category_fields() -> tuple[_Field, ...]:
    return tuple(_Field(name, _seconds, required=name != "run_delay_s")
                 for name in _CATEGORY_NAMES)


# Per-line and per-function memory fields (sampled estimates; frees are charged to the line
# that allocated the block, so net_bytes is what that line still holds at the end).
_MEMORY_FIELDS = (_optional("alloc_python_bytes", _count), _optional("alloc_native_bytes", _count),
                  _optional("free_bytes", _count), _optional("net_bytes", _int),
                  _optional("live_at_peak_bytes", _int))

# Per-line GPU fields (docs/profile-format.md, "GPU").
_GPU_LINE_FIELDS = (_optional("gpu_util_s", _seconds), _optional("gpu_peak_bytes", _count),
                    _optional("gpu_alloc_bytes", _count), _optional("gpu_net_bytes", _int),
                    _optional("gpu_live_at_peak_bytes", _int))

# ---- records ------------------------------------------------------------------------------

class _Record:
    """Base of every record: schema-driven from_dict/to_dict, unknown fields kept in ``extra``."""

    _FIELDS: ClassVar[tuple[_Field, ...]] = ()
    extra: dict[str, Any]

    @classmethod
    def _from_json(cls, value: Any, where: str) -> Any:
        obj = _object(value, where)
        kwargs: dict[str, Any] = {}
        known = set()
        for spec in cls._FIELDS:
            known.add(spec.name)
            if spec.name in obj:
                kwargs[spec.name] = spec.check(obj[spec.name], _at(where, spec.name))
            elif spec.required:
                raise _Invalid(where, f"missing required field '{spec.name}'")
        kwargs["extra"] = {k: v for k, v in obj.items() if k not in known}
        record = cls(**kwargs)
        record._check_invariants(where)
        return record

    def _check_invariants(self, where: str) -> None:
        """Cross-field rules; overridden where a record has them."""

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON object; unknown fields read earlier follow the known ones."""
        out: dict[str, Any] = {}
        for spec in self._FIELDS:
            value = getattr(self, spec.name)
            if value is None and not spec.required:
                continue
            out[spec.name] = spec.dump(value)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


class _CategoryTimes:
    """Mixin for records that carry the five time categories (seconds)."""

    cpu_python_s: float
    cpu_native_s: float
    cpu_system_s: float
    wait_s: float
    run_delay_s: float

    @property
    def cpu_s(self) -> float:
        return self.cpu_python_s + self.cpu_native_s + self.cpu_system_s

    @property
    def total_s(self) -> float:
        """CPU plus wait plus run delay: the sampled time charged here."""
        return self.cpu_s + self.wait_s + self.run_delay_s

    @property
    def off_cpu_s(self) -> float:
        """Wait plus run delay: all the time the thread(s) did not run here."""
        return self.wait_s + self.run_delay_s


@dataclass
class CategoryTimes(_CategoryTimes):
    """Plain sum of the five categories, e.g. one file's totals."""

    cpu_python_s: float = 0.0
    cpu_native_s: float = 0.0
    cpu_system_s: float = 0.0
    wait_s: float = 0.0
    run_delay_s: float = 0.0

    def add(self, other: _CategoryTimes) -> None:
        for name in _CATEGORY_NAMES:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(kw_only=True)
class _Usage:
    """What a line and a function both carry (keyword-only, so each record's own leading
    fields stay positional): sampled time, memory (present when memory was profiled;
    docs/profile-format.md) and, in merged profiles, how many processes ran it."""

    cpu_python_s: float = 0.0
    cpu_native_s: float = 0.0
    cpu_system_s: float = 0.0
    wait_s: float = 0.0
    run_delay_s: float = 0.0
    samples: int = 0
    alloc_python_bytes: int | None = None
    alloc_native_bytes: int | None = None
    free_bytes: int | None = None
    net_bytes: int | None = None
    live_at_peak_bytes: int | None = None
    copy_bytes: int | None = None
    processes: int | None = None

    @property
    def alloc_bytes(self) -> int:
        return (self.alloc_python_bytes or 0) + (self.alloc_native_bytes or 0)


@dataclass
class LineRecord(_Record, _CategoryTimes, _Usage):
    """Time charged to one source line (self time: the line was the innermost reported frame)."""

    lineno: int
    timeline: list | None = None
    leak_likelihood: float | None = None
    leak_rate_bytes_s: float | None = None
    copy_mb_s: float | None = None
    # GPU (present when a GPU was measured; docs/gpu.md).
    gpu_util_s: float | None = None
    gpu_peak_bytes: int | None = None
    gpu_alloc_bytes: int | None = None
    gpu_net_bytes: int | None = None
    gpu_live_at_peak_bytes: int | None = None
    # Merged profiles: what the line held, all processes together, at the tree's peak.
    live_at_tree_peak_bytes: int | None = None
    # Of net_bytes, what was allocated while importing a module (never scored as a leak).
    import_net_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("lineno", _count), *_category_fields(), _Field("samples", _count),
               *_MEMORY_FIELDS, _optional("live_at_tree_peak_bytes", _int),
               _optional("import_net_bytes", _int),
               _optional("timeline", _timeline),
               _optional("leak_likelihood", _fraction), _optional("leak_rate_bytes_s", _signed),
               _optional("copy_bytes", _count), _optional("copy_mb_s", _seconds),
               *_GPU_LINE_FIELDS, _optional("processes", _count))


@dataclass
class FunctionRecord(_Record, _CategoryTimes, _Usage):
    """One function (qualname + first line): self time by category, self and inclusive totals."""

    name: str
    lineno: int
    self_s: float = 0.0
    inclusive_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("name", _str), _Field("lineno", _count), *_category_fields(),
               _Field("self_s", _seconds), _Field("inclusive_s", _seconds),
               _Field("samples", _count), *_MEMORY_FIELDS, _optional("copy_bytes", _count),
               _optional("processes", _count))


@dataclass
class FileRecord(_Record):
    """A reported source file: its lines (sorted, unique linenos) and functions."""

    lines: list[LineRecord] = field(default_factory=list)
    functions: list[FunctionRecord] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_record_list_field("lines", LineRecord),
               _record_list_field("functions", FunctionRecord))

    def _check_invariants(self, where: str) -> None:
        for i in range(1, len(self.lines)):
            if self.lines[i].lineno <= self.lines[i - 1].lineno:
                raise _Invalid(f"{where}.lines[{i}].lineno",
                               f"lines must be sorted by lineno without repeats, "
                               f"got {self.lines[i].lineno} after {self.lines[i - 1].lineno}")

    def totals(self) -> CategoryTimes:
        """Sum of the file's line records."""
        total = CategoryTimes()
        for line in self.lines:
            total.add(line)
        return total


@dataclass
class ThreadRecord(_Record):
    tid: int
    name: str | None = None
    python: bool = True
    cpu_s: float = 0.0
    wait_s: float = 0.0
    run_delay_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("tid", _count), _Field("name", _nullable(_str)), _Field("python", _bool),
               _Field("cpu_s", _seconds), _Field("wait_s", _seconds),
               _optional("run_delay_s", _seconds))


@dataclass
class StackSample(_Record, _CategoryTimes):
    """Time of one distinct (thread, full stack); ``frames`` are frame ids, ROOT FIRST."""

    thread: int
    frames: list[int]
    cpu_python_s: float = 0.0
    cpu_native_s: float = 0.0
    cpu_system_s: float = 0.0
    wait_s: float = 0.0
    run_delay_s: float = 0.0
    cpu_samples: int = 0
    wait_samples: int = 0
    # Memory (present when memory was profiled): the stack's sampled allocations and what
    # it held at the peak, for the memory flame graph.
    alloc_bytes: int | None = None
    live_at_peak_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("thread", _count), _Field("frames", _list_of(_count), list),
               *_category_fields(), _Field("cpu_samples", _count),
               _Field("wait_samples", _count), _optional("alloc_bytes", _count),
               _optional("live_at_peak_bytes", _int))


@dataclass
class Stacks(_Record):
    """Every sampled stack, unfiltered (library frames included), for flame graphs."""

    frames: list[tuple] = field(default_factory=list)
    samples: list[StackSample] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("frames", _list_of(_frame), lambda fs: [list(f) for f in fs]),
               _record_list_field("samples", StackSample))

    def _check_invariants(self, where: str) -> None:
        for i, sample in enumerate(self.samples):
            for j, frame_id in enumerate(sample.frames):
                if frame_id >= len(self.frames):
                    raise _Invalid(f"{where}.samples[{i}].frames[{j}]",
                                   f"frame id {frame_id} out of range "
                                   f"({len(self.frames)} frames)")


@dataclass
class Options(_Record):
    cpu_sampling_interval_s: float = 0.01
    profile_all: bool = False
    profile_only: list[str] = field(default_factory=list)
    profile_exclude: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("cpu_sampling_interval_s", _seconds), _Field("profile_all", _bool),
               _Field("profile_only", _list_of(_str), list),
               _Field("profile_exclude", _list_of(_str), list))


@dataclass
class Sampling(_Record):
    cpu_samples: int = 0
    wait_samples: int = 0
    dropped_samples: int = 0
    invalid_frames: int = 0
    truncated_stacks: int = 0
    # Optional (0 when absent): how often the core met itself half-way (docs/sampling.md).
    deferred_code_frees: int = 0
    skipped_ticks: int = 0
    # Optional (absent when unknown): the CPU sampling signal, the process's CPU time while
    # profiled, and why the CPU figures are incomplete (docs/profile-format.md).
    signal: int | None = None
    process_cpu_s: float | None = None
    warning: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (*(_Field(name, _count) for name in (
        "cpu_samples", "wait_samples", "dropped_samples", "invalid_frames", "truncated_stacks")),
        _optional("deferred_code_frees", _count), _optional("skipped_ticks", _count),
        _optional("signal", _nullable(_count)), _optional("process_cpu_s", _nullable(_seconds)),
        _optional("warning", _nullable(_str)))

    @property
    def samples(self) -> int:
        return self.cpu_samples + self.wait_samples


@dataclass
class Totals(_Record, _CategoryTimes):
    """Sampled time of the whole run by category; ``unattributed_s`` had no reported frame."""

    cpu_python_s: float = 0.0
    cpu_native_s: float = 0.0
    cpu_system_s: float = 0.0
    wait_s: float = 0.0
    run_delay_s: float = 0.0
    unattributed_s: float = 0.0
    # The cgroup CPU controller's throttling during the run (a CPU quota), when readable:
    # the whole cgroup's figures, not only this process's.
    cgroup_throttled_s: float | None = None
    cgroup_throttled_periods: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (*_category_fields(), _Field("unattributed_s", _seconds),
               _optional("cgroup_throttled_s", _seconds),
               _optional("cgroup_throttled_periods", _count))


@dataclass
class Memory(_Record):
    """How memory was measured, and run-wide memory figures beyond peak_bytes/timeline."""

    sampling_interval_bytes: int = 0
    copy_sampling_interval_bytes: int = 0
    peak_time_s: float = 0.0
    live_end_bytes: int = 0
    growth_rate_bytes_s: float = 0.0
    alloc_samples: int = 0
    free_samples: int = 0
    copy_samples: int = 0
    not_sampled_events: int = 0
    unattributed_alloc_bytes: int = 0
    staged_events: int = 0
    start_monotonic_s: float | None = None
    blas_buffer_bytes: int | None = None
    blas_buffer_maps: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("sampling_interval_bytes", _count),
               _Field("copy_sampling_interval_bytes", _count),
               _Field("peak_time_s", _seconds), _Field("live_end_bytes", _int),
               _Field("growth_rate_bytes_s", _signed),
               *(_Field(n, _count) for n in ("alloc_samples", "free_samples", "copy_samples",
                                             "not_sampled_events", "unattributed_alloc_bytes")),
               _Field("staged_events", _count, required=False),
               _optional("start_monotonic_s", _seconds),
               _optional("blas_buffer_bytes", _count), _optional("blas_buffer_maps", _count))


def _one_of(*choices: str) -> Checker:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise _Invalid(where, f"expected one of {', '.join(choices)}, got {_show(value)}")
        return value
    return check


@dataclass
class Gpu(_Record):
    """The GPU as measured for the whole run (docs/gpu.md); absent when none was measured."""

    device_name: str | None = None
    devices: list[str] = field(default_factory=list)
    peak_bytes: int | None = None
    util_mean_pct: float | None = None
    util_s: float | None = None
    memory_source: str | None = None
    alloc_source: str | None = None
    poll_interval_s: float = 0.0
    readings: int = 0
    unavailable: list[str] = field(default_factory=list)
    torch: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("device_name", _nullable(_str)), _Field("devices", _list_of(_str), list),
               _Field("peak_bytes", _nullable(_count)), _Field("util_mean_pct", _nullable(_seconds)),
               _Field("util_s", _nullable(_seconds)),
               _Field("memory_source", _nullable(_one_of("process", "device", "torch_reserved"))),
               _Field("alloc_source", _nullable(_one_of("torch_history", "torch_ticks",
                                                        "nvml_ticks"))),
               _Field("poll_interval_s", _seconds), _Field("readings", _count),
               _Field("unavailable", _list_of(_str), list),
               _optional("torch", lambda v, w: {k: _count(x, _at(w, k))
                                                for k, x in _object(v, w).items()}))


@dataclass
class PhaseRecord(_Record):
    """A named phase (peakline.phase): wall interval on the timeline's clock, CPU, heap."""

    name: str
    depth: int = 0
    start_s: float = 0.0
    end_s: float = 0.0
    cpu_s: float = 0.0
    start_bytes: int | None = None
    end_bytes: int | None = None
    net_bytes: int | None = None
    peak_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("name", _str), _Field("depth", _count), _Field("start_s", _seconds),
               _Field("end_s", _seconds), _Field("cpu_s", _seconds),
               _optional("start_bytes", _nullable(_int)), _optional("end_bytes", _nullable(_int)),
               _optional("net_bytes", _nullable(_int)), _optional("peak_bytes", _nullable(_int)))

    @property
    def wall_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@dataclass
class ProcessRecord(_Record):
    """One process of a merged profile (the parent first); unmerged ones have no figures."""

    pid: int
    program: str = ""
    argv: list[str] = field(default_factory=list)
    merged: bool = True
    parent_pid: int | None = None
    started_at: str | None = None
    elapsed_s: float | None = None
    exit_code: int | None = None
    peak_bytes: int | None = None
    peak_time_s: float | None = None
    start_offset_s: float | None = None
    cpu_s: float | None = None
    not_merged_reason: str | None = None
    hostname: str | None = None
    node_id: str | None = None
    rank: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("pid", _count), _Field("program", _str), _Field("argv", _list_of(_str), list),
               _optional("hostname", _str), _optional("node_id", _str), _optional("rank", _count),
               _Field("merged", _bool), _optional("parent_pid", _nullable(_count)),
               _optional("started_at", _nullable(_utc_timestamp)),
               _optional("elapsed_s", _nullable(_seconds)), _optional("exit_code", _nullable(_int)),
               _optional("peak_bytes", _nullable(_int)), _optional("cpu_s", _nullable(_seconds)),
               _optional("not_merged_reason", _nullable(_str)),
               _optional("peak_time_s", _seconds), _optional("start_offset_s", _signed))


@dataclass
class SnapshotInfo(_Record):
    """Present when the profile is a snapshot of a running program (``--snapshot-every``, the
    snapshot signal, the live view): which part of the run it covers."""

    sequence: int          # 1 for the first snapshot of the run, then 2, 3, ...
    trigger: str           # "interval", "signal" or "request"
    start_s: float         # seconds since started_at where the figures begin (0: cumulative)
    end_s: float           # seconds since started_at when it was taken (= elapsed_s)
    taken_at: str          # ISO-8601 UTC time it was taken
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (_Field("sequence", _count), _Field("trigger", _one_of("interval", "signal", "request")),
               _Field("start_s", _seconds), _Field("end_s", _seconds),
               _Field("taken_at", _utc_timestamp))

    def _check_invariants(self, where: str) -> None:
        if self.end_s < self.start_s:
            raise _Invalid(_at(where, "end_s"), f"ends ({self.end_s}) before it starts ({self.start_s})")


def _files_checker(value: Any, where: str) -> dict[str, FileRecord]:
    files = {}
    for name, record in _object(value, where).items():
        if not name:
            raise _Invalid(where, "file name must not be empty")
        files[name] = FileRecord._from_json(record, f"{where}[{name!r}]")
    return files


@dataclass
class Profile(_Record):
    """One profiled run. Build with ``build_profile``, load with ``read_profile``."""

    program: str
    argv: list[str]
    python_version: str
    platform: str
    pid: int
    started_at: str
    elapsed_s: float
    exit_code: int | None
    options: Options
    sampling: Sampling
    totals: Totals
    threads: list[ThreadRecord]
    files: dict[str, FileRecord]
    stacks: Stacks
    peak_bytes: int | None = None
    peak_rss_bytes: int | None = None
    timeline: list | None = None
    memory: Memory | None = None
    gpu: Gpu | None = None
    phases: list[PhaseRecord] | None = None
    processes: list[ProcessRecord] | None = None
    peak_bytes_sum: int | None = None
    tree_peak_bytes: int | None = None
    tree_peak_time_s: float | None = None
    tree_timeline: list | None = None
    attached: dict | None = None
    hostname: str | None = None
    node_id: str | None = None
    rank: int | None = None
    activity: dict | None = None
    submitted_work: dict | None = None
    snapshot: SnapshotInfo | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _FIELDS = (
        _Field("program", _str), _Field("argv", _list_of(_str), list),
        _optional("hostname", _str), _optional("node_id", _str), _optional("rank", _count),
        _optional("activity", _activity), _optional("submitted_work", _submitted_work),
        _Field("python_version", _str), _Field("platform", _str), _Field("pid", _count),
        _Field("started_at", _utc_timestamp), _Field("elapsed_s", _seconds),
        _Field("exit_code", _nullable(_int)),
        _record_field("options", Options), _record_field("sampling", Sampling),
        _record_field("totals", Totals), _record_list_field("threads", ThreadRecord),
        _Field("files", _files_checker, lambda fs: {k: v.to_dict() for k, v in fs.items()}),
        _record_field("stacks", Stacks),
        _optional("peak_bytes", _int), _optional("peak_rss_bytes", _count),
        _optional("timeline", _timeline),
        _Field("memory", Memory._from_json, lambda m: m.to_dict(), required=False),
        _Field("phases", _list_of(PhaseRecord._from_json), lambda rs: [r.to_dict() for r in rs],
               required=False),
        _Field("processes", _list_of(ProcessRecord._from_json),
               lambda rs: [r.to_dict() for r in rs], required=False),
        _optional("peak_bytes_sum", _int), _optional("tree_peak_bytes", _int),
        _optional("tree_peak_time_s", _seconds), _optional("tree_timeline", _timeline),
        _Field("gpu", Gpu._from_json, lambda g: g.to_dict(), required=False),
        _optional("attached", lambda value, where: _attached(value, where)),
        _Field("snapshot", SnapshotInfo._from_json, lambda s: s.to_dict(), required=False),
    )

    @property
    def has_memory(self) -> bool:
        return self.peak_bytes is not None

    def _check_invariants(self, where: str) -> None:
        seen = set()
        for i, thread in enumerate(self.threads):
            if thread.tid in seen:
                raise _Invalid(f"threads[{i}].tid", f"duplicate thread id {thread.tid}")
            seen.add(thread.tid)

    # -- serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The profile file's JSON object (format and version first)."""
        body = super().to_dict()
        body.pop("format", None)
        body.pop("version", None)
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, **body}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<profile>") -> Profile:
        """Validate a decoded profile file; errors are ProfileFormatError ``source: path: why``."""
        try:
            obj = _object(data, "")
            _check_header(obj)
            body = {k: v for k, v in obj.items() if k not in ("format", "version")}
            return cls._from_json(body, "")
        except _Invalid as error:
            raise _format_error(source, error.where, error.problem) from None

    # -- queries ----------------------------------------------------------------------------

    @property
    def sampled_s(self) -> float:
        """All sampled time, CPU plus wait, every thread. The reports' percentages use
        ``user_sampled_s`` (less idle background threads' waiting)."""
        return self.totals.total_s

    @property
    def attributed_fraction(self) -> float:
        """Share of sampled time charged to a reported line (0 when nothing was sampled)."""
        sampled = self.sampled_s
        return 0.0 if sampled <= 0 else max(0.0, 1.0 - self.totals.unattributed_s / sampled)

    # -- whose time: the user's threads and the background ---------------------------------
    #
    # A thread's waiting belongs to the user when the thread is a main thread (of the profiled
    # process or of a merged child) or when at least one of its wait samples has a reported
    # frame on the thread's own stack (wait samples are never stitched to the main thread's
    # stack, so this is where the thread itself was). Every other thread only ever waited in
    # library or native code: a Jupyter kernel's heartbeat/IOPub/control threads, torch's or
    # OpenMP's idle pool, an idle executor's workers. Their waiting is *background wait*: kept
    # in the profile (totals, threads, stacks), shown apart in the reports, and left out of the
    # denominator of the user's percentages. CPU time always counts, whichever thread.

    def main_thread_ids(self) -> set[int]:
        """The main thread of this process and of each merged child (on Linux, tid == pid)."""
        ids = {self.pid, *(r.pid for r in self.processes or ())}
        ids.update(t.tid for t in self.threads if t.name == "MainThread")
        return ids

    def background_wait_by_thread(self) -> dict[int, float]:
        """Seconds of background wait per thread id (threads with none are absent)."""
        mains = self.main_thread_ids()
        reported = [frame[0] in self.files if frame else False for frame in self.stacks.frames]
        waited: dict[int, float] = {}
        users: set[int] = set()
        for sample in self.stacks.samples:
            if sample.wait_s <= 0 and not sample.wait_samples:
                continue
            waited[sample.thread] = waited.get(sample.thread, 0.0) + sample.wait_s
            if any(0 <= i < len(reported) and reported[i] for i in sample.frames):
                users.add(sample.thread)
        return {tid: s for tid, s in waited.items()
                if tid not in mains and tid not in users and s > 0}

    @property
    def background_wait_s(self) -> float:
        """All background wait (see above): sampled, but not the user's waiting."""
        return sum(self.background_wait_by_thread().values())

    @property
    def user_sampled_s(self) -> float:
        """Sampled time less background wait: the denominator of the reports' percentages."""
        return max(0.0, self.sampled_s - self.background_wait_s)

    @property
    def user_attributed_fraction(self) -> float:
        """Share of the user's sampled time charged to a reported line. Background wait has no
        reported frame, so it is taken out of unattributed time and of the denominator alike."""
        sampled = self.user_sampled_s
        if sampled <= 0:
            return 0.0
        unattributed = max(0.0, self.totals.unattributed_s - self.background_wait_s)
        return max(0.0, 1.0 - unattributed / sampled)

    def lines(self) -> Iterator[tuple[str, LineRecord]]:
        """Every line record as (file, record), files in profile order, lines by lineno."""
        for filename, record in self.files.items():
            for line in record.lines:
                yield filename, line

    def functions(self) -> Iterator[tuple[str, FunctionRecord]]:
        for filename, record in self.files.items():
            for function in record.functions:
                yield filename, function

    def hottest_lines(self, n: int = 10) -> list[tuple[str, LineRecord]]:
        """The ``n`` lines with the most sampled time (CPU + wait), hottest first."""
        ranked = sorted(self.lines(), key=lambda item: (-item[1].total_s, item[0], item[1].lineno))
        return ranked[:max(0, n)]

    def file_totals(self) -> dict[str, CategoryTimes]:
        return {filename: record.totals() for filename, record in self.files.items()}


def _attached(value: Any, where: str) -> dict:
    """The ``attached`` object of a profile made by ``peakline attach`` (docs/profile-format.md);
    keys it does not know are kept."""
    obj = dict(_object(value, where))
    _str(obj.get("method"), f"{where}.method")
    if obj.get("memory_counts_from") != "attach":
        raise _Invalid(f"{where}.memory_counts_from",
                       f"expected \"attach\", got {_show(obj.get('memory_counts_from'))}")
    _bool(obj.get("process_exited"), f"{where}.process_exited")
    if "detach_problem" in obj:
        _nullable(_str)(obj["detach_problem"], f"{where}.detach_problem")
    return obj


def _check_header(obj: dict) -> None:
    if "format" not in obj:
        raise _Invalid("", "not a peakline profile (no 'format' field)")
    if obj["format"] != FORMAT_NAME:
        raise _Invalid("format", f"not a peakline profile (format is {_show(obj['format'])})")
    if "version" not in obj:
        raise _Invalid("", "missing required field 'version'")
    version = _count(obj["version"], "version")
    if version > FORMAT_VERSION:
        raise _Invalid("version", f"written by a newer peakline (format version {version}; "
                                  f"this peakline reads up to {FORMAT_VERSION}); upgrade peakline")
    if version < 1:
        raise _Invalid("version", f"unknown format version {version}")


def _format_error(source: str, where: str, problem: str) -> ProfileFormatError:
    text = f"{source}: {where}: {problem}" if where else f"{source}: {problem}"
    return ProfileFormatError(text.replace("\r", "\\r").replace("\n", "\\n"))
