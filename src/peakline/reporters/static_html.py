"""Static HTML summary: the report where scripts do not run.

An HTML fragment (no ``<script>``, no stylesheet, no ids: inline styles only) that reads on its
own: the terminal report's header as preformatted text, then one table of the active lines
(reporters/_filters.py) with the terminal table's time and memory columns. Jupyter outputs
carry it beside the interactive page (peakline/jupyter.py), so an untrusted notebook, GitHub's
notebook preview or an nbconvert export without scripts still shows the report. Every piece of
text from the profile or the source is escaped with ``html.escape``.
"""

from __future__ import annotations

import html
import io
from typing import TextIO

from peakline.model.profile import Profile
from peakline.reporters import terminal
from peakline.reporters._filters import (DEFAULT_CPU_PERCENT_THRESHOLD,
                                         DEFAULT_MALLOC_THRESHOLD_BYTES, ReportFilter)
from peakline.reporters._format import compact_bytes
from peakline.reporters._source import read_source
from peakline.reporters._text import percent, printable

MAX_ROWS = 60  # more rows than this: the busiest are kept, and the table says so

_CELL = "padding:1px 8px;text-align:right;white-space:nowrap"
_SOURCE = "padding:1px 8px;text-align:left;white-space:pre;font-family:monospace"


def header_text(profile: Profile, width: int = 100) -> str:
    """The terminal report's header (title, time, threads, memory), without colour."""
    buffer = io.StringIO()
    terminal.render_header(profile, buffer, width=width)
    return buffer.getvalue().rstrip("\n")


def render(profile: Profile, stream: TextIO, *, reduced: bool = True,
           cpu_percent_threshold: float = DEFAULT_CPU_PERCENT_THRESHOLD,
           malloc_threshold_bytes: int = DEFAULT_MALLOC_THRESHOLD_BYTES) -> None:
    """Write the static summary of ``profile`` to ``stream`` (an HTML fragment)."""
    rules = ReportFilter(reduced, cpu_percent_threshold, malloc_threshold_bytes,
                         profile.user_sampled_s)
    rows = [(f, line) for f, line in profile.lines()
            if not reduced or rules.line_active(line)]
    if len(rows) > MAX_ROWS:
        busiest = sorted(rows, key=lambda r: -terminal.line_total_s(r[1]))[:MAX_ROWS]
        kept = {id(r[1]) for r in busiest}
        hidden = len(rows) - MAX_ROWS
        rows = [r for r in rows if id(r[1]) in kept]
    else:
        hidden = 0
    memory = profile.has_memory
    labels = ["line", "Python", "native", "wait", "total"] + \
        (["alloc", "at peak", "net"] if memory else []) + ["source"]
    out = ['<div class="peakline-static" style="font-size:12px">',
           '<pre style="margin:0 0 6px 0">', html.escape(header_text(profile)), "</pre>",
           '<table style="border-collapse:collapse">', "<thead><tr>",
           *(f'<th style="{_SOURCE if label == "source" else _CELL}">{label}</th>'
             for label in labels), "</tr></thead><tbody>"]
    names = {f: _name(profile, f) for f in profile.files}
    sources: dict[str, list[str] | None] = {}
    for filename, line in rows:
        if filename not in sources:
            sources[filename] = read_source(filename)[0]
        source = sources[filename]
        text = source[line.lineno - 1] if source and 0 < line.lineno <= len(source) else ""
        cells = [f"{names[filename]}:{line.lineno or '?'}", percent(rules.share(line.cpu_python_s)),
                 percent(rules.share(line.cpu_native_s)), percent(rules.share(line.wait_s)),
                 percent(rules.share(terminal.line_total_s(line)))]
        if memory:
            cells += [compact_bytes(line.alloc_bytes) if line.alloc_bytes else "",
                      compact_bytes(line.live_at_peak_bytes) if line.live_at_peak_bytes else "",
                      compact_bytes(line.net_bytes, signed=True) if line.net_bytes else ""]
        out.append("<tr>" + "".join(f'<td style="{_CELL}">{html.escape(c)}</td>' for c in cells)
                   + f'<td style="{_SOURCE}">{html.escape(printable(text))}</td></tr>')
    out.append("</tbody></table>")
    note = (f"{hidden} more active line(s) not shown; " if hidden else "") + \
        ("active lines only: " + rules.describe() if reduced else "every line")
    out.append(f'<p style="margin:4px 0;color:#666">{html.escape(note)}; time columns are '
               f"shares of the user's sampled time.</p></div>")
    stream.write("".join(out))


def _name(profile: Profile, filename: str) -> str:
    import os
    base = os.path.basename(filename) or filename
    same = sum(1 for f in profile.files if os.path.basename(f) == base)
    return printable(base if same <= 1 else filename)
