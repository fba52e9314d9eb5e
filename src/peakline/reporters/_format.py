"""Numbers and shapes shared by the reporters: byte sizes, rates, sparklines.

Pure functions of plain numbers (no Profile), so the terminal and HTML reports say the same
thing in the same words. Sizes use binary units (1 MiB = 2**20 bytes) because that is what
``free``/``top`` and most memory tools show; copy rates are MB/s (10**6) as the profile field
``copy_mb_s`` is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_ASCII = "_.-=+*#@"

_UNITS = ("B", "K", "M", "G", "T", "P")


# The largest byte size a command line may give: what a signed 64-bit count holds.
MAX_BYTE_SIZE = (1 << 63) - 1
_BYTE_SCALES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_DIGITS = frozenset("0123456789")


def parse_byte_size(text: str, *, minimum: int = 0, maximum: int = MAX_BYTE_SIZE) -> int:
    """A byte count: digits with an optional fraction and an optional binary unit (``K``,
    ``M``, ``G``, ``T``, each also spelled ``KB``/``KiB``..., case-insensitive; all are powers
    of 1024): ``4096``, ``512K``, ``1.5G``, ``2MiB`` -> bytes, rounded down. No exponents,
    no signs. ValueError with a one-line message when it is not such a size or is outside
    [minimum, maximum]."""
    t = text.strip().upper()
    for tail in ("IB", "B"):
        if t.endswith(tail) and len(t) > len(tail):
            t = t[: -len(tail)]
            break
    unit = t[-1] if t and t[-1] in "KMGT" else ""
    number = t[: len(t) - len(unit)].rstrip()
    whole, dot, fraction = number.partition(".")
    if (not (whole or fraction) or not set(whole) <= _DIGITS or not set(fraction) <= _DIGITS
            or (dot and not fraction and not whole) or len(number) > 30):
        raise ValueError(f"not a byte size: {text!r} (examples: 4096, 512K, 10M, 1.5G)")
    denominator = 10 ** len(fraction)
    value = (int(whole or "0") * denominator + int(fraction or "0")) * _BYTE_SCALES[unit] \
        // denominator
    if value > maximum:
        raise ValueError(f"too large: {text!r} (at most {_size_words(maximum)})")
    if value < minimum:
        raise ValueError(f"must be at least {_size_words(minimum)}, got {text!r}")
    return value


def _size_words(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _BYTE_SCALES[unit] and n % _BYTE_SCALES[unit] == 0:
            return f"{n // _BYTE_SCALES[unit]}{unit}"
    return str(n)


def compact_bytes(n: float, *, signed: bool = False) -> str:
    """At most 6 characters for a table cell: ``512K``, ``+200M``, ``-1.5G``; "" for 0."""
    if n == 0:
        return ""
    sign = ("+" if n > 0 else "-") if signed else ("-" if n < 0 else "")
    value = abs(float(n))
    unit = 0
    while value >= 1000 and unit < len(_UNITS) - 1:  # 1000, not 1024: keeps cells narrow
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{sign}{value:.0f}{_UNITS[0]}"
    digits = f"{value:.1f}" if value < 9.95 else f"{value:.0f}"
    return f"{sign}{digits}{_UNITS[unit]}"


def human_bytes(n: float, *, signed: bool = False) -> str:
    """Sentence form: ``590.5 MiB``, ``+12.0 KiB``, ``0 B``."""
    sign = ("+" if n > 0 else "-" if n < 0 else "") if signed else ("-" if n < 0 else "")
    value = abs(float(n))
    if value < 1024:
        return f"{sign}{value:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{sign}{value:.1f} {unit}"
    raise AssertionError("unreachable")


def human_rate(bytes_per_s: float) -> str:
    return f"{human_bytes(bytes_per_s, signed=True)}/s"


def mb_per_s(value: float | None) -> str:
    """Copy rate cell: ``120``, ``3.4``, ``<0.1``; "" when zero or unknown."""
    if not value:
        return ""
    if value < 0.1:
        return "<0.1"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def python_share(python_bytes: int | None, native_bytes: int | None) -> float | None:
    """Percent of allocated bytes that were Python objects; None when nothing was allocated."""
    total = (python_bytes or 0) + (native_bytes or 0)
    return None if total <= 0 else 100.0 * (python_bytes or 0) / total


def resample_max(points: Sequence[Sequence[float]], start_s: float, end_s: float,
                 buckets: int) -> list[float]:
    """A step series ``[[t, value], ...]`` (value holds until the next point) as ``buckets``
    equal time slices, each the **maximum** in its slice, so a short spike is never lost.
    Before the first point the value is 0."""
    if buckets <= 0:
        return []
    if end_s <= start_s:
        end_s = start_s + 1e-9
    width = (end_s - start_s) / buckets
    out = [0.0] * buckets
    current = 0.0  # the value at the start of the slice being filled
    i, n = 0, len(points)
    for b in range(buckets):
        lo, hi = start_s + b * width, start_s + (b + 1) * width
        best = current
        while i < n and (points[i][0] < hi or b == buckets - 1):
            current = float(points[i][1])
            # A point before the first slice only sets the carried value.
            best = max(best, current) if points[i][0] >= lo else current
            i += 1
        out[b] = best
    return out


def sparkline(values: Sequence[float], *, blocks: str = SPARK_BLOCKS,
              top: float | None = None, zero: str = " ") -> str:
    """One glyph per value, scaled to ``top`` (default: the largest value); ``zero`` for
    values <= 0 (a blank: "held nothing"). All zero: ""."""
    peak = max(values, default=0.0) if top is None else top
    if peak <= 0:
        return ""
    last = len(blocks) - 1
    levels = len(blocks)
    return "".join(zero if v <= 0 else blocks[min(last, max(0, math.ceil(v / peak * levels) - 1))]
                   for v in values)
