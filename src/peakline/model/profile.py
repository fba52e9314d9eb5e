"""The Profile model and the reference reader/writer of the profile file format, version 1.

The format's spec is docs/profile-format.md; this package is its executable form. Renderers,
budget gates and comparisons read only this model, never the C++ extension.

Design:

* Every record is a dataclass declared once as its JSON fields (peakline.model.schema): the
  same table drives validation (``from_dict``), output (``to_dict``), merging and the spec's
  tests, so they cannot drift apart. The records inside a profile are in
  peakline.model.records; the checkers in peakline.model.checks.
* Forward compatibility inside a major version: fields this reader does not know are kept,
  unvalidated, in the record's ``extra`` dict and written back verbatim.
* Validation errors are one line: ``<source>: <json path>: <problem>`` where the path reads like
  Python (``files['/x.py'].lines[3].cpu_python_s``). Inside the model they travel as
  ``_Invalid(path, problem)``; the entry points add the source name and raise
  ``ProfileFormatError``.
* JSON only, never pickle: a profile is data from an untrusted place (a CI artifact).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from peakline.model.checks import (_Invalid, _at, _bool, _count, _format_error, _int, _list_of,
                                   _nullable, _object, _pair_line, _seconds, _show, _str,
                                   _timeline, _utc_timestamp)
from peakline.model.records import (CategoryTimes, FileRecord, FunctionRecord, Gpu, LineRecord,
                                    Memory, Options, PhaseRecord, ProcessRecord, RankFigures,
                                    RankLineRecord, Sampling, SnapshotInfo, StackSample, Stacks,
                                    TaskKeyRecord, ThreadRecord, Totals)
from peakline.model.schema import (_Field, _optional, _Record, _record_field, _record_list_field,
                                   record)

__all__ = [  # the records are defined in peakline.model.records, importable from here too
    "FORMAT_NAME", "FORMAT_VERSION", "CategoryTimes", "FileRecord", "FunctionRecord", "Gpu",
    "LineRecord", "Memory", "Options", "PhaseRecord", "ProcessRecord", "Profile",
    "RankFigures", "RankLineRecord", "Sampling",
    "SnapshotInfo", "StackSample", "Stacks", "TaskKeyRecord", "ThreadRecord", "Totals",
]

FORMAT_NAME = "peakline"
FORMAT_VERSION = 1  # major version; additive changes (new fields) do not bump it

HEADER_FIELDS = ("format", "version")  # first in every file, checked before the rest

# The run-wide objects kept as plain dicts (their keys, as docs/profile-format.md lists them).
ACTIVITY_FIELDS = ("bucket_s", "cpu_s", "lines", "main_line")
SUBMITTED_WORK_FIELDS = ("lines", "unlinked_cpu_s")
SUBMITTED_LINE_FIELDS = ("file", "lineno", "cpu_s", "pids")
ATTACHED_FIELDS = ("method", "memory_counts_from", "process_exited", "detach_problem")


def _activity(value: Any, where: str) -> dict:
    """``{bucket_s, cpu_s: [s], lines: [[file, lineno]], main_line: [index | -1]}``: the
    process's CPU per interval and the line its main thread was on (docs/profile-format.md)."""
    obj = _object(value, where)
    for name in ACTIVITY_FIELDS:
        if name not in obj:
            raise _Invalid(_at(where, name), "missing")
    bucket = _seconds(obj["bucket_s"], _at(where, "bucket_s"))
    if bucket <= 0:
        raise _Invalid(_at(where, "bucket_s"), f"expected a positive number, got {bucket}")
    cpu = _list_of(_seconds)(obj["cpu_s"], _at(where, "cpu_s"))
    lines = _list_of(_pair_line)(obj["lines"], _at(where, "lines"))
    main = _list_of(_int)(obj["main_line"], _at(where, "main_line"))
    if len(main) != len(cpu):
        raise _Invalid(_at(where, "main_line"), f"expected {len(cpu)} entries (one per "
                                                f"bucket of cpu_s), got {len(main)}")
    for i, index in enumerate(main):
        if not -1 <= index < len(lines):
            raise _Invalid(f"{_at(where, 'main_line')}[{i}]",
                           f"expected -1 or an index into lines, got {index}")
    return {**obj, "bucket_s": bucket, "cpu_s": cpu, "lines": lines, "main_line": main}


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


def _files_checker(value: Any, where: str) -> dict[str, FileRecord]:
    files = {}
    for name, entry in _object(value, where).items():
        if not name:
            raise _Invalid(where, "file name must not be empty")
        files[name] = FileRecord._from_json(entry, f"{where}[{name!r}]")
    return files


@record
class Profile(_Record):
    """One profiled run. Build with ``build_profile``, load with ``read_profile``."""

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
        # Memory (absent with --cpu-only).
        _optional("peak_bytes", _int), _optional("peak_rss_bytes", _count),
        _optional("timeline", _timeline), _record_field("memory", Memory, required=False),
        _record_list_field("phases", PhaseRecord, required=False),
        _record_list_field("task_keys", TaskKeyRecord, required=False),
        # Merged profiles.
        _record_list_field("processes", ProcessRecord, required=False),
        _record_list_field("rank_lines", RankLineRecord, required=False),
        _optional("peak_bytes_sum", _int), _optional("tree_peak_bytes", _int),
        _optional("tree_peak_time_s", _seconds), _optional("tree_timeline", _timeline),
        _record_field("gpu", Gpu, required=False), _optional("attached", _attached),
        _record_field("snapshot", SnapshotInfo, required=False),
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
        body = _Record.to_dict(self)  # (a @record class body cannot use super())
        body.pop("format", None)
        body.pop("version", None)
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, **body}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<profile>") -> Profile:
        """Validate a decoded profile file; errors are ProfileFormatError ``source: path: why``."""
        try:
            obj = _object(data, "")
            _check_header(obj)
            body = {k: v for k, v in obj.items() if k not in HEADER_FIELDS}
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
