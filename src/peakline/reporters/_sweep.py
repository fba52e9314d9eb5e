"""What the sweep reports (terminal and HTML) say in the same words: quantity names, values
with their units, fit descriptions, the sentence about the target."""

from __future__ import annotations

import os
from typing import Any

from peakline.reporters._format import human_bytes
from peakline.sweep.fit import describe, fit_from_dict
from peakline.sweep.params import format_value

PROGRAM_LABELS = {"peak_bytes": "peak heap", "peak_rss_bytes": "peak RSS", "cpu_s": "CPU time",
                  "elapsed_s": "wall time", "gpu_peak_bytes": "GPU peak"}
LINE_LABELS = {"alloc_bytes": "allocated", "live_at_peak_bytes": "held at peak",
               "cpu_s": "CPU", "time_s": "time"}
MEASURES = (("held", "memory held at the peak"), ("alloc", "memory allocated"),
            ("time", "time (CPU + wait)"))


def value_text(quantity: str, value: float | None) -> str:
    if value is None:
        return "–"
    if quantity.endswith("_bytes"):
        return human_bytes(value)
    if value >= 100:
        return f"{value:.0f} s"
    return f"{value:.2f} s" if value >= 1 else f"{value:.3f} s"


def size_text(value: float) -> str:
    """``10M``, ``200K``, ``31623``: varied values in headings (exact, or the value itself)."""
    if float(value).is_integer() and value >= 1000:
        for div, unit in ((10 ** 9, "G"), (10 ** 6, "M"), (10 ** 3, "K")):
            if value >= div:
                shown = f"{value / div:.3g}"
                if float(shown) * div == value:
                    return shown + unit
                break
    return format_value(value)


def model_text(fit: dict) -> str:
    return describe(fit_from_dict(fit))


def quality_text(fit: dict) -> str:
    q = fit.get("quality")
    return "" if q is None else f"{q:.2f}"


def prediction_text(quantity: str, fit: dict) -> str:
    p = fit.get("prediction")
    if not p:
        return ""
    return (f"~{value_text(quantity, max(0.0, p['value']))} "
            f"({value_text(quantity, max(0.0, p['low']))}–"
            f"{value_text(quantity, max(0.0, p['high']))})")


def line_label(entry: dict, width: int | None = None) -> str:
    """``ml_pipeline.py:72 loaded = pd.read_csv(path)``, cut to ``width`` characters."""
    text = f"{os.path.basename(entry['file'])}:{entry['lineno']} {entry.get('text') or ''}".rstrip()
    if width is not None and len(text) > width:
        text = text[:width - 1] + "…"
    return text


def target_sentences(sweep: dict[str, Any]) -> list[str]:
    """"at NUM_SAMPLES=10M the peak is ~9.4 GiB (8.7–10.1 GiB), 71% held by line 42 `X = ...`"."""
    out = []
    fits = sweep.get("fits") or {}
    by_name = fits.get("program_by_name") or {}
    for entry in fits.get("at_target") or ():
        name, at = entry["name"], entry["value"]
        program = by_name.get(name) or {}
        parts = []
        peak = program.get("peak_bytes")
        if peak and peak.get("prediction"):
            parts.append(_predicted("the peak is", "peak_bytes", peak, entry["memory"],
                                    "held by"))
        elif peak:
            parts.append(f"the peak cannot be predicted ({peak.get('note') or peak['model']})")
        cpu = program.get("cpu_s")
        if cpu and cpu.get("prediction"):
            parts.append(_predicted("CPU time", "cpu_s", cpu, entry["time"], "in"))
        if parts:
            out.append(f"at {name}={size_text(at)} " + "; ".join(parts))
    return out


def _predicted(what: str, measure: str, fit: dict, top_lines: list, verb: str) -> str:
    """"the peak is ~9.4 GiB (8.7–10.1 GiB), 71% held by line 42 `X = ...`": a fit's
    prediction, and the line with the largest share of it when one is known."""
    text = f"{what} {prediction_text(measure, fit)}"
    if top_lines and top_lines[0].get("share"):
        top = top_lines[0]
        text += f", {100 * top['share']:.0f}% {verb} line {top['lineno']} `{top['text']}`"
    return text
