"""Renderers: each module turns a ``peakline.model.Profile`` into one output format.

Every reporter exposes ``render(profile, stream, **options) -> None`` and reads only the
Profile model (never ``peakline._core``), so it works the same on a live run and on a profile
file read back later.

    terminal.py     the line table for humans (Scalene-like), colour and width-aware
    html.py         one self-contained HTML page (templates/ holds its CSS and JS)
    speedscope.py   the sampled stacks in speedscope's file format
    static_html.py  a static HTML summary (no script) for Jupyter outputs where scripts do not run
    json_report.py  the profile file format itself
    sweep_terminal.py, sweep_html.py  a sweep file (peakline sweep; docs/sweep.md)

Shared by them: _format.py (byte sizes, sparklines), _filters.py (which lines are shown),
_highlights.py (peak holders, leaks), _source.py (reading source), _text.py (terminal text).

This module also holds the one function that ``peakline run`` and ``peakline view`` (and the
Jupyter magics) call to produce what the output options ask for (``render_outputs``); the
options themselves are declared in peakline/cli/options.py (``output_options``).
"""

from __future__ import annotations

import os
import sys

from peakline.errors import PeaklineError, UsageError

TYPE_CHECKING = False  # no typing import while the program runs (see peakline/api.py)
if TYPE_CHECKING:  # the model is imported when a report is made, not while the program runs
    from collections.abc import Callable
    from typing import TextIO

    from peakline.cli.options import Values
    from peakline.model.profile import Profile
    from peakline.reporters._filters import ReportFilter

# Defaults of the report filter (reporters/_filters.py), here because the command-line help
# shows them before any profile exists.
DEFAULT_CPU_PERCENT_THRESHOLD = 1.0
DEFAULT_MALLOC_THRESHOLD_BYTES = 1 << 20  # 2x the default sampling interval: not noise

def report_filter(opts: Values, profile: Profile) -> ReportFilter:
    """The filter the options ask for. A threshold given explicitly means "filter by it"."""
    from peakline.reporters._filters import ReportFilter

    cpu = getattr(opts, "cpu_percent_threshold", None)
    malloc = getattr(opts, "malloc_threshold", None)
    # Active lines by default (a table of docstrings is noise); --all-lines for every line.
    # --reduced-profile or a threshold given explicitly still wins over --all-lines.
    reduced = not getattr(opts, "all_lines", False) or \
        bool(getattr(opts, "reduced_profile", False)) or cpu is not None or malloc is not None
    return ReportFilter(reduced=reduced,
                        cpu_percent_threshold=DEFAULT_CPU_PERCENT_THRESHOLD if cpu is None else cpu,
                        malloc_threshold_bytes=(DEFAULT_MALLOC_THRESHOLD_BYTES if malloc is None
                                                else malloc),
                        sampled_s=profile.user_sampled_s)


def wants_files(opts: Values) -> bool:
    """True when the options ask for any output other than the terminal report."""
    return bool(getattr(opts, "html", None) or getattr(opts, "json", None)
                or getattr(opts, "speedscope", None))


def check_outputs(opts: Values) -> None:
    """Before a run: every output file asked for can be created (its folder exists and is not
    the file itself). UsageError otherwise, so a long run is not wasted on a typo."""
    for option in ("html", "json", "speedscope"):
        path = getattr(opts, option, None)
        if isinstance(path, str):
            check_output_path(f"--{option}", path)


def check_output_path(flag: str, path: str) -> None:
    """UsageError unless the output ``path`` of ``flag`` can be created: its folder exists and
    it is not a folder itself. '-' (standard output) always can."""
    if path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: " + ("is a directory" if os.path.isdir(path)
                                               else f"no such directory {folder}"))


def render_outputs(profile: Profile, opts: Values, *, text_stream: TextIO | None,
                   notes: TextIO | None = None, strict: bool = True) -> None:
    """Produce every output ``opts`` asks for: the terminal report on ``text_stream`` (None:
    no terminal report), then the HTML, JSON and speedscope outputs; one line per file written
    goes to ``notes`` (default stderr). An output file that cannot be written raises
    PeaklineError with a one-line message; with ``strict=False`` (``peakline run``, whose exit
    status is the program's) the message goes to ``notes`` and the other outputs are still
    made."""
    notes = sys.stderr if notes is None else notes
    rules = report_filter(opts, profile)
    if text_stream is not None:
        from peakline.reporters import terminal
        terminal.render(profile, text_stream, reduced=rules.reduced,
                        cpu_percent_threshold=rules.cpu_percent_threshold,
                        malloc_threshold_bytes=rules.malloc_threshold_bytes)
    jobs: list[tuple[str, str, Callable[[TextIO], None]]] = []
    if getattr(opts, "html", None):
        from peakline.reporters import html
        jobs.append((opts.html, "HTML report", lambda stream: html.render(
            profile, stream, reduced=rules.reduced,
            cpu_percent_threshold=rules.cpu_percent_threshold,
            malloc_threshold_bytes=rules.malloc_threshold_bytes)))
    if getattr(opts, "json", None):
        from peakline.reporters import json_report
        jobs.append(("-" if opts.json is True else opts.json, "profile JSON",
                     lambda stream: json_report.render(profile, stream)))
    if getattr(opts, "speedscope", None):
        from peakline.reporters import speedscope
        jobs.append((opts.speedscope, "speedscope profile",
                     lambda stream: speedscope.render(profile, stream)))
    for path, what, render in jobs:
        try:
            write_output(path, what, render, notes=notes)
        except PeaklineError as error:
            if strict:
                raise
            print(f"peakline: error: {error}", file=notes)


def write_output(path: str, what: str, render: Callable[[TextIO], None], *,
                 notes: TextIO | None) -> None:
    """``render`` into ``path`` ('-': standard output); a file written is noted on ``notes``
    (None: not noted). A file that cannot be written: PeaklineError with a one-line message."""
    if path == "-":
        render(sys.stdout)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            render(stream)
    except OSError as error:
        raise PeaklineError(f"cannot write {what} to {path}: "
                            f"{error.strerror or error}") from None
    if notes is not None:
        print(f"peakline: {what} written to {os.path.abspath(path)}", file=notes)
