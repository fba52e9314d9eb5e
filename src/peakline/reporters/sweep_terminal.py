"""Terminal report of a sweep: the runs, how the whole program grows with each varied name
(model, quality, measured range, prediction at the target), what dominates at the target,
the lines' fits, and the seed experiment as a compact table: each line's share of memory
(held at the peak, allocated) and of time, one column per size."""

from __future__ import annotations

from typing import Any, TextIO

from peakline.reporters._sweep import (MEASURES, PROGRAM_LABELS, line_label, model_text,
                                       prediction_text, quality_text, size_text,
                                       target_sentences, value_text)
from peakline.sweep.analysis import shares, slice_runs
from peakline.sweep.params import label

MAX_LINES = 12
CELL = 26


def render(sweep: dict[str, Any], stream: TextIO) -> None:
    w = stream.write
    runs = sweep["runs"]
    ok = [r for r in runs if r["status"] == "ok"]
    vary = sweep["vary"]
    names = ", ".join(f"{v['name']} = {', '.join(size_text(x) for x in v['values'])}"
                      for v in vary)
    w(f"peakline sweep · {sweep['program']} · {names} (--as {sweep.get('as', 'env')})\n")
    state = "" if sweep.get("complete", True) else " · stopped early"
    w(f"  {len(runs)} runs, {len(ok)} ok{state} · {sweep.get('elapsed_s', 0):.1f} s\n")
    for r in runs:
        if r["status"] != "ok":
            w(f"  ✗ run {r['index'] + 1} {label(r['params'])}: {r['status']} "
              f"({r.get('error') or ''}) log: {r.get('log')}\n")
    fits = sweep.get("fits") or {}
    for sentence in target_sentences(sweep):
        w(f"\n  ▶ {sentence}\n")
    for v in vary:
        name = v["name"]
        program = (fits.get("program_by_name") or {}).get(name) or \
            (fits.get("program") if vary and vary[0]["name"] == name else {}) or {}
        slice_ = sorted(slice_runs(vary, runs, name), key=lambda r: r["params"][name])
        target = (sweep.get("target") or {}).get(name)
        w(f"\nHow the program grows with {name}"
          + (f" (others at {label({k: x for k, x in slice_[0]['params'].items() if k != name})})"
             if len(vary) > 1 and slice_ else "") + "\n")
        head = f"  {'quantity':<11} {'model':<12} {'quality':>7}  {'measured':<27}"
        if target is not None:
            head += f"  at {name}={size_text(target)}"
        w(head + "\n")
        for quantity, fit in program.items():
            vals = [r["summary"].get(quantity) for r in slice_ if r.get("summary")]
            vals = [x for x in vals if x is not None]
            measured = (f"{value_text(quantity, vals[0])} → {value_text(quantity, vals[-1])}"
                        if vals else "")
            row = (f"  {PROGRAM_LABELS.get(quantity, quantity):<11} {model_text(fit):<12} "
                   f"{quality_text(fit):>7}  {measured:<27}")
            if target is not None:
                row += f"  {prediction_text(quantity, fit)}"
            if fit.get("note"):
                row += f"  ({fit['note']})"
            w(row.rstrip() + "\n")
        _lines_table(w, fits, name, target)
        for measure, title in MEASURES:
            _shares_table(w, shares(vary, runs, name, measure), title)


def _lines_table(w, fits: dict, name: str, target) -> None:
    rows: dict[tuple, dict[str, dict]] = {}
    labels: dict[tuple, dict] = {}
    for fit in fits.get("lines") or ():
        if fit["name"] != name:
            continue
        key = (fit["file"], fit["lineno"])
        rows.setdefault(key, {})[fit["quantity"]] = fit
        labels[key] = fit
    if not rows:
        return
    quantities = ("live_at_peak_bytes", "alloc_bytes", "cpu_s")
    w(f"\n  Lines: growth with {name} (model, quality)"
      + (f"; predicted at {size_text(target)}" if target is not None else "") + "\n")
    w(f"  {'held at peak':<{CELL}} {'allocated':<{CELL}} {'CPU':<{CELL}} line\n")
    for key in list(rows)[:MAX_LINES]:
        cells = []
        for q in quantities:
            fit = rows[key].get(q)
            if fit is None:
                cells.append("")
                continue
            cell = f"{model_text(fit)} {quality_text(fit)}".strip()
            if target is not None and fit.get("prediction") and q != "alloc_bytes":
                cell += f" → {value_text(q, max(0.0, fit['prediction']['value']))}"
            cells.append(cell)
        w("  " + " ".join(f"{c[:CELL]:<{CELL}}" for c in cells)
          + f" {line_label(labels[key], 48)}\n")
    if len(rows) > MAX_LINES:
        w(f"  ... {len(rows) - MAX_LINES} more lines in the sweep file\n")


def _shares_table(w, data: dict, title: str) -> None:
    if not data["x"] or not data["series"]:
        return
    xs = data["x"]
    w(f"\n  Share of {title} by line, as {data['name']} grows\n")
    w(f"  {'':<44}" + "".join(f"{size_text(x):>8}" for x in xs) + "\n")
    for s in data["series"]:
        w(f"  {line_label(s, 44):<44}" + "".join(f"{_pct(v):>8}" for v in s["shares"]) + "\n")
    w(f"  {'other':<44}" + "".join(f"{_pct(v):>8}" for v in data["other"]) + "\n")


def _pct(v: float) -> str:
    if v <= 0:
        return "·"
    return "<1%" if v < 0.005 else f"{100 * v:.0f}%"
