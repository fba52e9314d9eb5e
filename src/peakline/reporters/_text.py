"""Terminal text helpers: display-cell widths, cutting to a width, safe printing, glyph sets.

Width is measured in display cells (wide CJK characters count twice, combining marks zero), so
a cut row never overflows the terminal. Control characters in user text (source lines, file
and thread names) are replaced so one record is always one output row and cannot emit escape
sequences of its own.
"""

from __future__ import annotations

import unicodedata
from typing import NamedTuple, TextIO

from peakline.reporters._format import SPARK_ASCII, SPARK_BLOCKS


class Glyphs(NamedTuple):
    bar: str
    rule: str
    cross: str
    ellipsis: str
    dot: str
    peak: str  # marks a line that holds memory at the peak
    spark: str  # eight levels, low to high


UNICODE = Glyphs("│", "─", "┼", "…", "·", "▲", SPARK_BLOCKS)
ASCII = Glyphs("|", "-", "+", "...", "-", "^", SPARK_ASCII)


def glyphs_for(stream: TextIO) -> Glyphs:
    """Box-drawing glyphs and sparkline blocks only when the stream's encoding carries them."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        ("│─┼…·▲" + SPARK_BLOCKS).encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return ASCII
    return UNICODE


def isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def cell_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_width(text: str) -> int:
    return sum(cell_width(c) for c in text)


def fit(text: str, width: int, ellipsis: str) -> str:
    """``text`` cut to ``width`` display cells, ending in ``ellipsis`` when cut."""
    if text_width(text) <= width:
        return text
    room = width - len(ellipsis)
    out, used = [], 0
    for char in text:
        cells = cell_width(char)
        if used + cells > room:
            break
        out.append(char)
        used += cells
    return "".join(out) + ellipsis if room >= 0 else ellipsis[:width]


def printable(text: str) -> str:
    text = text.rstrip("\r\n").expandtabs(8)
    return "".join("?" if unicodedata.category(c) in ("Cc", "Cs") else c for c in text)


def percent(share: float) -> str:
    if share <= 0:
        return ""
    if share < 0.05:
        return "<0.1%"
    return f"{share:.1f}%"


def short_s(seconds: float) -> str:
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


def duration(seconds: float) -> str:
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.2f} s"
    return f"{seconds * 1000:.1f} ms"
