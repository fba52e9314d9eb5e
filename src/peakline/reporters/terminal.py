"""Terminal report: a header, then per file a line table and a functions summary.

    Line │ Python │ native │ system │  wait │ source
       7 │  45.0% │  20.0% │   2.0% │ 0.50s │ data = json.loads(text)

Percentages are shares of all sampled time (CPU + wait, ``Profile.sampled_s``), so every
column of every file adds up to at most 100% together with ``unattributed``; wait is also
shown in seconds because "waited 2 s" reads better than a percentage of a mixed total.

Modes. Full (default) prints every line of a file with activity, like Scalene. ``reduced``
prints only lines whose share (CPU + wait) reaches ``cpu_percent_threshold`` percent, with a
``...`` row for each gap, hides files and functions below it, and says how many it hid.

Output rules: stdlib only; width-aware (source is cut to the terminal width, measured in
display cells so wide CJK characters count twice); ANSI colour only when asked for (default:
the stream is a TTY and ``NO_COLOR`` is unset or empty, see no-color.org); box-drawing glyphs
only when the stream's encoding can carry them; control characters in source are replaced so
one source line is always one output row.
"""

from __future__ import annotations

import os
import shutil
import tokenize
import unicodedata
from dataclasses import dataclass
from typing import TextIO

from peakline.model.profile import FileRecord, LineRecord, Profile

HOT_PERCENT = 10.0  # a line with at least this share of sampled time is highlighted
DEFAULT_WIDTH = 100
MIN_WIDTH = 60  # the five number columns take ~44 cells; below this no source would fit
_MAX_THREADS_LISTED = 4

_BOLD_RED = "\033[1;31m"
_BOLD = "\033[1m"
_DIM = "\033[2m"
_RESET = "\033[0m"


@dataclass(frozen=True)
class _Glyphs:
    bar: str
    rule: str
    cross: str
    ellipsis: str
    dot: str


_UNICODE = _Glyphs("│", "─", "┼", "…", "·")
_ASCII = _Glyphs("|", "-", "+", "...", "-")


def render(profile: Profile, stream: TextIO, *, width: int | None = None,
           color: bool | None = None, reduced: bool = False,
           cpu_percent_threshold: float = 1.0) -> None:
    """Write the terminal report of ``profile`` to ``stream``."""
    if width is None:
        width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    if color is None:
        color = _isatty(stream) and not os.environ.get("NO_COLOR")
    view = _View(profile, stream, max(MIN_WIDTH, width), bool(color), _glyphs_for(stream),
                 reduced, cpu_percent_threshold)
    view.header()
    view.files()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _glyphs_for(stream: TextIO) -> _Glyphs:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        "│─┼…·".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return _ASCII
    return _UNICODE


# ---- text helpers -------------------------------------------------------------------------

def _cell_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _fit(text: str, width: int, ellipsis: str) -> str:
    """``text`` cut to ``width`` display cells, ending in ``ellipsis`` when cut."""
    if sum(_cell_width(c) for c in text) <= width:
        return text
    room = width - len(ellipsis)
    out, used = [], 0
    for char in text:
        cells = _cell_width(char)
        if used + cells > room:
            break
        out.append(char)
        used += cells
    return "".join(out) + ellipsis if room >= 0 else ellipsis[:width]


def _printable(text: str) -> str:
    text = text.rstrip("\r\n").expandtabs(8)
    return "".join("?" if unicodedata.category(c) in ("Cc", "Cs") else c for c in text)


def _percent(share: float) -> str:
    if share <= 0:
        return ""
    if share < 0.05:
        return "<0.1%"
    return f"{share:.1f}%"


def _short_s(seconds: float) -> str:
    """Compact seconds for a table cell (at most 6 characters up to 99999 s)."""
    if seconds <= 0:
        return ""
    if seconds >= 100:
        return f"{seconds:.0f}s"
    if seconds >= 10:
        return f"{seconds:.1f}s"
    if seconds >= 0.01:
        return f"{seconds:.2f}s"
    return f"{seconds * 1000:.1f}ms"


def _duration(seconds: float) -> str:
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"


def read_source(filename: str) -> tuple[list[str] | None, str]:
    """The file's lines decoded as Python would (PEP 263 cookie), or (None, reason)."""
    if filename.startswith("<"):
        return None, "not a file on disk"
    try:
        with tokenize.open(filename) as stream:
            return stream.read().splitlines(), ""
    except FileNotFoundError:
        return None, "file not found"
    except (OSError, UnicodeError, ValueError, SyntaxError, LookupError) as error:
        return None, type(error).__name__


# ---- the report ---------------------------------------------------------------------------

class _View:
    """One rendering: options plus the profile-wide denominator."""

    def __init__(self, profile: Profile, stream: TextIO, width: int, color: bool,
                 glyphs: _Glyphs, reduced: bool, threshold: float) -> None:
        self.profile = profile
        self.stream = stream
        self.width = width
        self.color = color
        self.g = glyphs
        self.reduced = reduced
        self.threshold = threshold
        self.sampled_s = profile.sampled_s

    def share(self, seconds: float) -> float:
        return 0.0 if self.sampled_s <= 0 else 100.0 * seconds / self.sampled_s

    def emit(self, text: str = "", style: str = "") -> None:
        text = _fit(text, self.width, self.g.ellipsis)
        if style and self.color:
            text = f"{style}{text}{_RESET}"
        self.stream.write(text + "\n")

    # -- header -----------------------------------------------------------------------------

    def emit_parts(self, parts: list[str], style: str = "", indent: str = "  ") -> None:
        """Join ``parts`` with a dot, wrapping between parts (never inside one) at the width."""
        sep = f" {self.g.dot} "
        line = ""
        for part in parts:
            candidate = part if not line else f"{line}{sep}{part}"
            if line and len(indent) + len(candidate) > self.width:
                self.emit(indent + line, style)
                candidate = part
            line = candidate
        if line:
            self.emit(indent + line, style)

    def header(self) -> None:
        p = self.profile
        command = " ".join(p.argv) if p.argv else p.program
        self.emit(f"peakline {self.g.dot} {_printable(command)}", _BOLD)
        exit_text = "exit code n/a" if p.exit_code is None else f"exit code {p.exit_code}"
        self.emit_parts([f"elapsed {_duration(p.elapsed_s)}", exit_text,
                         f"started {p.started_at}"])
        t = p.totals
        cpu_s = t.cpu_s

        def split(seconds: float) -> str:
            return f"{100.0 * seconds / cpu_s:.0f}%" if cpu_s > 0 else "0%"

        self.emit_parts([f"CPU {_duration(cpu_s)}: Python {split(t.cpu_python_s)}",
                         f"native {split(t.cpu_native_s)}", f"system {split(t.cpu_system_s)}",
                         f"wait {_duration(t.wait_s)}"])
        s = p.sampling
        if self.sampled_s <= 0:
            self.emit_parts([f"no time was sampled ({s.samples} samples)",
                             "the run may have been shorter than one sampling interval"])
        else:
            self.emit_parts([f"{100.0 * p.attributed_fraction:.1f}% of sampled time "
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
        if problems:
            if not problems[0].startswith("warning"):
                problems[0] = "warning: " + problems[0]
            self.emit_parts(problems, _BOLD)
        self.threads_line()

    def threads_line(self) -> None:
        threads = sorted(self.profile.threads, key=lambda t: (-t.cpu_s - t.wait_s, t.tid))
        if not threads:
            return
        parts = []
        for thread in threads[:_MAX_THREADS_LISTED]:
            name = _printable(thread.name) if thread.name else f"tid {thread.tid}"
            kind = "" if thread.python else " native"
            parts.append(f"{name}{kind} {_duration(thread.cpu_s)} CPU")
        more = len(threads) - _MAX_THREADS_LISTED
        if more > 0:
            parts.append(f"+{more} more")
        count = f"{len(threads)} thread" + ("s" if len(threads) > 1 else "")
        parts[0] = f"{count}: {parts[0]}"
        self.emit_parts(parts)

    # -- files ------------------------------------------------------------------------------

    def files(self) -> None:
        ranked = sorted(self.profile.files.items(),
                        key=lambda item: (-item[1].totals().total_s, item[0]))
        hidden = 0
        for filename, record in ranked:
            if self.reduced and not self._file_visible(record):
                hidden += 1
                continue
            self.file(filename, record)
        if hidden:
            self.emit()
            self.emit(f"{hidden} file(s) below {self.threshold:g}% hidden", _DIM)

    def _file_visible(self, record: FileRecord) -> bool:
        return any(self.share(f.inclusive_s) >= self.threshold for f in record.functions) or \
            any(self.share(line.total_s) >= self.threshold for line in record.lines)

    def file(self, filename: str, record: FileRecord) -> None:
        g = self.g
        totals = record.totals()
        self.emit()
        self.emit_parts([_printable(filename),
                         f"{self.share(totals.total_s):.1f}% of sampled time",
                         f"CPU {self.share(totals.cpu_s):.1f}%, wait {_duration(totals.wait_s)}"],
                        _BOLD, indent="")
        source, reason = read_source(filename)
        if source is None:
            self.emit(f"  (source not available: {reason})", _DIM)
        lw = max(4, len(str(max((line.lineno for line in record.lines), default=0))),
                 len(str(len(source or ()))))
        self.emit(f"{'Line':>{lw}} {g.bar} Python {g.bar} native {g.bar} system {g.bar} "
                  f"  wait {g.bar} source")
        self.emit(f"{g.rule * (lw + 1)}{g.cross}" + f"{g.rule * 8}{g.cross}" * 4 + g.rule * 8)
        for lineno, line in self._rows(record, source):
            if line is None:
                self.emit(f"{'...':>{lw}} {g.bar}", _DIM)
                continue
            text = "(line unknown)" if lineno == 0 else \
                _printable(source[lineno - 1]) if source and lineno <= len(source) else ""
            cells = (_percent(self.share(line.cpu_python_s)),
                     _percent(self.share(line.cpu_native_s)),
                     _percent(self.share(line.cpu_system_s)), _short_s(line.wait_s))
            number = "?" if lineno == 0 else str(lineno)
            row = f"{number:>{lw}} {g.bar} " + "".join(f"{c:>6} {g.bar} " for c in cells) + text
            share = self.share(line.total_s)
            style = _BOLD_RED if share >= HOT_PERCENT else "" if share > 0 else _DIM
            self.emit(row, style)
        self.functions(record)

    def _rows(self, record: FileRecord, source: list[str] | None):
        """(lineno, LineRecord | None) rows to print; (0, None) marks a ``...`` gap."""
        by_line = {line.lineno: line for line in record.lines}
        if self.reduced:
            wanted = [n for n, line in by_line.items()
                      if self.share(line.total_s) >= self.threshold]
        elif source is not None:
            wanted = sorted(set(range(1, len(source) + 1)) | set(by_line))
        else:
            wanted = list(by_line)
        previous = None
        for lineno in sorted(wanted):
            if self.reduced and previous is not None and lineno > previous + 1:
                yield 0, None
            previous = lineno
            yield lineno, by_line.get(lineno) or LineRecord(lineno)

    def functions(self, record: FileRecord) -> None:
        ranked = sorted(record.functions, key=lambda f: (-f.inclusive_s, -f.self_s, f.lineno))
        shown = [f for f in ranked
                 if not self.reduced or self.share(f.inclusive_s) >= self.threshold]
        if not shown:
            return
        g = self.g
        self.emit()
        self.emit(f"    self {g.bar} inclusive {g.bar} function (% of sampled time)")
        for function in shown:
            row = (f"{_percent(self.share(function.self_s)) or '-':>8} {g.bar} "
                   f"{_percent(self.share(function.inclusive_s)) or '-':>9} {g.bar} "
                   f"{_printable(function.name)} (line {function.lineno})")
            style = _BOLD_RED if self.share(function.self_s) >= HOT_PERCENT else ""
            self.emit(row, style)
        if len(shown) < len(ranked):
            self.emit(f"    {len(ranked) - len(shown)} function(s) below "
                      f"{self.threshold:g}% hidden", _DIM)
