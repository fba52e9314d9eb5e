"""HTML report: one self-contained page, no network access, works from ``file://``.

The page is ``templates/report.html`` (its head shared with the sweep report: _page.py) with
its stylesheet (``report.css``) and scripts (``charts.js``: memory timeline, sparklines,
flame graph; ``report.js``: header, tables, sorting) pasted in, plus the data: the profile file's own JSON, the source of each reported
file, and the lines the report should single out (the same picks as the terminal report:
reporters/_highlights.py, _filters.py). The data travels in a
``<script type="application/json">`` element and the scripts build the page from it with DOM
calls (``textContent``, never ``innerHTML`` with data), so nothing from the profile or the
source can inject markup.

Escaping: JSON is written ASCII-only with every ``<``, ``>`` and ``&`` as ``\\u003c``-style
escapes. That keeps ``</script>`` and ``<!--`` out of the element's text (the only sequences an
HTML parser looks for there) and is still the same JSON to ``JSON.parse``.
"""

from __future__ import annotations

import html
import json
from typing import Any, TextIO

from peakline import __version__
from peakline.model.leaks import LEAK_REPORT_THRESHOLD
from peakline.model.profile import Profile
from peakline.reporters._filters import (DEFAULT_CPU_PERCENT_THRESHOLD,
                                         DEFAULT_MALLOC_THRESHOLD_BYTES, ReportFilter)
from peakline.reporters import _page
from peakline.reporters._highlights import (HOT_PERCENT, TRUNCATED_STACKS_NOTE,
                                            blas_buffer_note, peak_basis, peak_holders,
                                            peak_vs_rss_note, possible_leaks)
from peakline.reporters._processes import describe, label, rank_highlights
from peakline.reporters._source import read_source

_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def embed_json(data: Any) -> str:
    """JSON safe to place inside ``<script type="application/json">``."""
    text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.translate(_JSON_ESCAPES)


def _displayable(text: str) -> str:
    """text as the UTF-8 page can carry it: a file name that is not valid UTF-8 (its bytes
    kept by Python as lone surrogates) shows U+FFFD where a byte did not decode. In the JSON
    data the exact text travels escaped (``\\udce9``)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace") \
        if isinstance(text, str) else str(text)


def page_data(profile: Profile, rules: ReportFilter) -> dict[str, Any]:
    """Everything the page's scripts read: the profile, sources and the report's picks."""
    sources, source_errors = {}, {}
    for filename in profile.files:
        lines, reason = read_source(filename)
        if lines is None:
            source_errors[filename] = reason
        else:
            sources[filename] = lines
    record = profile.files
    active = {f: [line.lineno for line in r.lines if rules.line_active(line)]
              for f, r in record.items()}
    return {
        "profile": profile.to_dict(),
        "sources": sources,
        "sourceErrors": source_errors,
        "activeLines": active,
        "peakHolders": [[h.filename, h.line.lineno, h.share, h.held_bytes]
                        for h in peak_holders(profile)],
        "peakBasis": _basis(profile),
        "blasNote": " \u00b7 ".join(blas_buffer_note(profile) or []),
        # one-line explanations of figures that need them (reporters/_highlights.py)
        "rssNote": "; ".join(peak_vs_rss_note(profile) or []),
        "truncatedNote": ", ".join(TRUNCATED_STACKS_NOTE[1:]),
        "leaks": [[f, line.lineno] for f, line in possible_leaks(profile)],
        "backgroundWait": {str(tid): s for tid, s in profile.background_wait_by_thread().items()},
        "rankHighlights": [[what, label(r), figure] for what, r, figure in rank_highlights(profile)],
        # the program column of the processes table (a Ray worker: its actor and tasks)
        "processNames": [describe(r) for r in profile.processes or ()],
        "settings": {
            "version": __version__,
            "hotPercent": HOT_PERCENT,
            "leakThreshold": LEAK_REPORT_THRESHOLD,
            "reduced": rules.reduced,
            "cpuPercentThreshold": rules.cpu_percent_threshold,
            "mallocThresholdBytes": rules.malloc_threshold_bytes,
        },
    }


def _basis(profile: Profile) -> dict | None:
    basis = peak_basis(profile)
    if basis is None:
        return None
    return {"kind": basis.kind, "bytes": basis.peak_bytes, "time_s": basis.time_s,
            "title": basis.title, "field": basis.field}


def render(profile: Profile, stream: TextIO, *, reduced: bool = False,
           cpu_percent_threshold: float = DEFAULT_CPU_PERCENT_THRESHOLD,
           malloc_threshold_bytes: int = DEFAULT_MALLOC_THRESHOLD_BYTES) -> None:
    """Write the HTML report of ``profile`` to ``stream`` (a text stream; UTF-8 page)."""
    rules = ReportFilter(reduced, cpu_percent_threshold, malloc_threshold_bytes,
                         profile.user_sampled_s)
    stream.write(_page.page(
        "report.html", title=html.escape(f"peakline: {_displayable(profile.program)}"),
        css=_page.template("report.css"), scripts=True,
        slots={"charts_js": _page.template("charts.js"),
               "report_js": _page.template("report.js"),
               "data": embed_json(page_data(profile, rules))}))
