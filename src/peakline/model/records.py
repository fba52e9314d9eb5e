"""The records of a profile file, each declared once as its JSON fields (peakline.model.schema).

Field meanings and units: docs/profile-format.md, tested against these declarations. The
whole profile (``Profile``, with its run-wide objects) is in peakline.model.profile.
"""

from __future__ import annotations

from typing import Any

from peakline.model.checks import (_Invalid, _at, _bool, _count, _fraction, _frame, _int,
                                   _list_of, _nullable, _object, _one_of, _seconds, _signed,
                                   _str, _timeline, _utc_timestamp)
from peakline.model.schema import (SUM, _Field, _listed, _optional, _Record, _record_list_field,
                                   record)

# The five time categories (docs/profile-format.md, "Conventions"). run_delay_s: off-CPU time
# the thread was runnable but not scheduled (CPU contention), split off wait_s by the core;
# optional on read (0 in files written before it existed).
CATEGORY_NAMES = ("cpu_python_s", "cpu_native_s", "cpu_system_s", "wait_s", "run_delay_s")


def _category_fields() -> tuple[_Field, ...]:
    return tuple(_Field(name, _seconds, required=name != "run_delay_s", default=0.0, merge=SUM)
                 for name in CATEGORY_NAMES)


def _summed_count(name: str) -> _Field:
    return _Field(name, _count, default=0, merge=SUM)


# Per-line and per-function memory fields (sampled estimates; frees are charged to the line
# that allocated the block, so net_bytes is what that line still holds at the end).
_MEMORY_FIELDS = (_optional("alloc_python_bytes", _count, merge=SUM),
                  _optional("alloc_native_bytes", _count, merge=SUM),
                  _optional("free_bytes", _count, merge=SUM),
                  _optional("net_bytes", _int, merge=SUM),
                  _optional("live_at_peak_bytes", _int, merge=SUM),
                  _optional("live_at_peak_variance", _count, merge=SUM),
                  _optional("net_variance", _count, merge=SUM))
_COPY_BYTES = _optional("copy_bytes", _count, merge=SUM)
# Merged profiles: how many processes ran the line or function.
_PROCESSES = _optional("processes", _count)

# Per-line GPU fields (docs/profile-format.md, "GPU"); a merged profile keeps the parent's.
_GPU_LINE_FIELDS = (_optional("gpu_util_s", _seconds), _optional("gpu_peak_bytes", _count),
                    _optional("gpu_alloc_bytes", _count), _optional("gpu_net_bytes", _int),
                    _optional("gpu_live_at_peak_bytes", _int))


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


class _Usage:
    """Mixin for what a line and a function both carry: sampled time and, when memory was
    profiled, bytes."""

    alloc_python_bytes: int | None
    alloc_native_bytes: int | None

    @property
    def alloc_bytes(self) -> int:
        return (self.alloc_python_bytes or 0) + (self.alloc_native_bytes or 0)


@record
class CategoryTimes(_CategoryTimes):
    """Plain sum of the five categories, e.g. one file's totals."""

    _FIELDS = _category_fields()

    def add(self, other: _CategoryTimes) -> None:
        for name in CATEGORY_NAMES:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@record
class LineRecord(_Record, _CategoryTimes, _Usage):
    """Time charged to one source line (self time: the line was the innermost reported frame),
    its memory (the leak fields and timeline per line only) and GPU figures."""

    _FIELDS = (_Field("lineno", _count), *_category_fields(), _summed_count("samples"),
               *_MEMORY_FIELDS,
               # Merged profiles: what the line held, all processes together, at the tree's peak.
               _optional("live_at_tree_peak_bytes", _int),
               # Of net_bytes, what was allocated while importing a module (never a leak).
               _optional("import_net_bytes", _int, merge=SUM),
               _optional("timeline", _timeline),
               _optional("leak_likelihood", _fraction), _optional("leak_rate_bytes_s", _signed),
               _COPY_BYTES, _optional("copy_mb_s", _seconds),
               *_GPU_LINE_FIELDS, _PROCESSES)


@record
class FunctionRecord(_Record, _CategoryTimes, _Usage):
    """One function (qualname + first line): self time by category, self and inclusive totals."""

    _FIELDS = (_Field("name", _str), _Field("lineno", _count), *_category_fields(),
               _Field("self_s", _seconds, default=0.0, merge=SUM),
               _Field("inclusive_s", _seconds, default=0.0, merge=SUM),
               _summed_count("samples"), *_MEMORY_FIELDS, _COPY_BYTES, _PROCESSES)


@record
class FileRecord(_Record):
    """A reported source file: its lines (sorted, unique linenos) and functions."""

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


@record
class ThreadRecord(_Record):
    _FIELDS = (_Field("tid", _count), _Field("name", _nullable(_str), default=None),
               _Field("python", _bool, default=True),
               _Field("cpu_s", _seconds, default=0.0, merge=SUM),
               _Field("wait_s", _seconds, default=0.0, merge=SUM),
               _optional("run_delay_s", _seconds, 0.0, merge=SUM),
               # Merged profiles: the process the thread belongs to.
               _optional("pid", _count))


@record
class StackSample(_Record, _CategoryTimes):
    """Time of one distinct (thread, full stack); ``frames`` are frame ids, ROOT FIRST. With
    memory: the stack's sampled allocations and what it held at the peak (flame graphs)."""

    _FIELDS = (_Field("thread", _count), _Field("frames", _list_of(_count), list),
               *_category_fields(), _Field("cpu_samples", _count, default=0),
               _Field("wait_samples", _count, default=0), _optional("alloc_bytes", _count),
               _optional("live_at_peak_bytes", _int))


@record
class Stacks(_Record):
    """Every sampled stack, unfiltered (library frames included), for flame graphs."""

    _FIELDS = (_Field("frames", _list_of(_frame), lambda fs: [list(f) for f in fs], factory=list),
               _record_list_field("samples", StackSample))

    def _check_invariants(self, where: str) -> None:
        for i, sample in enumerate(self.samples):
            for j, frame_id in enumerate(sample.frames):
                if frame_id >= len(self.frames):
                    raise _Invalid(f"{where}.samples[{i}].frames[{j}]",
                                   f"frame id {frame_id} out of range "
                                   f"({len(self.frames)} frames)")


@record
class Options(_Record):
    """How the run was profiled: the sampling interval and the file selection; ``memory`` and
    the memory sampling interval asked for where a session wrote them."""

    _FIELDS = (_Field("cpu_sampling_interval_s", _seconds, default=0.01),
               _Field("profile_all", _bool, default=False),
               _listed("profile_only", _str), _listed("profile_exclude", _str),
               _optional("memory", _bool), _optional("memory_sampling_interval_bytes", _count))


@record
class Sampling(_Record):
    """Sampler health. The counters named as the core's (peakline.model.raw.CPU_STATS) are
    carried from it by name; deferred_code_frees and skipped_ticks are optional (0 when
    absent): how often the core met itself half-way (docs/sampling.md). Optional and absent
    when unknown: the CPU sampling signal, the process's CPU time while profiled, and why the
    CPU figures are incomplete."""

    _FIELDS = (*(_summed_count(name) for name in (
        "cpu_samples", "wait_samples", "dropped_samples", "invalid_frames", "truncated_stacks")),
        _optional("deferred_code_frees", _count, 0, merge=SUM),
        _optional("skipped_ticks", _count, 0, merge=SUM),
        _optional("signal", _nullable(_count)), _optional("process_cpu_s", _nullable(_seconds)),
        _optional("warning", _nullable(_str)))

    @property
    def samples(self) -> int:
        return self.cpu_samples + self.wait_samples


@record
class Totals(_Record, _CategoryTimes):
    """Sampled time of the whole run by category; ``unattributed_s`` had no reported frame.
    The cgroup CPU controller's throttling during the run (a CPU quota), when readable, is the
    whole cgroup's, not only this process's: a merged profile keeps the parent's."""

    _FIELDS = (*_category_fields(), _Field("unattributed_s", _seconds, default=0.0, merge=SUM),
               _optional("cgroup_throttled_s", _seconds),
               _optional("cgroup_throttled_periods", _count))


@record
class Memory(_Record):
    """How memory was measured, and run-wide memory figures beyond peak_bytes/timeline. The
    fields named as the core's counters (peakline.model.raw.MEMORY_STATS) are carried from
    it by name."""

    _FIELDS = (_Field("sampling_interval_bytes", _count, default=0),
               _Field("copy_sampling_interval_bytes", _count, default=0),
               _Field("peak_time_s", _seconds, default=0.0),
               _Field("live_end_bytes", _int, default=0),
               _Field("growth_rate_bytes_s", _signed, default=0.0),
               *(_summed_count(name) for name in (
                   "alloc_samples", "free_samples", "copy_samples", "not_sampled_events",
                   "unattributed_alloc_bytes")),
               _optional("staged_events", _count, 0, merge=SUM),
               _optional("start_monotonic_s", _seconds),
               _optional("blas_buffer_bytes", _count, merge=SUM),
               _optional("blas_buffer_maps", _count, merge=SUM))


def _torch_figures(value: Any, where: str) -> dict:
    return {k: _count(x, _at(where, k)) for k, x in _object(value, where).items()}


@record
class Gpu(_Record):
    """The GPU as measured for the whole run (docs/gpu.md); absent when none was measured."""

    _FIELDS = (_Field("device_name", _nullable(_str), default=None), _listed("devices", _str),
               _Field("peak_bytes", _nullable(_count), default=None),
               _Field("util_mean_pct", _nullable(_seconds), default=None),
               _Field("util_s", _nullable(_seconds), default=None),
               _Field("memory_source", _nullable(_one_of("process", "device", "torch_reserved")),
                      default=None),
               _Field("alloc_source", _nullable(_one_of("torch_history", "torch_ticks",
                                                        "nvml_ticks")), default=None),
               _Field("poll_interval_s", _seconds, default=0.0),
               _Field("readings", _count, default=0), _listed("unavailable", _str),
               _optional("torch", _torch_figures))


@record
class PhaseRecord(_Record):
    """A named phase (peakline.phase): wall interval on the timeline's clock, CPU, heap."""

    _FIELDS = (_Field("name", _str), _Field("depth", _count, default=0),
               _Field("start_s", _seconds, default=0.0), _Field("end_s", _seconds, default=0.0),
               _Field("cpu_s", _seconds, default=0.0),
               *(_optional(name, _nullable(_int))
                 for name in ("start_bytes", "end_bytes", "net_bytes", "peak_bytes")))

    @property
    def wall_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@record
class TaskKeyRecord(_Record):
    """The tasks of one key prefix (Dask's ``key_split``: ``burn-3f2a...`` is ``burn``) that
    the process ran, from their start and end as the engine reported them (peakline.tasks):
    CPU in their windows, and the heap while they ran (from the exact timeline)."""

    _FIELDS = (_Field("prefix", _str), _summed_count("tasks"),
               _Field("wall_s", _seconds, default=0.0, merge=SUM),
               _Field("cpu_s", _seconds, default=0.0, merge=SUM),
               _optional("peak_bytes", _int), _optional("rise_bytes", _int),
               _Field("processes", _count, default=1, merge=SUM))


@record
class RankFigures(_Record):
    """One rank's own figures for one line (``rank_lines[].ranks[]``)."""

    _FIELDS = (_Field("rank", _count), _Field("cpu_s", _seconds, default=0.0),
               _optional("live_at_peak_bytes", _int))


@record
class RankLineRecord(_Record):
    """A line's figures per torch.distributed rank, in a merged profile of ranks."""

    _FIELDS = (_Field("file", _str), _Field("lineno", _count),
               _record_list_field("ranks", RankFigures))


@record
class ProcessRecord(_Record):
    """One process of a merged profile (the parent first); unmerged ones have no figures."""

    _FIELDS = (_Field("pid", _count), _Field("program", _str, default=""), _listed("argv", _str),
               _optional("hostname", _str), _optional("node_id", _str), _optional("rank", _count),
               _Field("merged", _bool, default=True),
               _optional("parent_pid", _nullable(_count)),
               _optional("started_at", _nullable(_utc_timestamp)),
               _optional("elapsed_s", _nullable(_seconds)), _optional("exit_code", _nullable(_int)),
               _optional("peak_bytes", _nullable(_int)), _optional("cpu_s", _nullable(_seconds)),
               _optional("not_merged_reason", _nullable(_str)),
               _optional("peak_time_s", _seconds), _optional("start_offset_s", _signed),
               _optional("ray_worker_id", _nullable(_str)), _optional("ray_actor", _nullable(_str)),
               _optional("ray_tasks", _nullable(_list_of(_str))),
               _optional("partial_reason", _nullable(_str)), _optional("partial_until_s", _seconds))


@record
class SnapshotInfo(_Record):
    """Present when the profile is a snapshot of a running program (``--snapshot-every``, the
    snapshot signal, the live view): which part of the run it covers. ``sequence``: 1 for the
    first snapshot of the run, then 2, 3, ...; ``start_s``/``end_s``: seconds since
    started_at where the figures begin (0: cumulative) and when it was taken (= elapsed_s);
    ``taken_at``: ISO-8601 UTC."""

    _FIELDS = (_Field("sequence", _count),
               _Field("trigger", _one_of("interval", "signal", "request")),
               _Field("start_s", _seconds), _Field("end_s", _seconds),
               _Field("taken_at", _utc_timestamp))

    def _check_invariants(self, where: str) -> None:
        if self.end_s < self.start_s:
            raise _Invalid(_at(where, "end_s"), f"ends ({self.end_s}) before it starts ({self.start_s})")
