"""Judging a profile against budgets: the verdict, its per-line evidence, its text and JSON.

``judge(runs, budgets, baseline=None)`` reads only the Profile model. ``runs`` are one or
more profiles of the same program (``--repeat N``): time figures are their median, memory
figures their largest (memory is measured exactly, time is not). Each budget becomes a
``Result`` with ``limit`` and ``measured`` as plain numbers (bytes, seconds, bytes per second
or a count of lines) and the lines responsible:

* peaks (``max_peak``, ``max_rss``, ``max_line_peak``): the lines holding memory at the heap's
  peak, with their share of it; GPU peak: the lines holding GPU memory at its peak;
* time (``max_time``, ``max_cpu``): the lines with the most sampled time;
* leaks (``max_leak_rate``, ``no_leaks``): the leaking lines and their rates;
* baseline (``baseline_peak``, ``baseline_rss``, ``baseline_cpu``, ``baseline_line_peak``):
  the lines whose figures grew most since the baseline.

Baseline comparisons: memory is compared exactly (``limit`` = baseline x (1 + tolerance));
CPU time, which varies between runs, is the median of the ``--repeat`` runs and gets a noise
allowance on top: CPU_NOISE_FLOOR_S (at least two CPU sampling intervals) plus the spread
(largest - smallest) of the repeated runs. A line's memory at the peak is a sampled estimate, so a
line only counts as grown when its growth also exceeds the sampling noise of the difference of
the two estimates (line_growth_limit).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from peakline.errors import UsageError
from peakline.gates.budgets import BUDGET_NAMES, DEFAULT_TOLERANCE_PCT, IncomparableError
from peakline.gates.matching import line_label, line_source, match_lines
from peakline.model.leaks import LEAK_REPORT_THRESHOLD
from peakline.model.profile import Profile
from peakline.reporters._format import human_bytes, human_rate

EVIDENCE_LINES = 5
# CPU time of one run varies with the machine's load, caches and page faults: a growth below
# this is not judged a regression (docs/gates.md).
CPU_NOISE_FLOOR_S = 0.1

# unit of each judged figure: how limit/measured read in text
UNITS = {"max_peak": "bytes", "max_rss": "bytes", "max_gpu_peak": "bytes", "max_time": "s",
         "max_cpu": "s", "max_leak_rate": "bytes/s", "no_leaks": "lines",
         "max_line_peak": "bytes", "baseline_peak": "bytes", "baseline_rss": "bytes",
         "baseline_cpu": "s", "baseline_line_peak": "bytes"}


@dataclass
class Result:
    name: str
    limit: float
    measured: float
    ok: bool
    lines: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "limit": self.limit, "measured": self.measured, "ok": self.ok,
               "lines": self.lines}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Verdict:
    results: list[Result]
    program: str = ""
    runs: int = 1
    exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": "pass" if self.ok else "fail", "program": self.program,
                "runs": self.runs, "exit_code": self.exit_code,
                "budgets": [r.to_dict() for r in self.results]}


# ---- figures --------------------------------------------------------------------------------

def _need(value: Any, name: str, why: str) -> Any:
    if value is None:
        raise UsageError(f"{name}: {why}")
    return value


def _memory(profile: Profile, name: str) -> None:
    _need(profile.peak_bytes, name, "the profile has no memory figures (profiled with "
                                    "--cpu-only?)")


def cpu_s(profile: Profile) -> float:
    """CPU time of all threads: the sum of the sampled CPU categories."""
    return profile.totals.cpu_s


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _line_entry(filename: str, lineno: int, **figures: Any) -> dict[str, Any]:
    return {"file": filename, "line": lineno, "label": line_label(filename, lineno),
            "source": line_source(filename, lineno), **figures}


def peak_lines(profile: Profile, limit: int = EVIDENCE_LINES) -> list[dict[str, Any]]:
    held = [(f, ln) for f, ln in profile.lines() if (ln.live_at_peak_bytes or 0) > 0]
    held.sort(key=lambda item: (-item[1].live_at_peak_bytes, item[0], item[1].lineno))
    peak = profile.peak_bytes or 0
    return [_line_entry(f, ln.lineno, bytes=ln.live_at_peak_bytes,
                        share=(ln.live_at_peak_bytes / peak) if peak > 0 else None)
            for f, ln in held[:limit]]


def gpu_peak_lines(profile: Profile, limit: int = EVIDENCE_LINES) -> list[dict[str, Any]]:
    held = [(f, ln) for f, ln in profile.lines() if (ln.gpu_live_at_peak_bytes or 0) > 0]
    held.sort(key=lambda item: (-item[1].gpu_live_at_peak_bytes, item[0], item[1].lineno))
    peak = (profile.gpu.peak_bytes if profile.gpu else None) or 0
    return [_line_entry(f, ln.lineno, bytes=ln.gpu_live_at_peak_bytes,
                        share=(ln.gpu_live_at_peak_bytes / peak) if peak > 0 else None)
            for f, ln in held[:limit]]


def time_lines(profile: Profile, *, cpu: bool, limit: int = EVIDENCE_LINES) -> list[dict]:
    total = cpu_s(profile) if cpu else profile.sampled_s
    ranked = sorted(profile.lines(), key=lambda item: (-(item[1].cpu_s if cpu else
                                                         item[1].total_s), item[0],
                                                       item[1].lineno))
    out = []
    for f, ln in ranked[:limit]:
        seconds = ln.cpu_s if cpu else ln.total_s
        if seconds <= 0:
            break
        out.append(_line_entry(f, ln.lineno, seconds=seconds,
                               share=seconds / total if total > 0 else None))
    return out


def leak_lines(profile: Profile, *, flagged_only: bool) -> list[dict[str, Any]]:
    found = [(f, ln) for f, ln in profile.lines()
             if (ln.leak_rate_bytes_s or 0) > 0 and
             (not flagged_only or (ln.leak_likelihood or 0) >= LEAK_REPORT_THRESHOLD)]
    found.sort(key=lambda item: (-(item[1].leak_rate_bytes_s or 0), item[0], item[1].lineno))
    return [_line_entry(f, ln.lineno, rate_bytes_s=ln.leak_rate_bytes_s,
                        likelihood=ln.leak_likelihood) for f, ln in found]


# ---- judging --------------------------------------------------------------------------------

def judge(runs: Sequence[Profile], budgets: Mapping[str, Any], *,
          baseline: Profile | None = None) -> Verdict:
    """The verdict of ``runs`` (one profile per run) against ``budgets`` (converted values,
    peakline.gates.budgets); ``baseline`` adds the baseline comparisons."""
    if not runs:
        raise ValueError("judge needs at least one profile")
    worst_mem = max(runs, key=lambda p: p.peak_bytes or 0)
    worst_rss = max(runs, key=lambda p: p.peak_rss_bytes or 0)
    by_wall = sorted(runs, key=lambda p: p.elapsed_s)
    median_wall_run = by_wall[(len(by_wall) - 1) // 2]
    by_cpu = sorted(runs, key=cpu_s)
    median_cpu_run = by_cpu[(len(by_cpu) - 1) // 2]
    results: list[Result] = []
    for name in BUDGET_NAMES:
        if name not in budgets or budgets[name] is None or budgets[name] is False:
            continue
        limit = budgets[name]
        if name == "max_peak":
            _memory(worst_mem, name)
            measured = worst_mem.peak_bytes
            results.append(Result(name, limit, measured, measured <= limit,
                                  peak_lines(worst_mem)))
        elif name == "max_rss":
            measured = _need(worst_rss.peak_rss_bytes, name,
                             "the profile has no peak RSS (profiled with --cpu-only?)")
            results.append(Result(name, limit, measured, measured <= limit,
                                  peak_lines(worst_mem) if worst_mem.has_memory else []))
        elif name == "max_gpu_peak":
            gpu_runs = [p for p in runs if p.gpu is not None and p.gpu.peak_bytes is not None]
            if not gpu_runs:
                raise UsageError(f"{name}: the profile has no GPU memory figures (no NVIDIA "
                                 "GPU measured)")
            worst = max(gpu_runs, key=lambda p: p.gpu.peak_bytes)
            measured = worst.gpu.peak_bytes
            results.append(Result(name, limit, measured, measured <= limit,
                                  gpu_peak_lines(worst)))
        elif name == "max_time":
            measured = _median([p.elapsed_s for p in runs])
            results.append(Result(name, limit, measured, measured <= limit,
                                  time_lines(median_wall_run, cpu=False),
                                  note=_median_note(len(runs), "wall time")))
        elif name == "max_cpu":
            measured = _median([cpu_s(p) for p in runs])
            results.append(Result(name, limit, measured, measured <= limit,
                                  time_lines(median_cpu_run, cpu=True),
                                  note=_median_note(len(runs), "CPU time")))
        elif name == "max_leak_rate":
            _memory(worst_mem, name)
            leaks = max((leak_lines(p, flagged_only=False) for p in runs),
                        key=lambda ls: ls[0]["rate_bytes_s"] if ls else 0.0)
            measured = leaks[0]["rate_bytes_s"] if leaks else 0.0
            results.append(Result(name, limit, measured, measured <= limit,
                                  [e for e in leaks if e["rate_bytes_s"] > limit]
                                  or leaks[:EVIDENCE_LINES]))
        elif name == "no_leaks":
            _memory(worst_mem, name)
            leaks = max((leak_lines(p, flagged_only=True) for p in runs), key=len)
            results.append(Result(name, 0, len(leaks), not leaks, leaks,
                                  note=f"lines with leak likelihood >= "
                                       f"{LEAK_REPORT_THRESHOLD:g}"))
        elif name == "max_line_peak":
            _memory(worst_mem, name)
            lines = peak_lines(worst_mem, limit=1_000_000)
            measured = lines[0]["bytes"] if lines else 0
            over = [e for e in lines if e["bytes"] > limit]
            results.append(Result(name, limit, measured, not over,
                                  over or lines[:EVIDENCE_LINES]))
    if baseline is not None:
        tolerance = budgets.get("tolerance")
        results.extend(_against_baseline(
            runs, baseline, DEFAULT_TOLERANCE_PCT if tolerance is None else tolerance))
    return Verdict(results, program=runs[0].program, runs=len(runs),
                   exit_code=runs[-1].exit_code)


def _median_note(n: int, what: str) -> str:
    return f"median {what} of {n} runs" if n > 1 else ""


def check_same_program(program: str, baseline: Profile, source: str) -> None:
    """IncomparableError when ``baseline`` is a profile of another program than ``program``
    (a profile's ``program``: the script as given, or ``-m module``). Scripts are compared by
    file name, so a baseline made in another checkout or folder still applies."""
    if _program_key(program) != _program_key(baseline.program):
        raise IncomparableError(f"{source}: a baseline of another program "
                                f"({baseline.program!r}, not {program!r})")


def _program_key(program: str) -> str:
    import os
    return os.path.basename(program.rstrip("/")) or program


def _against_baseline(runs: Sequence[Profile], base: Profile, tolerance_pct: float
                      ) -> list[Result]:
    factor = 1.0 + tolerance_pct / 100.0
    worst = max(runs, key=lambda p: p.peak_bytes or 0)
    results = []
    if worst.has_memory and base.has_memory:
        grown = grown_lines(base, worst, tolerance_pct)
        limit = int(math.floor(base.peak_bytes * factor))
        results.append(Result("baseline_peak", limit, worst.peak_bytes,
                              worst.peak_bytes <= limit, grown[:EVIDENCE_LINES],
                              note=f"baseline {human_bytes(base.peak_bytes)} + {tolerance_pct:g}%"))
        rss = max(runs, key=lambda p: p.peak_rss_bytes or 0)
        if rss.peak_rss_bytes is not None and base.peak_rss_bytes is not None:
            limit = int(math.floor(base.peak_rss_bytes * factor))
            results.append(Result("baseline_rss", limit, rss.peak_rss_bytes,
                                  rss.peak_rss_bytes <= limit, grown[:EVIDENCE_LINES],
                                  note=f"baseline {human_bytes(base.peak_rss_bytes)} + "
                                       f"{tolerance_pct:g}%"))
        over = [e for e in grown if not e["ok"]]
        if over:
            top = max(over, key=lambda e: e["after"] - e["limit"])
            results.append(Result("baseline_line_peak", top["limit"], top["after"], False,
                                  over[:EVIDENCE_LINES],
                                  note=f"{len(over)} line(s) grew by more than "
                                       f"{tolerance_pct:g}% and the sampling noise"))
        else:
            top = max(grown, key=lambda e: e["after"] / e["limit"] if e["limit"] else 0,
                      default=None)
            results.append(Result("baseline_line_peak", top["limit"] if top else 0,
                                  top["after"] if top else 0, True,
                                  grown[:EVIDENCE_LINES]))
    elif worst.has_memory != base.has_memory:
        raise IncomparableError("the baseline and this run differ in what they measured "
                                "(one was profiled with --cpu-only)")
    base_cpu = cpu_s(base)
    cpus = [cpu_s(p) for p in runs]
    slack = max(CPU_NOISE_FLOOR_S, 2 * base.options.cpu_sampling_interval_s) + \
        (max(cpus) - min(cpus))
    measured = _median(cpus)
    limit = base_cpu * factor + slack
    by_cpu = sorted(runs, key=cpu_s)
    median_run = by_cpu[(len(by_cpu) - 1) // 2]
    results.append(Result("baseline_cpu", limit, measured, measured <= limit,
                          grown_cpu_lines(base, median_run)[:EVIDENCE_LINES],
                          note=f"baseline {base_cpu:.3f} s + {tolerance_pct:g}% + "
                               f"{slack:.3f} s of run-to-run noise"
                               + (f"; {_median_note(len(runs), 'CPU time')}"
                                  if len(runs) > 1 else "")))
    return results


def line_growth_limit(before: int, after: int, factor: float, *, interval: int,
                      before_variance: float | None = None,
                      after_variance: float | None = None) -> int:
    """The most a line may hold at the peak (``after``) against its baseline (``before``):
    ``before x factor``, and at least ``before`` + the sampling noise of the difference.

    Both figures are estimates. With each one's variance (``live_at_peak_variance``,
    docs/sampling.md) the noise is 4 standard deviations of their difference, at least one
    sampling interval T: a line of small objects that did not change exceeds the limit in
    about 3 comparisons in 100,000, and a line of large blocks, counted exactly (variance ~0),
    is held to the tolerance alone. Profiles written before the variance was recorded fall back
    to 3 x sqrt(T x after), a bound that is tight only for small objects."""
    if before_variance is not None and after_variance is not None:
        noise = max(interval, 4.0 * math.sqrt(before_variance + after_variance))
    else:
        noise = max(interval, 3.0 * math.sqrt(interval * after))
    return int(max(before * factor, before + noise))


def grown_lines(base: Profile, new: Profile, tolerance_pct: float) -> list[dict[str, Any]]:
    """Lines of ``new`` holding more at the peak than their match in ``base``, most grown first
    (``ok``: within tolerance or sampling noise; ``limit``: the most that would be ok)."""
    factor = 1.0 + tolerance_pct / 100.0
    interval = new.memory.sampling_interval_bytes if new.memory else 0
    matches = match_lines(base, new)
    old = {(f, ln.lineno): ln for f, ln in base.lines()}
    out = []
    for f, ln in new.lines():
        after = ln.live_at_peak_bytes or 0
        match = matches.get((f, ln.lineno))
        before = (old[match].live_at_peak_bytes or 0) if match else 0
        if after <= before:
            continue
        # A line with no match held 0 in the baseline, exactly.
        before_variance = old[match].live_at_peak_variance if match else 0
        limit = line_growth_limit(before, after, factor, interval=interval,
                                  before_variance=before_variance,
                                  after_variance=ln.live_at_peak_variance)
        entry = _line_entry(f, ln.lineno, before=before, after=after, change=after - before,
                            limit=limit, ok=after <= limit)
        if match and match != (f, ln.lineno):
            entry["baseline_line"] = match[1]
        out.append(entry)
    out.sort(key=lambda e: (-e["change"], e["file"], e["line"]))
    return out


def grown_cpu_lines(base: Profile, new: Profile) -> list[dict[str, Any]]:
    matches = match_lines(base, new)
    old = {(f, ln.lineno): ln for f, ln in base.lines()}
    out = []
    for f, ln in new.lines():
        match = matches.get((f, ln.lineno))
        before = old[match].cpu_s if match else 0.0
        if ln.cpu_s > before:
            out.append(_line_entry(f, ln.lineno, before=before, after=ln.cpu_s,
                                   change=ln.cpu_s - before))
    out.sort(key=lambda e: (-e["change"], e["file"], e["line"]))
    return out


# ---- text -----------------------------------------------------------------------------------

def show(name: str, value: float) -> str:
    unit = UNITS.get(name, "")
    if unit == "bytes":
        return human_bytes(value)
    if unit == "bytes/s":
        return human_rate(value).lstrip("+")
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "lines":
        return f"{int(value)} line{'s' if value != 1 else ''}"
    return f"{value:g}"


def describe_line(name: str, entry: Mapping[str, Any]) -> str:
    """One line of evidence: where, the figures, the source."""
    figures = []
    if "after" in entry:
        if UNITS.get(name) == "s":
            figures.append(f"{entry['before']:.3f} s -> {entry['after']:.3f} s")
        else:
            change = entry["change"]
            pct = f" ({100.0 * change / entry['before']:+.0f}%)" if entry["before"] else " (new)"
            figures.append(f"{human_bytes(entry['before'])} -> {human_bytes(entry['after'])}"
                           f"{pct}")
    elif "rate_bytes_s" in entry:
        figures.append(f"leaks {human_rate(entry['rate_bytes_s']).lstrip('+')}")
        if entry.get("likelihood") is not None:
            figures.append(f"likelihood {entry['likelihood']:.0%}")
    elif "bytes" in entry:
        share = entry.get("share")
        figures.append(human_bytes(entry["bytes"]) + (f" ({share:.0%} of the peak)"
                                                      if share is not None else ""))
    elif "seconds" in entry:
        share = entry.get("share")
        figures.append(f"{entry['seconds']:.3f} s" + (f" ({share:.0%})" if share is not None
                                                      else ""))
    source = entry.get("source") or ""
    return f"{entry['label']}  {', '.join(figures)}" + (f"  | {source}" if source else "")


def render_text(verdict: Verdict) -> str:
    """The report: one line per budget, evidence under each failed one."""
    out = []
    for r in verdict.results:
        mark = "ok  " if r.ok else "FAIL"
        relation = "<=" if r.ok else ">"
        line = f"{mark} {r.name}: {show(r.name, r.measured)} {relation} allowed " \
               f"{show(r.name, r.limit)}"
        if r.note:
            line += f"  ({r.note})"
        out.append(line)
        if not r.ok:
            out.extend("       " + describe_line(r.name, e) for e in r.lines)
    n = len(verdict.failed)
    out.append(f"budgets: {'pass' if verdict.ok else 'FAIL'}: "
               f"{len(verdict.results) - n} of {len(verdict.results)} budgets held"
               + (f"; over budget: {', '.join(r.name for r in verdict.failed)}" if n else ""))
    return "\n".join(out) + "\n"
