"""HTML report of a sweep: one self-contained page, no script at all, charts as inline SVG
drawn here (so the page works offline, from file://, under a CSP that allows no script).

    the target sentence   what the peak and the time will be at --target, and who holds them
    runs                  every run: values, status, peak, CPU, wall, profile file
    per varied name       the whole program's fits (table and one chart per quantity: the
                          measured points, the fitted curve, the prediction with its range);
                          the seed experiment: stacked bars of each line's share of memory
                          held at the peak, memory allocated and time, one bar per size; the
                          fitted curves of the growing lines that hold the most at the peak;
                          the lines' fits

Every piece of text from the sweep file (program, source lines, errors) is escaped with
``html.escape``.
"""

from __future__ import annotations

import html
import math
import os
from typing import Any, TextIO

from peakline import __version__
from peakline.errors import PeaklineError
from peakline.reporters import _page
from peakline.reporters._sweep import (LINE_LABELS, MEASURES, PROGRAM_LABELS, line_label,
                                       model_text, prediction_text, quality_text, size_text,
                                       target_sentences, value_text)
from peakline.sweep.analysis import shares, slice_runs
from peakline.sweep.fit import fit_from_dict
from peakline.sweep.params import label

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b",
           "#9d755d")
OTHER_COLOUR = "#c9ced8"
LINE_CHARTS = 4  # lines whose fitted curve is drawn (those growing, largest at the peak first)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def write(sweep: dict[str, Any], path: str) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            render(sweep, stream)
    except OSError as error:
        raise PeaklineError(f"cannot write HTML report to {path}: "
                            f"{error.strerror or error}") from None
    import sys
    print(f"peakline: HTML report written to {os.path.abspath(path)}", file=sys.stderr)


def render(sweep: dict[str, Any], stream: TextIO) -> None:
    stream.write(_page.page("sweep.html", title=_e(f"peakline sweep: {sweep['program']}"),
                            css=_page.template("sweep.css"), scripts=False,
                            slots={"body": _body(sweep)}))


def _body(sweep: dict[str, Any]) -> str:
    runs = sweep["runs"]
    ok = [r for r in runs if r["status"] == "ok"]
    vary = sweep["vary"]
    out = ['<header id="summary">',
           f"<h1>peakline sweep · {_e(sweep['program'])}</h1>",
           "<p>" + " · ".join(f"{_e(v['name'])} = "
                               f"{_e(', '.join(size_text(x) for x in v['values']))}"
                               for v in vary)
           + f" (as {_e(sweep.get('as', 'env'))})</p>",
           f"<p>{len(runs)} runs, {len(ok)} ok"
           + ("" if sweep.get("complete", True) else ", stopped early")
           + f" · {sweep.get('elapsed_s', 0):.1f} s · started {_e(sweep.get('started_at', ''))}"
           "</p></header><main>"]
    sentences = target_sentences(sweep)
    if sentences:
        out.append('<section id="target">')
        out += [f'<p class="target">{_e(s)}</p>' for s in sentences]
        out.append("</section>")
    fits = sweep.get("fits") or {}
    for index, v in enumerate(vary):
        out.append(_name_section(sweep, fits, v["name"], index))
    out.append(_runs_section(runs, vary))
    out.append(f"</main><footer>peakline {_e(__version__)} · sweep file format "
               f"{_e(sweep.get('version', 1))}</footer>")
    return "\n".join(out)


def _name_section(sweep: dict, fits: dict, name: str, index: int) -> str:
    vary, runs = sweep["vary"], sweep["runs"]
    program = (fits.get("program_by_name") or {}).get(name)
    if program is None:
        program = fits.get("program", {}) if index == 0 else {}
    target = (sweep.get("target") or {}).get(name)
    slice_ = sorted(slice_runs(vary, runs, name), key=lambda r: r["params"][name])
    others = ""
    if len(vary) > 1 and slice_:
        fixed = {k: x for k, x in slice_[0]["params"].items() if k != name}
        others = f" (others at {label(fixed)})"
    out = [f'<section class="varied" id="grow-{index}">',
           f"<h2>How the program grows with {_e(name)}{_e(others)}</h2>",
           '<table class="fits program"><thead><tr><th>quantity</th><th>model</th>'
           "<th>quality</th><th>measured</th>"
           + (f"<th>at {_e(name)}={_e(size_text(target))}</th>" if target is not None else "")
           + "<th>note</th></tr></thead><tbody>"]
    charts = []
    for quantity, fit in program.items():
        pts = [(r["params"][name], r["summary"].get(quantity)) for r in slice_]
        pts = [(x, y) for x, y in pts if y is not None]
        measured = (f"{value_text(quantity, pts[0][1])} → {value_text(quantity, pts[-1][1])}"
                    if pts else "")
        out.append(f"<tr data-quantity=\"{_e(quantity)}\"><td>"
                   f"{_e(PROGRAM_LABELS.get(quantity, quantity))}</td>"
                   f"<td>{_e(model_text(fit))}</td><td class=\"num\">{_e(quality_text(fit))}</td>"
                   f"<td>{_e(measured)}</td>"
                   + (f"<td>{_e(prediction_text(quantity, fit))}</td>" if target is not None
                      else "")
                   + f"<td class=\"note\">{_e(fit.get('note') or '')}</td></tr>")
        charts.append(_fit_chart(PROGRAM_LABELS.get(quantity, quantity), quantity, fit, pts,
                                 name, target))
    out.append("</tbody></table>")
    out.append('<div class="charts fit-charts">' + "".join(charts) + "</div>")
    out.append(f"<h3>Share per line as {_e(name)} grows</h3>")
    out.append('<div class="charts share-charts">')
    for measure, title in MEASURES:
        out.append(_stacked_chart(shares(vary, runs, name, measure), title, measure))
    out.append("</div>")
    line_charts = _line_charts(fits, slice_, name, target)
    if line_charts:
        out.append(f"<h3>Memory held at the peak by the largest lines, as {_e(name)} grows</h3>")
        out.append('<div class="charts line-charts">' + "".join(line_charts) + "</div>")
    out.append(_lines_table(fits, name, target))
    out.append("</section>")
    return "\n".join(out)


def _line_charts(fits: dict, slice_: list[dict], name: str, target) -> list[str]:
    """The fitted curve and the measured points of the lines holding the most at the peak."""
    chosen = [f for f in fits.get("lines") or ()
              if f["name"] == name and f["quantity"] == "live_at_peak_bytes"
              and f["model"] not in ("unclear", "constant")]
    measured = []
    for fit in chosen:
        pts = []
        for r in slice_:
            entry = next((e for e in r["summary"].get("lines", ())
                          if e["file"] == fit["file"] and e["lineno"] == fit["lineno"]), None)
            pts.append((r["params"][name], (entry.get("live_at_peak_bytes") or 0) if entry else 0))
        measured.append((fit, pts))
    measured.sort(key=lambda item: -max((y for _, y in item[1]), default=0))  # held most first
    return [_fit_chart(line_label(fit, 44), "live_at_peak_bytes", fit, pts, name, target,
                       kind="line-chart") for fit, pts in measured[:LINE_CHARTS]]


def _runs_section(runs: list[dict], vary: list[dict]) -> str:
    out = ['<section id="runs"><h2>Runs</h2><table class="runs"><thead><tr><th>#</th>'
           + "".join(f"<th>{_e(v['name'])}</th>" for v in vary)
           + "<th>status</th><th>peak heap</th><th>peak RSS</th><th>CPU</th><th>wall</th>"
           "<th>profile</th><th>error</th></tr></thead><tbody>"]
    for r in runs:
        cls = "" if r["status"] == "ok" else ' class="failed"'
        out.append(f"<tr{cls}><td class=\"num\">{r['index'] + 1}</td>"
                   + "".join(f"<td class=\"num\">{_e(size_text(r['params'][v['name']]))}</td>"
                             for v in vary)
                   + f"<td>{_e(r['status'])}</td>"
                   + "".join(f"<td class=\"num\">{_e(value_text(q, r.get(q)))}</td>"
                             for q in ("peak_bytes", "peak_rss_bytes", "cpu_s", "elapsed_s"))
                   + f"<td class=\"code\">{_e(r.get('profile') or '')}</td>"
                   f"<td>{_e(r.get('error') or '')}</td></tr>")
    out.append("</tbody></table></section>")
    return "\n".join(out)


def _lines_table(fits: dict, name: str, target) -> str:
    rows: dict[tuple, dict[str, dict]] = {}
    labels: dict[tuple, dict] = {}
    for fit in fits.get("lines") or ():
        if fit["name"] == name:
            key = (fit["file"], fit["lineno"])
            rows.setdefault(key, {})[fit["quantity"]] = fit
            labels[key] = fit
    if not rows:
        return '<p class="note">No line reached 2% of memory or time in any run.</p>'
    quantities = ("live_at_peak_bytes", "alloc_bytes", "cpu_s", "time_s")
    out = [f"<h3>Lines: growth with {_e(name)}</h3>",
           '<table class="fits lines"><thead><tr><th>line</th><th>source</th>'
           + "".join(f"<th>{_e(LINE_LABELS[q])}</th>" for q in quantities)
           + "</tr></thead><tbody>"]
    for key, by_quantity in rows.items():
        entry = labels[key]
        cells = []
        for q in quantities:
            fit = by_quantity.get(q)
            if fit is None:
                cells.append("<td></td>")
                continue
            text = f"{model_text(fit)} {quality_text(fit)}".strip()
            if target is not None and fit.get("prediction"):
                text += f" → {value_text(q, max(0.0, fit['prediction']['value']))}"
            title = fit.get("note") or ""
            cells.append(f'<td title="{_e(title)}">{_e(text)}</td>')
        out.append(f"<tr><td>{_e(os.path.basename(entry['file']))}:{entry['lineno']}</td>"
                   f"<td class=\"code\">{_e(entry.get('text') or '')}</td>{''.join(cells)}</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


# ---- SVG ----------------------------------------------------------------------------------

def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    """Grid values: 1-2-5 steps per decade on a log axis (decades only when that is too
    many), five even steps on a linear one."""
    if log:
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        for mantissas in ((1, 2, 5), (1,)):
            ticks = [m * 10.0 ** k for k in range(first, last + 1) for m in mantissas
                     if lo <= m * 10.0 ** k <= hi]
            if len(ticks) <= 6:
                break
        return ticks if len(ticks) >= 2 else [lo, hi]
    step = (hi - lo) / 4 or 1.0
    return [lo + i * step for i in range(5)]


def _fit_chart(title: str, quantity: str, fit: dict, pts: list[tuple[float, float]], name: str,
               target: float | None, kind: str = "fit-chart") -> str:
    """Measured points, the fitted curve and the prediction, log x; log y when every value
    drawn is positive."""
    width, height, left, right, top, bottom = 300, 190, 62, 12, 10, 30
    if not pts:
        return ""
    curve_fit = fit_from_dict(fit)
    xs = [p[0] for p in pts]
    x_lo, x_hi = min(xs), max(xs + ([target] if target else []))
    if x_hi <= x_lo:
        x_hi = x_lo * 2
    curve = []
    if curve_fit.model != "unclear":
        for i in range(61):
            x = math.exp(math.log(x_lo) + (math.log(x_hi) - math.log(x_lo)) * i / 60)
            y = curve_fit.evaluate(x)
            if y is not None and math.isfinite(y):
                curve.append((x, y))
    pred = fit.get("prediction")
    ys = [p[1] for p in pts] + [y for _, y in curve]
    if pred and target:
        ys += [pred["low"], pred["high"], pred["value"]]
    log_y = all(y > 0 for y in ys)
    if log_y:
        y_lo, y_hi = min(ys) / 1.3, max(ys) * 1.3
    else:
        y_lo, y_hi = min(0.0, min(ys)), max(ys) * 1.1 or 1.0
    if y_hi <= y_lo:
        y_hi = y_lo + 1

    def px(x: float) -> float:
        return left + (math.log(x) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo)) * \
            (width - left - right)

    def py(y: float) -> float:
        if log_y:
            f = (math.log(max(y, y_lo)) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo))
        else:
            f = (y - y_lo) / (y_hi - y_lo)
        return top + (1 - f) * (height - top - bottom)

    svg = [f'<figure class="{kind}" data-quantity="{_e(quantity)}">'
           f"<figcaption>{_e(title)}: {_e(model_text(fit))}</figcaption>"
           f'<svg class="fit" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'role="img">']
    for t in _ticks(y_lo, y_hi, log_y):
        y = py(t)
        svg.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y:.1f}" '
                   f'y2="{y:.1f}"/><text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{_e(value_text(quantity, t))}</text>")
    svg.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{height - bottom}" '
               f'y2="{height - bottom}"/>')
    shown = sorted(set(xs + ([target] if target else [])))
    last_px = -1e9
    for x in shown:
        if px(x) - last_px < 28 and x != shown[-1]:
            continue
        last_px = px(x)
        svg.append(f'<text x="{px(x):.1f}" y="{height - bottom + 14}" text-anchor="middle">'
                   f"{_e(size_text(x))}</text>")
    svg.append(f'<text x="{width - right}" y="{height - 2}" text-anchor="end">{_e(name)}</text>')
    if curve:
        path = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}"
                        for i, (x, y) in enumerate(curve))
        svg.append(f'<path class="curve" d="{path}"/>')
    if pred and target:
        x = px(target)
        svg.append(f'<line class="predicted" x1="{x:.1f}" x2="{x:.1f}" '
                   f'y1="{py(pred["low"]):.1f}" y2="{py(pred["high"]):.1f}"/>'
                   f'<circle class="predicted-point" cx="{x:.1f}" cy="{py(pred["value"]):.1f}" '
                   f'r="4"><title>{_e(prediction_text(quantity, fit))} at {_e(name)}='
                   f"{_e(size_text(target))}</title></circle>")
    for x, y in pts:
        svg.append(f'<circle class="point" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5">'
                   f"<title>{_e(name)}={_e(size_text(x))}: {_e(value_text(quantity, y))}"
                   "</title></circle>")
    svg.append("</svg></figure>")
    return "".join(svg)


def _stacked_chart(data: dict, title: str, measure: str) -> str:
    """One bar per size, each line's share stacked (the largest at the bottom), "other" on
    top, and a legend."""
    if not data["x"] or not data["series"]:
        return ""
    xs = data["x"]
    width, height, left, right, top, bottom = 380, 220, 40, 8, 10, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    slot = plot_w / len(xs)
    bar = min(48.0, slot * 0.7)
    svg = [f'<figure class="share-chart" data-measure="{_e(measure)}">'
           f"<figcaption>Share of {_e(title)}</figcaption>"
           f'<svg class="stacked" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img">']
    for pct in (0, 25, 50, 75, 100):
        y = top + plot_h * (1 - pct / 100)
        svg.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y:.1f}" '
                   f'y2="{y:.1f}"/><text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{pct}%</text>")
    layers = [(s, PALETTE[i % len(PALETTE)]) for i, s in enumerate(data["series"])]
    for i, x in enumerate(xs):
        cx = left + slot * (i + 0.5)
        base = 0.0
        for s, colour in layers + [({"shares": data["other"], "file": "", "lineno": 0,
                                     "text": "other"}, OTHER_COLOUR)]:
            v = max(0.0, min(1.0 - base, s["shares"][i]))
            if v <= 0:
                continue
            y0 = top + plot_h * (1 - base - v)
            name = "other" if s.get("lineno") == 0 else line_label(s)
            svg.append(f'<rect class="share" x="{cx - bar / 2:.1f}" y="{y0:.1f}" '
                       f'width="{bar:.1f}" height="{plot_h * v:.1f}" fill="{colour}">'
                       f"<title>{_e(data['name'])}={_e(size_text(x))}: {_e(name)}: "
                       f"{100 * v:.0f}%</title></rect>")
            base += v
        svg.append(f'<text x="{cx:.1f}" y="{height - bottom + 14}" text-anchor="middle">'
                   f"{_e(size_text(x))}</text>")
    svg.append(f'<text x="{width - right}" y="{height - 2}" text-anchor="end">'
               f"{_e(data['name'])}</text></svg>")
    svg.append('<ul class="legend">')
    for s, colour in layers:
        svg.append(f'<li><span class="swatch" style="background:{colour}"></span>'
                   f'<span class="code">{_e(line_label(s, 60))}</span></li>')
    svg.append(f'<li><span class="swatch" style="background:{OTHER_COLOUR}"></span>'
               "<span>other</span></li></ul></figure>")
    return "".join(svg)
