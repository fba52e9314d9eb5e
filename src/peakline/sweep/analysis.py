"""From the runs of a sweep to its fits, its predictions at the target, and the shares per
operation that the reports chart. Reads only the run summaries (summary.py), so a sweep file
is analysed the same after its profile files are gone.

Several varied names: each fit is over one name along a slice of the cross product, the other
names held at their largest value that has successful runs (the size nearest production).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from peakline.sweep.fit import Fit, fit_growth

PROGRAM_QUANTITIES = ("peak_bytes", "peak_rss_bytes", "cpu_s", "elapsed_s", "gpu_peak_bytes")
LINE_QUANTITIES = ("alloc_bytes", "live_at_peak_bytes", "cpu_s", "time_s")
PHASE_QUANTITIES = ("wall_s", "cpu_s", "peak_bytes", "net_bytes")

# What matters: a line, function or phase is fitted when, in some successful run, it reached
# this share of the run's figure (and the absolute minimum below); at most MAX_FITTED of each.
MATTER_SHARE = 0.02
MATTER_BYTES = 1 << 20
MATTER_SAMPLES = 3
MAX_FITTED = 40
# Shares chart: the operations drawn, the rest is "other".
CHART_OPERATIONS = 7


def usable(run: dict[str, Any]) -> bool:
    return run.get("status") == "ok" and isinstance(run.get("summary"), dict)


def slice_runs(vary: Sequence[dict], runs: Sequence[dict], name: str) -> list[dict]:
    """The successful runs along ``name``, the other names at their largest usable value."""
    ok = [r for r in runs if usable(r)]
    fixed = {}
    for v in vary:
        if v["name"] != name:
            seen = [r["params"][v["name"]] for r in ok if v["name"] in r["params"]]
            if seen:
                fixed[v["name"]] = max(seen)
    return [r for r in ok if all(r["params"].get(k) == x for k, x in fixed.items())]


def _floor(quantity: str, summary: dict) -> float:
    if quantity.endswith("_bytes"):
        return float(summary.get("memory_sampling_interval_bytes") or 1 << 20)
    if quantity in ("cpu_s", "time_s"):
        return 2.0 * float(summary.get("cpu_sampling_interval_s") or 0.01)
    return 0.01  # elapsed_s, wall_s: the clock is finer, the run-to-run noise is not


def _fit(name: str, xs: list, ys: list, floor: float, target: float | None) -> Fit:
    return fit_growth(name, xs, ys, floor=floor, target=target)


def _key(kind: str, entry: dict) -> tuple:
    if kind == "lines":
        return (entry["file"], entry["lineno"])
    if kind == "functions":
        return (entry["file"], entry["function"], entry["lineno"])
    return (entry["name"],)


def _matters(kind: str, runs: Sequence[dict]) -> list[tuple]:
    """The keys of the lines / functions / phases worth fitting, most important first."""
    score: dict[tuple, float] = {}
    for run in runs:
        s = run["summary"]
        peak = s.get("peak_bytes") or 0
        alloc = s.get("alloc_bytes") or 0
        time = s.get("time_s") or 0.0
        min_time = MATTER_SAMPLES * float(s.get("cpu_sampling_interval_s") or 0.01)
        for entry in s.get(kind, ()):
            if kind == "phases":
                shares = [(entry.get("wall_s") or 0) / max(s.get("elapsed_s") or 0, 1e-9)]
                if (entry.get("peak_bytes") or 0) >= MATTER_BYTES and peak:
                    shares.append(entry["peak_bytes"] / peak)
            else:
                shares = []
                if (entry.get("alloc_bytes") or 0) >= MATTER_BYTES and alloc:
                    shares.append(entry["alloc_bytes"] / alloc)
                if (entry.get("live_at_peak_bytes") or 0) >= MATTER_BYTES and peak:
                    shares.append(entry["live_at_peak_bytes"] / peak)
                if (entry.get("time_s") or 0) >= min_time and time:
                    shares.append(entry["time_s"] / time)
            best = max(shares, default=0.0)
            if best >= MATTER_SHARE:
                key = _key(kind, entry)
                score[key] = max(score.get(key, 0.0), best)
    return sorted(score, key=lambda k: -score[k])[:MAX_FITTED]


def _entry(kind: str, run: dict, key: tuple) -> dict | None:
    for entry in run["summary"].get(kind, ()):
        if _key(kind, entry) == key:
            return entry
    return None


def compute_fits(vary: Sequence[dict], runs: Sequence[dict],
                 target: dict[str, float] | None) -> dict[str, Any]:
    """The ``fits`` object of sweep.json (docs/sweep.md)."""
    target = target or {}
    names = [v["name"] for v in vary]
    by_name: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {"program": {}, "program_by_name": by_name, "lines": [],
                           "functions": [], "phases": [], "at_target": []}
    ok = [r for r in runs if usable(r)]
    keys = {kind: _matters(kind, ok) for kind in ("lines", "functions", "phases")}
    for name in names:
        runs_ = slice_runs(vary, runs, name)
        xs = [r["params"][name] for r in runs_]
        at = target.get(name)
        program: dict[str, Any] = {}
        for quantity in PROGRAM_QUANTITIES:
            ys = [r["summary"].get(quantity) for r in runs_]
            if not any(y is not None for y in ys):
                continue
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            floor = _floor(quantity, runs_[0]["summary"]) if quantity != "peak_bytes" else 0.0
            program[quantity] = _fit(name, [p[0] for p in pts], [p[1] for p in pts],
                                     floor, at).to_dict()
        by_name[name] = program
        for kind, quantities in (("lines", LINE_QUANTITIES), ("functions", LINE_QUANTITIES),
                                 ("phases", PHASE_QUANTITIES)):
            for key in keys[kind]:
                first = next((e for r in runs_ if (e := _entry(kind, r, key))), None)
                if first is None:
                    continue
                for quantity in quantities:
                    ys = []
                    for r in runs_:
                        e = _entry(kind, r, key)
                        ys.append((e.get(quantity) or 0) if e is not None else 0)
                    floor = _floor(quantity, runs_[0]["summary"])
                    fit = _fit(name, xs, ys, floor, at).to_dict()
                    out[kind].append({**_identity(kind, first), "quantity": quantity, **fit})
        if at is not None:
            out["at_target"].append(_at_target(name, at, program, out["lines"]))
    if names:
        out["program"] = by_name[names[0]]
    return out


def _identity(kind: str, entry: dict) -> dict[str, Any]:
    if kind == "lines":
        return {"file": entry["file"], "lineno": entry["lineno"], "text": entry.get("text", "")}
    if kind == "functions":
        return {"file": entry["file"], "function": entry["function"], "lineno": entry["lineno"]}
    return {"phase": entry["name"]}


def _at_target(name: str, value: float, program: dict, lines: list[dict]) -> dict[str, Any]:
    """Which lines hold the memory and take the time at the target (their predicted share
    of the predicted whole)."""
    def predicted(fit: dict | None) -> float | None:
        if not fit or not fit.get("prediction"):
            return None
        return max(0.0, fit["prediction"]["value"])

    peak = predicted(program.get("peak_bytes"))
    time_total = predicted(program.get("cpu_s"))
    result: dict[str, Any] = {"name": name, "value": value, "memory": [], "time": []}
    for quantity, total, bucket in (("live_at_peak_bytes", peak, "memory"),
                                    ("cpu_s", time_total, "time")):
        ranked = []
        for fit in lines:
            if fit["quantity"] != quantity or fit["name"] != name:
                continue
            v = predicted(fit)
            if v is None or v <= 0:
                continue
            ranked.append({"file": fit["file"], "lineno": fit["lineno"], "text": fit["text"],
                           "model": fit["model"], "value": v,
                           "share": min(1.0, v / total) if total else None})
        ranked.sort(key=lambda e: -e["value"])
        result[bucket] = ranked[:5]
    return result


def shares(vary: Sequence[dict], runs: Sequence[dict], name: str, measure: str,
           limit: int = CHART_OPERATIONS) -> dict[str, Any]:
    """The seed experiment's chart data for one name: x values and, per operation (a line),
    its share of the measure at each x (averaged over repeats), the rest as "other".

    measure: "alloc" (of all bytes allocated), "held" (of the heap at its peak), "time" (of
    all sampled time)."""
    field, total_field = {"alloc": ("alloc_bytes", "alloc_bytes"),
                          "held": ("live_at_peak_bytes", "peak_bytes"),
                          "time": ("time_s", "time_s")}[measure]
    runs_ = slice_runs(vary, runs, name)
    xs = sorted({r["params"][name] for r in runs_})
    per_x: dict[Any, list[dict[tuple, float]]] = {x: [] for x in xs}
    labels: dict[tuple, dict] = {}
    for r in runs_:
        s = r["summary"]
        total = s.get(total_field) or 0
        if not total:
            continue
        row = {}
        for e in s.get("lines", ()):
            v = e.get(field) or 0
            if v > 0:
                key = (e["file"], e["lineno"])
                row[key] = v / total
                labels.setdefault(key, {"file": e["file"], "lineno": e["lineno"],
                                        "text": e.get("text", "")})
        per_x[r["params"][name]].append(row)
    means = {x: _mean_rows(rows) for x, rows in per_x.items()}
    xs = [x for x in xs if per_x[x]]
    best: dict[tuple, float] = {}
    for x in xs:
        for key, v in means[x].items():
            best[key] = max(best.get(key, 0.0), v)
    top = sorted(best, key=lambda k: -best[k])[:limit]
    series = [{**labels[k], "shares": [min(1.0, means[x].get(k, 0.0)) for x in xs]} for k in top]
    other = [max(0.0, 1.0 - sum(s["shares"][i] for s in series)) for i in range(len(xs))]
    return {"name": name, "measure": measure, "x": xs, "series": series, "other": other}


def _mean_rows(rows: list[dict[tuple, float]]) -> dict[tuple, float]:
    if not rows:
        return {}
    keys = {k for row in rows for k in row}
    return {k: sum(row.get(k, 0.0) for row in rows) / len(rows) for k in keys}
