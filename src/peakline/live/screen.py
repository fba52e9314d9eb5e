"""One Profile -> one screen of the live view (Rich renderables).

Views (key in brackets): overview [o] (all of the below, shortened), CPU [c] (hottest lines by
CPU time), memory [m] (lines holding the most memory now: their net bytes, allocated and not
freed), threads [t] (CPU and wait per thread), GPU [g] (lines by GPU utilisation time; "no GPU
measured" otherwise). The memory timeline so far is a sparkline at the top of every view.
"""

from __future__ import annotations

import os
from enum import Enum

from rich.console import Group
from rich.table import Table
from rich.text import Text

from peakline.model.profile import Profile
from peakline.reporters._format import human_bytes, resample_max, sparkline
from peakline.reporters._text import duration, short_s


class View(Enum):
    OVERVIEW = "o"
    CPU = "c"
    MEMORY = "m"
    THREADS = "t"
    GPU = "g"


KEYS_HELP = "[o]verview [c]pu [m]emory [t]hreads [g]pu · tab: next · q: quit (the program runs on)"


def _where(filename: str, lineno: int, width: int) -> str:
    text = f"{os.path.basename(filename)}:{lineno}"
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _source_line(filename: str, lineno: int) -> str:
    try:
        import linecache

        return linecache.getline(filename, lineno).strip()
    except Exception:  # noqa: BLE001 - a line we cannot read is shown empty
        return ""


def _line_table(profile: Profile, rows: int, title: str, columns: tuple[str, ...], key,
                cells, shown=None) -> Table:
    """The ``rows`` lines with the largest ``key(line)``, while ``shown(line)`` (default: that
    key is above zero): where each is, ``cells(line)`` under ``columns``, and its code."""
    table = Table(title=title, title_justify="left", expand=True, show_edge=False,
                  pad_edge=False)
    table.add_column("line", no_wrap=True, ratio=2)
    for name in columns:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("code", no_wrap=True, ratio=5, overflow="ellipsis")
    shown = shown or (lambda line: key(line) > 0)
    ranked = sorted(profile.lines(), key=lambda fl: (-key(fl[1]), fl[0], fl[1].lineno))
    for filename, line in ranked[:rows]:
        if not shown(line):
            break
        table.add_row(_where(filename, line.lineno, 28), *cells(line),
                      _source_line(filename, line.lineno))
    return table


def cpu_table(profile: Profile, rows: int) -> Table:
    total = profile.totals.cpu_s

    def cells(line) -> tuple[str, ...]:
        share = f"{100 * line.cpu_s / total:.0f}%" if total > 0 else ""
        return short_s(line.cpu_s), share, short_s(line.wait_s)

    return _line_table(profile, rows, "Hottest lines by CPU", ("CPU", "%", "wait"),
                       lambda line: line.cpu_s, cells)


def memory_table(profile: Profile, rows: int) -> Table | Text:
    if not profile.has_memory:
        return Text("Memory: not measured (--cpu-only)")

    def cells(line) -> tuple[str, ...]:
        allocated = (line.alloc_python_bytes or 0) + (line.alloc_native_bytes or 0)
        return human_bytes(line.net_bytes or 0), human_bytes(allocated)

    return _line_table(profile, rows, "Lines holding the most memory now",
                       ("holds", "allocated"), lambda line: line.net_bytes or 0, cells)


def threads_table(profile: Profile, rows: int) -> Table:
    table = Table(title="CPU by thread", title_justify="left", expand=False, show_edge=False,
                  pad_edge=False)
    table.add_column("thread", no_wrap=True, min_width=24, max_width=40)
    table.add_column("tid", justify="right", no_wrap=True)
    table.add_column("CPU", justify="right", no_wrap=True)
    table.add_column("wait", justify="right", no_wrap=True)
    busy = [t for t in profile.threads if t.cpu_s > 0 or t.wait_s > 0]
    for thread in sorted(busy, key=lambda t: (-t.cpu_s, t.tid))[:rows]:
        name = thread.name or ("(native)" if not thread.python else "")
        table.add_row(name, str(thread.tid), short_s(thread.cpu_s) or "0", short_s(thread.wait_s))
    return table


def gpu_table(profile: Profile, rows: int) -> Table | Text:
    gpu = profile.gpu
    if gpu is None:
        return Text("GPU: none measured")
    return _line_table(
        profile, rows, f"GPU {gpu.device_name or ''}: lines by GPU time",
        ("GPU busy", "GPU memory"), lambda line: line.gpu_util_s or 0,
        lambda line: (short_s(line.gpu_util_s or 0), human_bytes(line.gpu_peak_bytes or 0)),
        shown=lambda line: (line.gpu_util_s or 0) > 0 or (line.gpu_peak_bytes or 0) > 0)


def timeline(profile: Profile, width: int) -> Text:
    if not profile.has_memory or not profile.timeline:
        return Text("memory timeline: not measured")
    cells = max(10, width - 40)
    values = resample_max(profile.timeline, 0.0, profile.elapsed_s, cells)
    now = profile.timeline[-1][1] if profile.timeline else 0
    text = Text("memory ")
    text.append(sparkline(values) or " " * cells, style="cyan")
    text.append(f" now {human_bytes(now)} · peak {human_bytes(profile.peak_bytes or 0)}")
    return text


def header(profile: Profile | None, label: str, status: str) -> Text:
    text = Text(f"peakline live · {label}", style="bold")
    if profile is not None:
        t = profile.totals
        text.append(f"\nelapsed {duration(profile.elapsed_s)} · CPU {duration(t.cpu_s)} "
                    f"(Python {duration(t.cpu_python_s)}, native {duration(t.cpu_native_s)}) "
                    f"· wait {duration(t.wait_s)}")
    text.append(f"\n{status}", style="dim")
    return text


def render(profile: Profile | None, view: View, *, label: str, status: str, width: int,
           height: int) -> Group:
    """The screen for ``profile`` (None: nothing yet) in ``view``, sized to width x height."""
    parts: list = [header(profile, label, status)]
    if profile is None:
        parts.append(Text("waiting for the first profile…"))
    else:
        parts.append(timeline(profile, width))
        rows = max(3, height - 10)
        if view is View.OVERVIEW:
            each = max(3, (height - 14) // 3)
            parts += [cpu_table(profile, each), memory_table(profile, each),
                      threads_table(profile, max(2, each // 2))]
        elif view is View.CPU:
            parts.append(cpu_table(profile, rows))
        elif view is View.MEMORY:
            parts.append(memory_table(profile, rows))
        elif view is View.THREADS:
            parts.append(threads_table(profile, rows))
        else:
            parts.append(gpu_table(profile, rows))
    parts.append(Text(KEYS_HELP, style="reverse"))
    return Group(*parts)
