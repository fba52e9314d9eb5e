"""Terminal report: a header, memory highlights, a legend, then per file a line table and
functions.

         │   Time │        │        │        │        │ Memory │         │        │
    Line │ Python │ native │ system │   wait │  total │  alloc │ at peak │    net │ … │ source
    ▲ 14 │   2.0% │  20.0% │   1.1% │   3.0% │  26.1% │   250M │    200M │  +200M │ … │ a = np…

Time columns are shares of the user's sampled time (``Profile.user_sampled_s``: CPU + wait,
less the waiting of idle background threads, docs/reports.md "Whose time"), so every column of
every file adds up to at most 100% together with unattributed time, and ``total`` (CPU + wait,
+ run delay where the profile has it) is in the same unit as its parts: the column to rank
lines by. The memory columns appear only when the profile has memory (not ``--cpu-only``):
bytes allocated, held at the peak, ``net_bytes``, the share of allocated bytes that were
Python objects, a sparkline of the line's live bytes over the run (each cell the maximum of its
time slice, so spikes survive), and copy volume. ``▲`` marks the lines holding the most memory
at the peak (reporters/_highlights.py); they are listed with the possible leaks right after
the header.

Modes. Full prints every line of a file with activity (``--all-lines``). ``reduced`` (the
command line's default) prints only active lines (reporters/_filters.py: time share or
allocated bytes over the thresholds) with a ``...`` row for each gap, hides inactive files and
functions, and says how many it hid. ``render`` itself defaults to full.

Output rules: stdlib only; width-aware (columns are dropped, least important first, until the
source keeps ``MIN_SOURCE_WIDTH`` cells, and the legend names the ones left out; then rows are
cut, measured in display cells); ANSI colour only when asked for (default: the stream is a TTY
and ``NO_COLOR`` is unset or empty, see no-color.org); box-drawing glyphs only when the
encoding can carry them; control characters in source are replaced so one source line is
always one output row.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import NamedTuple, TextIO

from peakline.model.leaks import LEAK_REPORT_THRESHOLD
from peakline.model.profile import FileRecord, FunctionRecord, LineRecord, Profile
from peakline.reporters import _text
from peakline.reporters._filters import (DEFAULT_CPU_PERCENT_THRESHOLD,
                                         DEFAULT_MALLOC_THRESHOLD_BYTES, ReportFilter)
from peakline.reporters._format import (compact_bytes, human_bytes, human_rate, mb_per_s,
                                        python_share, resample_max, sparkline)
from peakline.reporters._highlights import (HOT_PERCENT, TRUNCATED_STACKS_NOTE,
                                            blas_buffer_note, contention_parts, peak_basis,
                                            peak_holders, peak_vs_rss_note, possible_leaks)
from peakline.reporters._processes import (RANK_LINES_TITLE, TASK_KEYS_TITLE, describe, label,
                                           rank_highlights, rank_line_parts, task_key_parts)
from peakline.reporters._source import read_source
from peakline.reporters._text import duration, percent, printable

DEFAULT_WIDTH = 100
MIN_WIDTH = 60  # line number + Python + native (+ net) columns, and some source
MIN_SOURCE_WIDTH = 24  # columns are dropped before the source gets narrower than this
LINE_SPARK_CELLS = 8
_MAX_THREADS_LISTED = 4

_BOLD_RED = "\033[1;31m"
_BOLD_MAGENTA = "\033[1;35m"
_BOLD = "\033[1m"
_DIM = "\033[2m"
_RESET = "\033[0m"

__all__ = ["render", "read_source", "HOT_PERCENT", "MIN_WIDTH"]


def render(profile: Profile, stream: TextIO, *, width: int | None = None,
           color: bool | None = None, reduced: bool = False,
           cpu_percent_threshold: float = DEFAULT_CPU_PERCENT_THRESHOLD,
           malloc_threshold_bytes: int = DEFAULT_MALLOC_THRESHOLD_BYTES) -> None:
    """Write the terminal report of ``profile`` to ``stream``."""
    if width is None:
        width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    if color is None:
        color = _text.isatty(stream) and not os.environ.get("NO_COLOR")
    rules = ReportFilter(reduced, cpu_percent_threshold, malloc_threshold_bytes,
                         profile.user_sampled_s)
    view = _View(profile, stream, max(MIN_WIDTH, width), bool(color),
                 _text.glyphs_for(stream), rules)
    view.header()
    _phases_and_processes(view)
    view.highlights()
    view.legend()
    view.files()


def render_header(profile: Profile, stream: TextIO, *, width: int = DEFAULT_WIDTH) -> None:
    """Only the report's header (title, time, threads, memory), without colour: the static
    HTML summary (reporters/static_html.py) opens with it."""
    rules = ReportFilter(True, sampled_s=profile.user_sampled_s)
    _View(profile, stream, max(MIN_WIDTH, width), False, _text.glyphs_for(stream),
          rules).header()


def _phases_and_processes(view: _View) -> None:
    """Named phases (peakline.phase) and the processes merged into this profile."""
    p = view.profile
    if p.phases:
        view.emit()
        view.emit("Phases", _BOLD)
        for ph in p.phases:
            parts = [f"{'  ' * ph.depth}{printable(ph.name)}", f"wall {duration(ph.wall_s)}",
                     f"CPU {duration(ph.cpu_s)}"]
            if ph.peak_bytes is not None:
                parts.append(f"peak {human_bytes(ph.peak_bytes)}")
            if ph.net_bytes is not None:
                parts.append(f"net {human_bytes(ph.net_bytes, signed=True)}")
            view.emit_parts(parts)
    if p.processes and len(p.processes) > 1:
        view.emit()
        merged = sum(1 for r in p.processes if r.merged)
        view.emit(f"Processes ({merged} of {len(p.processes)} merged into this report)", _BOLD)
        hosts = {r.hostname for r in p.processes if r.hostname}
        for r in p.processes:
            parts = [label(r), printable(describe(r))]
            if len(hosts) > 1 or r.node_id is not None:  # where it ran, once that tells apart
                parts.insert(1, "on " + printable(r.hostname or "?")
                             + (f" (node {printable(r.node_id)})" if r.node_id is not None else ""))
            if not r.merged:
                parts.append(f"not merged ({r.not_merged_reason})" if r.not_merged_reason
                             else "not merged (still running or no profile)")
            elif r.partial_until_s is not None:
                parts.append(f"partial: ended without its profile; its first "
                             f"{duration(r.partial_until_s)} (its last snapshot)")
            if r.partial_reason:
                parts.append(f"partial ({r.partial_reason})")
            if r.exit_code is not None:
                parts.append(f"exit {r.exit_code}")
            if r.cpu_s is not None:
                parts.append(f"CPU {duration(r.cpu_s)}")
            if r.peak_bytes is not None:
                parts.append(f"peak {human_bytes(r.peak_bytes)}")
            view.emit_parts(parts)
        highlights = rank_highlights(p)
        if highlights:
            view.emit_parts([f"{what}: {label(r)} {figure}" for what, r, figure in highlights])
        if p.peak_bytes_sum is not None:
            parts = []
            if p.tree_peak_bytes is not None:
                parts.append(f"measured peak of the process tree {human_bytes(p.tree_peak_bytes)}"
                             f" at {p.tree_peak_time_s or 0:.2f} s")
            parts.append(f"sum of the processes' own peaks {human_bytes(p.peak_bytes_sum)} "
                         f"(the most they could hold together)")
            view.emit_parts(parts)
        _rank_lines(view)
        _submitted_work(view)
    if p.task_keys:
        view.emit()
        view.emit(TASK_KEYS_TITLE, _BOLD)
        for parts in task_key_parts(p):
            view.emit_parts(parts)


def _rank_lines(view: _View) -> None:
    rows = rank_line_parts(view.profile)
    if not rows:
        return
    view.emit()
    view.emit(RANK_LINES_TITLE, _BOLD)
    for filename, lineno, parts in rows:
        view.emit(f"  {view.place(filename, lineno)}  {view.source_text(filename, lineno)}")
        view.emit_parts(parts, indent="    ")


def _submitted_work(view: _View) -> None:
    """The children's CPU charged to the parent line that waited for it (by time)."""
    work = view.profile.submitted_work
    if not work or not work["lines"]:
        return
    view.emit()
    view.emit("Child processes' CPU, charged to the parent line that waited for it", _BOLD)
    rows = work["lines"][:10]
    places = [view.place(r["file"], r["lineno"]) for r in rows]
    pw = max(map(len, places))
    for row, place in zip(rows, places):
        n = len(row["pids"])
        view.emit(f"  {place:<{pw}} CPU {duration(row['cpu_s']):>9} in {n} "
                  f"process{'es' if n != 1 else ''}  {view.source_text(row['file'], row['lineno'])}")
    if work["unlinked_cpu_s"] >= 0.01:
        view.emit(f"  {duration(work['unlinked_cpu_s'])} more ran while the parent's main thread "
                  f"was on no reported line (or had ended)")


# ---- columns ------------------------------------------------------------------------------

class _Column(NamedTuple):
    group: str  # shown above the first visible column of its group (memory profiles only)
    label: str
    width: int
    keep: int  # columns with the lowest ``keep`` are dropped first on narrow terminals
    cell: Callable[[_View, LineRecord], str]


def _py_share_cell(line) -> str:
    share = python_share(line.alloc_python_bytes, line.alloc_native_bytes)
    return "" if share is None else f"{share:.0f}%"


def line_total_s(line) -> float:
    """A line's time: CPU + wait (+ run delay, in profiles that have it)."""
    return line.cpu_s + line.wait_s + (getattr(line, "run_delay_s", None) or 0.0)


def _bytes_cell(value: int | None) -> str:
    return compact_bytes(value) if value else ""


# Every time column is a share of the user's sampled time (Profile.user_sampled_s), so the
# parts and their total are in one unit and add up. ``keep`` ranks what a narrow terminal
# keeps: the total and the memory a user ranks by (held at the peak, allocated) first.
_TIME_COLUMNS = (
    _Column("Time", "Python", 6, 90, lambda v, ln: percent(v.share(ln.cpu_python_s))),
    _Column("Time", "native", 6, 85, lambda v, ln: percent(v.share(ln.cpu_native_s))),
    _Column("Time", "system", 6, 20, lambda v, ln: percent(v.share(ln.cpu_system_s))),
    _Column("Time", "wait", 6, 60, lambda v, ln: percent(v.share(ln.wait_s))),
    _Column("Time", "total", 6, 100, lambda v, ln: percent(v.share(line_total_s(ln)))),
)
_MEMORY_COLUMNS = (
    _Column("Memory", "alloc", 6, 75, lambda v, ln: _bytes_cell(ln.alloc_bytes)),
    _Column("Memory", "at peak", 7, 80, lambda v, ln: _bytes_cell(ln.live_at_peak_bytes)),
    _Column("Memory", "net", 6, 70, lambda v, ln: compact_bytes(ln.net_bytes or 0, signed=True)),
    _Column("Memory", "Python%", 7, 30, lambda v, ln: _py_share_cell(ln)),
    _Column("Memory", "timeline", LINE_SPARK_CELLS, 40, lambda v, ln: v.line_spark(ln)),
    _Column("Copy", "(MB/s)", 6, 10, lambda v, ln: mb_per_s(ln.copy_mb_s)),
)
_COLUMN_NAMES = {"(MB/s)": "copy MB/s"}


def _visible(columns, fixed: int, width: int, rest: int):
    """Drop the least important columns until ``fixed`` + columns + ``rest`` fit ``width``."""
    shown = list(columns)
    while shown and fixed + sum(c.width + 3 for c in shown) + rest > width:
        shown.remove(min(shown, key=lambda c: c.keep))
    return shown


# ---- the report ---------------------------------------------------------------------------

class _View:
    """One rendering: options plus the profile-wide denominator."""

    def __init__(self, profile: Profile, stream: TextIO, width: int, color: bool,
                 glyphs: _text.Glyphs, rules: ReportFilter) -> None:
        self.profile = profile
        self.stream = stream
        self.width = width
        self.color = color
        self.g = glyphs
        self.rules = rules
        self.memory = profile.has_memory
        self.holders = {(h.filename, h.line.lineno) for h in peak_holders(profile)}
        self._sources: dict[str, tuple[list[str] | None, str]] = {}
        self.background = profile.background_wait_by_thread()
        self.columns = _TIME_COLUMNS + (_MEMORY_COLUMNS if self.memory else ())
        self.lw = max([4] + [max(len(str(max((ln.lineno for ln in r.lines), default=0))),
                                 len(str(len(self.source(f)[0] or ()))))
                             for f, r in profile.files.items()])
        self.mark = 2 if self.memory else 0  # "▲ " before the line number
        self.shown = _visible(self.columns, self.mark + self.lw + 3, self.width,
                              MIN_SOURCE_WIDTH)

    def share(self, seconds: float) -> float:
        return self.rules.share(seconds)

    def source(self, filename: str) -> tuple[list[str] | None, str]:
        if filename not in self._sources:
            self._sources[filename] = read_source(filename)
        return self._sources[filename]

    def source_text(self, filename: str, lineno: int) -> str:
        lines, _ = self.source(filename)
        if lineno == 0:
            return "(line unknown)"
        return printable(lines[lineno - 1]).strip() if lines and lineno <= len(lines) else ""

    def emit(self, text: str = "", style: str = "", *, mark_style: str = "") -> None:
        """One row, cut to the width. ``mark_style`` colours the row's first character (the
        peak marker) on its own, so it stands out in a row coloured for another reason."""
        text = _text.fit(text, self.width, self.g.ellipsis)
        if self.color and mark_style and text:
            text = f"{mark_style}{text[0]}{_RESET}{style}{text[1:]}{_RESET if style else ''}"
        elif style and self.color:
            text = f"{style}{text}{_RESET}"
        self.stream.write(text + "\n")

    def emit_parts(self, parts: list[str], style: str = "", indent: str = "  ") -> None:
        """Join ``parts`` with a dot, wrapping between parts (never inside one) at the width."""
        sep = f" {self.g.dot} "
        line = ""
        for part in parts:
            candidate = part if not line else f"{line}{sep}{part}"
            if line and len(indent) + _text.text_width(candidate) > self.width:
                self.emit(indent + line, style)
                candidate = part
            line = candidate
        if line:
            self.emit(indent + line, style)

    def line_spark(self, line: LineRecord) -> str:
        if not line.timeline:
            return ""
        values = resample_max(line.timeline, 0.0, self.profile.elapsed_s, LINE_SPARK_CELLS)
        return sparkline(values, blocks=self.g.spark)

    def place(self, filename: str, lineno: int) -> str:
        """``name.py:12``; the full path when two reported files share a base name."""
        base = os.path.basename(filename) or filename
        same = sum(1 for f in self.profile.files if os.path.basename(f) == base)
        name = base if same <= 1 else filename
        return f"{printable(name)}:{lineno or '?'}"

    # -- header -----------------------------------------------------------------------------

    def header(self) -> None:
        p = self.profile
        command = " ".join(p.argv) if p.argv else p.program
        self.emit(f"peakline {self.g.dot} {printable(command)}", _BOLD)
        exit_text = "exit code n/a" if p.exit_code is None else f"exit code {p.exit_code}"
        self.emit_parts([f"elapsed {duration(p.elapsed_s)}", exit_text,
                         f"started {p.started_at}"])
        if p.attached is not None:  # peakline attach: a slice of a running process
            self.emit_parts([f"attached to process {p.pid} while it ran",
                             "memory counts from the attach moment"])
        if p.snapshot is not None:
            snap = p.snapshot
            self.emit(f"snapshot #{snap.sequence} ({snap.trigger}) of a running program: covers "
                      f"{snap.start_s:.2f}-{snap.end_s:.2f} s since the start, taken at "
                      f"{snap.taken_at}; the program had not ended", _BOLD)
        t = p.totals
        cpu_s = t.cpu_s

        def split(seconds: float) -> str:
            return f"{100.0 * seconds / cpu_s:.0f}%" if cpu_s > 0 else "0%"

        background_s = sum(self.background.values())
        parts = [f"CPU {duration(cpu_s)}: Python {split(t.cpu_python_s)}",
                 f"native {split(t.cpu_native_s)}", f"system {split(t.cpu_system_s)}",
                 f"wait {duration(max(0.0, t.wait_s - background_s))}", *contention_parts(t)]
        if background_s > 0:
            parts.append(f"idle background threads waited {duration(background_s)} "
                         f"(not counted)")
        self.emit_parts(parts)
        s = p.sampling
        if self.rules.sampled_s <= 0:
            self.emit_parts([f"no time was sampled ({s.samples} samples)",
                             "the run may have been shorter than one sampling interval"])
        else:
            self.emit_parts([f"{100.0 * p.user_attributed_fraction:.1f}% of sampled time "
                             f"attributed to reported code",
                             f"{s.samples} samples ({s.cpu_samples} CPU, {s.wait_samples} wait)"])
        problems = []
        if s.dropped_samples:
            taken = s.samples + s.dropped_samples
            problems.append(f"warning: dropped {s.dropped_samples} samples "
                            f"({100.0 * s.dropped_samples / taken:.1f}%)")
        if s.invalid_frames:
            problems.append(f"{s.invalid_frames} invalid frames")
        if s.truncated_stacks:
            problems.append(f"{s.truncated_stacks} truncated stacks")
        if p.memory is not None and p.memory.not_sampled_events:
            problems.append(f"{p.memory.not_sampled_events} memory events not sampled")
        if problems:
            if not problems[0].startswith("warning"):
                problems[0] = "warning: " + problems[0]
            self.emit_parts(problems, _BOLD)
            if s.truncated_stacks:
                self.emit_parts(TRUNCATED_STACKS_NOTE, _DIM)
        self.threads_line()
        if self.memory:
            self.memory_line()

    def threads_line(self) -> None:
        """The user's threads, then (apart) the background threads with their waiting."""
        every = self.profile.threads
        mains = self.profile.main_thread_ids()
        users = sorted((t for t in every if t.tid not in self.background
                        and (t.cpu_s > 0 or t.wait_s > 0 or t.tid in mains)),
                       key=lambda t: (-t.cpu_s - t.wait_s, t.tid))
        quiet = len(every) - len(users) - len(self.background)
        background = sorted((t for t in every if t.tid in self.background),
                            key=lambda t: (-self.background[t.tid], t.tid))

        def name(thread) -> str:
            label = printable(thread.name) if thread.name else f"tid {thread.tid}"
            return label + ("" if thread.python else " native")

        for group, title, cell in (
                (users, "thread", lambda t: f"{name(t)} {duration(t.cpu_s)} CPU"),
                (background, "background thread",
                 lambda t: f"{name(t)} waited {duration(self.background[t.tid])}, "
                           f"{duration(t.cpu_s)} CPU")):
            if not group:
                continue
            parts = [cell(t) for t in group[:_MAX_THREADS_LISTED]]
            more = len(group) - _MAX_THREADS_LISTED
            if more > 0:
                parts.append(f"+{more} more")
            if group is users and quiet > 0:
                parts.append(f"{quiet} without CPU or wait")
            count = f"{len(group)} {title}" + ("s" if len(group) > 1 else "")
            if group is background:
                count += " (idle in library code; waiting not counted)"
            parts[0] = f"{count}: {parts[0]}"
            self.emit_parts(parts)

    def memory_line(self) -> None:
        p, m = self.profile, self.profile.memory
        cells = max(10, min(48, self.width // 3))
        basis = peak_basis(p)
        tree = basis is not None and basis.kind == "tree"
        series = p.tree_timeline if tree else p.timeline
        spark = sparkline(resample_max(series or [], 0.0, p.elapsed_s, cells),
                          blocks=self.g.spark, zero=self.g.spark[0])
        parts = [f"memory {spark}" if spark else "memory"]
        if basis is not None and basis.kind != "process":
            # A merged profile: say which process(es) each figure covers.
            if tree:
                parts.append(f"peak of the process tree {human_bytes(basis.peak_bytes)} at "
                             f"{basis.time_s or 0:.2f} s (all processes together)")
            parts.append(f"largest single-process peak {human_bytes(p.peak_bytes or 0)}")
            parts.append(f"sum of the processes' peaks {human_bytes(p.peak_bytes_sum or 0)}")
            if p.peak_rss_bytes is not None:
                parts.append(f"largest peak RSS {human_bytes(p.peak_rss_bytes)}")
            if m is not None:
                parts.append(f"parent: growth {human_rate(m.growth_rate_bytes_s)}, "
                             f"{human_bytes(m.live_end_bytes)} live at end")
                parts.append(f"sampled every {human_bytes(m.sampling_interval_bytes)}")
        else:
            peak_at = f" at {m.peak_time_s:.2f} s" if m is not None else ""
            parts.append(f"peak {human_bytes(p.peak_bytes or 0)}{peak_at}")
            if p.peak_rss_bytes is not None:
                parts.append(f"peak RSS {human_bytes(p.peak_rss_bytes)}")
            if m is not None:
                parts.append(f"growth {human_rate(m.growth_rate_bytes_s)}")
                parts.append(f"{human_bytes(m.live_end_bytes)} live at end")
                parts.append(f"sampled every {human_bytes(m.sampling_interval_bytes)}")
        self.emit_parts(parts)
        rss_note = peak_vs_rss_note(p)
        if rss_note:
            self.emit_parts(rss_note, _DIM)
        note = blas_buffer_note(p)
        if note:
            self.emit_parts(note)

    # -- memory highlights ------------------------------------------------------------------

    def highlights(self) -> None:
        if not self.memory:
            return
        p = self.profile
        holders = peak_holders(p)
        if holders:
            basis = peak_basis(p)
            when = f" at {basis.time_s:.2f} s" if basis.time_s is not None else ""
            self.emit()
            if basis.kind == "tree":
                title = (f"Lines holding memory at the peak of the process tree "
                         f"({human_bytes(basis.peak_bytes)}{when}, all processes together)")
            elif basis.kind == "each_process":
                title = (f"Lines holding memory at their process's own peak (summed over "
                         f"processes; % of the sum of the peaks, {human_bytes(basis.peak_bytes)})")
            else:
                title = f"Lines holding memory at the peak ({human_bytes(basis.peak_bytes)}{when})"
            self.emit(title, _BOLD)
            places = [self.place(h.filename, h.line.lineno) for h in holders]
            pw = max(map(len, places))
            for held, place in zip(holders, places):
                text = self.source_text(held.filename, held.line.lineno)
                self.emit(f"  {self.g.peak} {place:<{pw}} "
                          f"{human_bytes(held.held_bytes):>10} "
                          f"{100 * held.share:3.0f}%  {text}", _BOLD_MAGENTA)
        leaks = possible_leaks(p)
        if leaks:
            self.emit()
            self.emit(f"Possible leaks (likelihood {self.g.dot} growth {self.g.dot} held at "
                      f"end; flagged at >= {100 * LEAK_REPORT_THRESHOLD:.0f}%)", _BOLD)
            places = [self.place(f, line.lineno) for f, line in leaks]
            pw = max(map(len, places))
            for (filename, line), place in zip(leaks, places):
                text = self.source_text(filename, line.lineno)
                self.emit(f"  {place:<{pw}} {100 * (line.leak_likelihood or 0):4.0f}% "
                          f"{human_rate(line.leak_rate_bytes_s or 0):>14} "
                          f"{human_bytes(line.net_bytes or 0):>10}  {text}", _BOLD_RED)

    # -- legend -----------------------------------------------------------------------------

    def legend(self) -> None:
        """What the tables show, what the colours mean, and which columns did not fit."""
        if not self.profile.files:
            return
        g = self.g
        self.emit()
        if self.rules.reduced:
            self.emit_parts([f"Lines: only active lines ({self.below()})",
                             "--all-lines shows every line"])
        run_delay = (getattr(self.profile.totals, "run_delay_s", None) or 0) > 0
        parts = ["Time: % of the user's sampled time"
                 + (" (idle background threads' waiting left out)" if self.background else ""),
                 "total = Python + native + system + wait" + (" + run delay" if run_delay
                                                               else "")]
        if self.memory:
            parts += ["alloc: bytes the line allocated", "at peak: held at the peak",
                      "net: still held at the end"]
        self.emit_parts(parts)
        colours = [f"{g.peak} magenta: holds memory at the peak"] if self.memory else []
        colours += [f"red: {HOT_PERCENT:g}%+ of the time", "dim: no activity"]
        self._legend_row(colours)
        dropped = [c for c in self.columns if c not in self.shown]
        if dropped:
            names = ", ".join(_COLUMN_NAMES.get(c.label, c.label) for c in dropped)
            import textwrap
            for row in textwrap.wrap(f"Left out to fit {self.width} columns: {names}; a wider "
                                     f"terminal (e.g. COLUMNS=200) or --html shows them",
                                     self.width - 2, break_on_hyphens=False):
                self.emit("  " + row)

    def _legend_row(self, parts: list[str]) -> None:
        """``parts`` wrapped as emit_parts does, each colour's name shown in its colour."""
        rows, sep = [], f" {self.g.dot} "
        for part in ["Colours: " + parts[0], *parts[1:]]:
            if rows and _text.text_width(f"  {rows[-1]}{sep}{part}") <= self.width:
                rows[-1] += sep + part
            else:
                rows.append(part)
        for row in rows:
            text = _text.fit("  " + row, self.width, self.g.ellipsis)
            if self.color:
                for word, style in ((f"{self.g.peak} magenta", _BOLD_MAGENTA),
                                    ("red:", _BOLD_RED), ("dim:", _DIM)):
                    text = text.replace(word, f"{style}{word}{_RESET}", 1)
            self.stream.write(text + "\n")

    # -- files ------------------------------------------------------------------------------

    def below(self) -> str:
        return self.rules.describe() if self.memory else f"{self.rules.cpu_percent_threshold:g}%"

    def files(self) -> None:
        ranked = sorted(self.profile.files.items(),
                        key=lambda item: (-item[1].totals().total_s, item[0]))
        hidden = 0
        for filename, record in ranked:
            if self.rules.reduced and not self.rules.file_active(record):
                hidden += 1
                continue
            self.file(filename, record)
        if hidden:
            self.emit()
            self.emit(f"{hidden} file(s) below {self.below()} hidden", _DIM)

    def file(self, filename: str, record: FileRecord) -> None:
        g = self.g
        totals = record.totals()
        self.emit()
        parts = [printable(filename), f"{self.share(totals.total_s):.1f}% of sampled time",
                 f"CPU {self.share(totals.cpu_s):.1f}%, wait {duration(totals.wait_s)}"
                 + (f", run delay {duration(totals.run_delay_s)}" if totals.run_delay_s > 0 else "")]
        if self.memory:
            parts.append(f"net {human_bytes(sum(ln.net_bytes or 0 for ln in record.lines))}")
        self.emit_parts(parts, _BOLD, indent="")
        source, reason = self.source(filename)
        if source is None:
            self.emit(f"  (source not available: {reason})", _DIM)
        lw, shown = self.lw, self.shown
        lead = self.mark + lw
        if self.memory:
            groups, tops = set(), []
            for column in shown:
                tops.append("" if column.group in groups else column.group)
                groups.add(column.group)
            self.emit((f"{'':>{lead}} {g.bar} " +
                       "".join(f"{t:>{c.width}} {g.bar} " for t, c in zip(tops, shown))).rstrip())
        self.emit(f"{'Line':>{lead}} {g.bar} " +
                  "".join(f"{c.label:>{c.width}} {g.bar} " for c in shown) + "source")
        self.emit(f"{g.rule * (lead + 1)}{g.cross}" +
                  "".join(f"{g.rule * (c.width + 2)}{g.cross}" for c in shown) + g.rule * 8)
        for lineno, line in self._rows(record, source):
            if line is None:
                self.emit(f"{'...':>{lead}} {g.bar}", _DIM)
                continue
            number = "?" if lineno == 0 else str(lineno)
            held = (filename, lineno) in self.holders
            if self.memory:
                number = f"{g.peak if held else ' '} {number:>{lw}}"
            cells = "".join(f"{c.cell(self, line):>{c.width}} {g.bar} " for c in shown)
            text = "(line unknown)" if lineno == 0 else \
                printable(source[lineno - 1]) if source and lineno <= len(source) else ""
            row = f"{number:>{lead}} {g.bar} {cells}{text}"
            share = self.share(line.total_s)
            active = share > 0 or line.alloc_bytes > 0
            style = (_BOLD_RED if share >= HOT_PERCENT else _BOLD_MAGENTA if held
                     else "" if active else _DIM)
            self.emit(row, style, mark_style=_BOLD_MAGENTA if held else "")
        self.functions(record)

    def _rows(self, record: FileRecord, source: list[str] | None):
        """(lineno, LineRecord | None) rows to print; (0, None) marks a ``...`` gap."""
        by_line = {line.lineno: line for line in record.lines}
        if self.rules.reduced:
            wanted = [n for n, line in by_line.items() if self.rules.line_active(line)]
        elif source is not None:
            wanted = sorted(set(range(1, len(source) + 1)) | set(by_line))
        else:
            wanted = list(by_line)
        previous = None
        for lineno in sorted(wanted):
            if self.rules.reduced and previous is not None and lineno > previous + 1:
                yield 0, None
            previous = lineno
            yield lineno, by_line.get(lineno) or LineRecord(lineno)

    # -- functions --------------------------------------------------------------------------

    def functions(self, record: FileRecord) -> None:
        ranked = sorted(record.functions, key=lambda f: (-f.inclusive_s, -f.self_s, f.lineno))
        shown = [f for f in ranked if not self.rules.reduced or self.rules.function_active(f)]
        if not shown:
            return
        g = self.g
        columns = _visible(_FUNCTION_MEMORY_COLUMNS if self.memory else (), 23,
                           self.width, MIN_SOURCE_WIDTH)
        self.emit()
        self.emit(f"    self {g.bar} inclusive {g.bar} " +
                  "".join(f"{c.label:>{c.width}} {g.bar} " for c in columns) +
                  "function (% of sampled time)")
        for function in shown:
            row = (f"{percent(self.share(function.self_s)) or '-':>8} {g.bar} "
                   f"{percent(self.share(function.inclusive_s)) or '-':>9} {g.bar} " +
                   "".join(f"{c.cell(self, function) or '-':>{c.width}} {g.bar} "
                           for c in columns) +
                   f"{printable(function.name)} (line {function.lineno})")
            style = _BOLD_RED if self.share(function.self_s) >= HOT_PERCENT else ""
            self.emit(row, style)
        if len(shown) < len(ranked):
            self.emit(f"    {len(ranked) - len(shown)} function(s) below {self.below()} "
                      f"hidden", _DIM)


def _function_alloc(function: FunctionRecord) -> int:
    return (function.alloc_python_bytes or 0) + (function.alloc_native_bytes or 0)


_FUNCTION_MEMORY_COLUMNS = (
    _Column("Memory", "alloc", 6, 60, lambda v, f: compact_bytes(_function_alloc(f))),
    _Column("Memory", "Python%", 7, 30, lambda v, f: _py_share_cell(f)),
    _Column("Memory", "net", 6, 70, lambda v, f: compact_bytes(f.net_bytes or 0, signed=True)),
    _Column("Memory", "at peak", 7, 50,
            lambda v, f: compact_bytes(f.live_at_peak_bytes or 0)),
)
