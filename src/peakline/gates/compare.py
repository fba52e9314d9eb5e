"""Profiles side by side (`peakline compare`): totals, then the rows that changed most.

The first profile is the reference; every other one is compared with it. Rows are lines,
functions, files or phases (``by``):

* lines, functions and files of the same code are matched across runs by
  peakline.gates.matching (path, then source text or function offset), so a before/after
  pair lines up even when an edit moved code;
* phases (``peakline.phase("fit")``) are matched by name, which makes two implementations of
  one algorithm comparable (scikit-learn vs PyTorch) where no line matches. A phase name used
  more than once is summed (wall, CPU, net) and its peak is the largest.

Each row carries, per run, its time (sampled CPU + wait for code rows, wall for phases), CPU
time, memory held at the peak (phases: the phase's heap peak) and bytes allocated. Rows are
ranked by their largest change against the first run, measured as a share of that run's total
(time share of the sampled time, memory share of the heap peak), so a 2 s change in a 3 s run
outranks a 2 s change in a 300 s run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from peakline.errors import UsageError
from peakline.gates.matching import line_source, match_files, match_lines, short_path
from peakline.model.profile import Profile
from peakline.reporters._format import human_bytes

BY_CHOICES = ("line", "function", "phase", "file")
DEFAULT_TOP = 15
METRICS = ("time_s", "cpu_s", "memory_bytes", "alloc_bytes")


@dataclass
class Row:
    key: tuple
    label: str
    source: str = ""
    values: list[dict[str, float] | None] = field(default_factory=list)
    score: float = 0.0

    def change(self, run: int, metric: str) -> tuple[float | None, float | None]:
        """(absolute, relative) change of ``metric`` from the first run to ``run``;
        relative is None when the first run had 0 (or the row is missing in one of them)."""
        a, b = self.values[0], self.values[run]
        va = (a or {}).get(metric)
        vb = (b or {}).get(metric)
        if va is None and vb is None:
            return None, None
        va, vb = va or 0.0, vb or 0.0
        return vb - va, ((vb - va) / va if va else None)


@dataclass
class Comparison:
    paths: list[str]
    profiles: list[Profile]
    by: str
    totals: list[dict[str, float | None]]
    rows: list[Row]

    def to_dict(self) -> dict[str, Any]:
        runs = [{"path": path, "program": p.program, "started_at": p.started_at, **totals}
                for path, p, totals in zip(self.paths, self.profiles, self.totals)]
        rows = []
        for row in self.rows:
            changes = []
            for i in range(1, len(self.profiles)):
                changes.append({m: dict(zip(("absolute", "relative"), row.change(i, m)))
                                for m in METRICS})
            rows.append({"key": list(row.key), "label": row.label, "source": row.source,
                         "values": row.values, "change": changes, "score": row.score})
        return {"by": self.by, "runs": runs, "rows": rows}


TOTALS = (("peak_bytes", "heap peak"), ("peak_rss_bytes", "peak RSS"), ("cpu_s", "CPU time"),
          ("wait_s", "wait"), ("run_delay_s", "run delay (CPU contention)"),
          ("wall_s", "wall time"), ("copy_bytes", "copies"), ("gpu_peak_bytes", "GPU peak"))


def _shown(metric: str, values: list) -> bool:
    """Run delay (CPU contention) only when some run had any: most runs have none."""
    return metric != "run_delay_s" or any(values)


def totals(profile: Profile) -> dict[str, float | None]:
    copies = [ln.copy_bytes for _, ln in profile.lines() if ln.copy_bytes is not None]
    return {"peak_bytes": profile.peak_bytes, "peak_rss_bytes": profile.peak_rss_bytes,
            "cpu_s": profile.totals.cpu_s, "wall_s": profile.elapsed_s,
            "wait_s": profile.totals.wait_s,
            "run_delay_s": profile.totals.run_delay_s,
            "copy_bytes": sum(copies) if copies or profile.has_memory else None,
            "gpu_peak_bytes": profile.gpu.peak_bytes if profile.gpu else None}


def _figures(record) -> dict[str, float]:
    out = {"time_s": record.total_s, "cpu_s": record.cpu_s}
    if record.live_at_peak_bytes is not None:
        out["memory_bytes"] = record.live_at_peak_bytes
    if record.alloc_python_bytes is not None or record.alloc_native_bytes is not None:
        out["alloc_bytes"] = record.alloc_bytes
    return out


def _add(into: dict[str, float], figures: dict[str, float]) -> None:
    for k, v in figures.items():
        into[k] = into.get(k, 0) + v


def _rows_of(profile: Profile, by: str) -> dict[tuple, dict[str, float]]:
    out: dict[tuple, dict[str, float]] = {}
    if by == "line":
        for f, ln in profile.lines():
            out[(f, ln.lineno)] = _figures(ln)
    elif by == "function":
        for f, fn in profile.functions():
            _add(out.setdefault((f, fn.name), {}), _figures(fn))
    elif by == "file":
        for f, ln in profile.lines():
            _add(out.setdefault((f,), {}), _figures(ln))
    else:
        for ph in profile.phases or ():
            row = out.setdefault((ph.name,), {})
            _add(row, {"time_s": ph.wall_s, "cpu_s": ph.cpu_s})
            if ph.peak_bytes is not None:
                row["memory_bytes"] = max(row.get("memory_bytes", 0), ph.peak_bytes)
            if ph.net_bytes is not None:
                _add(row, {"net_bytes": ph.net_bytes})
    return out


def _key_map(ref: Profile, other: Profile, by: str) -> dict[tuple, tuple]:
    """other's row key -> the reference's row key, for rows that are the same code."""
    if by == "line":
        return match_lines(ref, other)
    if by in ("function", "file"):
        files = match_files(ref.files, other.files)
        if by == "file":
            return {(new,): (old,) for new, old in files.items()}
        return {(new, fn.name): (files[new], fn.name) for new, fn in other.functions()
                if new in files}
    return {key: key for key in _rows_of(other, by)}  # phases: by name


def compare(profiles: Sequence[Profile], paths: Sequence[str], *, by: str = "line",
            top: int = DEFAULT_TOP) -> Comparison:
    if by not in BY_CHOICES:
        raise UsageError(f"--by must be one of {', '.join(BY_CHOICES)}, got {by!r}")
    if len(profiles) < 2:
        raise UsageError("compare needs at least two profiles")
    if by == "phase":
        for path, p in zip(paths, profiles):
            if not p.phases:
                raise UsageError(f"{path}: no phases to compare by (name them with "
                                 "peakline.phase(\"...\") in the program)")
    ref = profiles[0]
    table: dict[tuple, Row] = {}
    order: list[tuple] = []
    for i, profile in enumerate(profiles):
        mapping = {} if i == 0 else _key_map(ref, profile, by)
        for key, figures in _rows_of(profile, by).items():
            ref_key = key if i == 0 else mapping.get(key, ("#", i, *key))
            row = table.get(ref_key)
            if row is None:
                row = table[ref_key] = Row(key=key, label=_label(by, key),
                                           source=line_source(*key) if by == "line" else "",
                                           values=[None] * len(profiles))
                order.append(ref_key)
            row.values[i] = figures
    totals_ = [totals(p) for p in profiles]
    time_ref = max(ref.sampled_s if by != "phase" else ref.elapsed_s, 1e-9)
    mem_ref = max(ref.peak_bytes or 0, 1)
    for row in table.values():
        scores = [0.0]
        for i in range(1, len(profiles)):
            dt, _ = row.change(i, "time_s")
            dm, _ = row.change(i, "memory_bytes")
            scores += [abs(dt or 0) / time_ref, abs(dm or 0) / mem_ref]
        row.score = max(scores)
    rows = sorted(table.values(), key=lambda r: (-r.score, r.label))
    return Comparison(list(paths), list(profiles), by, totals_,
                      [r for r in rows if r.score > 0][:max(0, top)])


def _label(by: str, key: tuple) -> str:
    if by == "line":
        return f"{short_path(key[0])}:{key[1]}"
    if by == "function":
        return f"{key[1]} ({short_path(key[0])})"
    if by == "file":
        return short_path(key[0])
    return str(key[0])


# ---- formatting -----------------------------------------------------------------------------

def fmt(metric: str, value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    if metric.endswith("bytes"):
        return human_bytes(value, signed=signed)
    return f"{value:+.3f} s" if signed else f"{value:.3f} s"


def fmt_change(metric: str, change: tuple[float | None, float | None]) -> str:
    absolute, relative = change
    if absolute is None:
        return "-"
    if absolute == 0:
        return "="
    rel = f" ({relative:+.0%})" if relative is not None else " (new)"
    return fmt(metric, absolute, signed=True) + rel


def run_names(paths: Sequence[str]) -> list[str]:
    """Short column names: A, B, C... (the paths are listed above the tables)."""
    return [chr(ord("A") + i) if i < 26 else f"#{i + 1}" for i in range(len(paths))]


def render_text(comp: Comparison) -> str:
    names = run_names(comp.paths)
    out = [f"{n}: {os.path.relpath(p) if not p.startswith('<') else p}  ({prof.program})"
           for n, p, prof in zip(names, comp.paths, comp.profiles)]
    out.append("")
    header = ["", *names, *(f"{n} vs A" for n in names[1:])]
    table = [header]
    for metric, title in TOTALS:
        values = [t[metric] for t in comp.totals]
        if all(v is None for v in values) or not _shown(metric, values):
            continue
        changes = []
        for v in values[1:]:
            if v is None or values[0] is None:
                changes.append("-")
            else:
                changes.append(fmt_change(metric, (v - values[0],
                                                   (v - values[0]) / values[0]
                                                   if values[0] else None)))
        table.append([title, *(fmt(metric, v) for v in values), *changes])
    out.extend(_columns(table))
    out.append("")
    what = {"line": "lines", "function": "functions", "file": "files", "phase": "phases"}
    out.append(f"{what[comp.by]} that changed most (time; memory at the peak):")
    table = [["", *names, *(f"{n} vs A" for n in names[1:])]]
    for row in comp.rows:
        for metric in ("time_s", "memory_bytes"):
            values = [(v or {}).get(metric) for v in row.values]
            if all(v is None for v in values):
                continue
            first = f"{row.label}" if metric == "time_s" else ""
            table.append([first or "", *(fmt(metric, v) for v in values),
                          *(fmt_change(metric, row.change(i, metric))
                            for i in range(1, len(row.values)))])
    if len(table) == 1:
        out.append("  (no differences)")
    else:
        out.extend(_columns(table))
    return "\n".join(out) + "\n"


def _columns(table: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
    return ["  " + "  ".join(cell.ljust(widths[0]) if c == 0 else cell.rjust(widths[c])
                             for c, cell in enumerate(r)).rstrip() for r in table]


# ---- HTML -----------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d1d1f;background:#fff}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{padding:.25em .7em;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
td.src{text-align:left;font-family:ui-monospace,monospace;color:#555;white-space:pre}
tr.metric-memory td:first-child{padding-left:1.6em;color:#777}
td.up{color:#b3261e;font-weight:600}td.down{color:#1e7b34;font-weight:600}
ul.runs{font-family:ui-monospace,monospace}
.wrap{overflow-x:auto}
"""


def render_html(comp: Comparison, stream) -> None:
    """One self-contained page: no scripts, no network, works from file://."""
    import html as _html

    esc = _html.escape
    names = run_names(comp.paths)
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "style-src 'unsafe-inline'\">",
             f"<title>peakline compare: {esc(' vs '.join(p.program for p in comp.profiles))}"
             "</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>peakline compare</h1><ul class=\"runs\" id=\"runs\">"]
    for n, path, prof in zip(names, comp.paths, comp.profiles):
        parts.append(f"<li><b>{esc(n)}</b>: {esc(path)} &mdash; {esc(prof.program)} "
                     f"({esc(prof.started_at)})</li>")
    parts.append("</ul><h2>Totals</h2><div class=\"wrap\"><table id=\"totals\"><thead>"
                 "<tr><th></th>")
    parts += [f"<th>{esc(n)}</th>" for n in names]
    parts += [f"<th>{esc(n)} vs A</th>" for n in names[1:]]
    parts.append("</tr></thead><tbody>")
    for metric, title in TOTALS:
        values = [t[metric] for t in comp.totals]
        if all(v is None for v in values) or not _shown(metric, values):
            continue
        parts.append(f"<tr data-metric=\"{metric}\"><td>{esc(title)}</td>")
        parts += [f"<td>{esc(fmt(metric, v))}</td>" for v in values]
        for v in values[1:]:
            if v is None or values[0] is None:
                parts.append("<td>-</td>")
                continue
            change = (v - values[0], (v - values[0]) / values[0] if values[0] else None)
            parts.append(_change_cell(metric, change))
        parts.append("</tr>")
    what = {"line": "Lines", "function": "Functions", "file": "Files", "phase": "Phases"}
    parts.append(f"</tbody></table></div><h2>{what[comp.by]} that changed most</h2>")
    parts.append("<div class=\"wrap\"><table id=\"rows\"><thead><tr><th></th><th></th>")
    parts += [f"<th>{esc(n)}</th>" for n in names]
    parts += [f"<th>{esc(n)} vs A</th>" for n in names[1:]]
    parts.append("<th>source</th></tr></thead><tbody>")
    for row in comp.rows:
        for metric, title in (("time_s", "time"), ("memory_bytes", "memory at peak")):
            values = [(v or {}).get(metric) for v in row.values]
            if all(v is None for v in values):
                continue
            kind = "time" if metric == "time_s" else "memory"
            parts.append(f"<tr class=\"metric-{kind}\" data-row=\"{esc(row.label)}\">"
                         f"<td>{esc(row.label) if kind == 'time' else ''}</td>"
                         f"<td>{esc(title)}</td>")
            parts += [f"<td>{esc(fmt(metric, v))}</td>" for v in values]
            parts += [_change_cell(metric, row.change(i, metric))
                      for i in range(1, len(row.values))]
            parts.append(f"<td class=\"src\">{esc(row.source) if kind == 'time' else ''}"
                         "</td></tr>")
    parts.append("</tbody></table></div></body></html>\n")
    stream.write("".join(parts))


def _change_cell(metric: str, change: tuple[float | None, float | None]) -> str:
    import html as _html

    absolute = change[0]
    cls = "" if not absolute else (" class=\"up\"" if absolute > 0 else " class=\"down\"")
    return f"<td{cls}>{_html.escape(fmt_change(metric, change))}</td>"
