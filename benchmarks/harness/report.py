"""Render the results as Markdown (docs/benchmarks.md) and raw JSON.

The JSON carries every measurement, so tables can be recomputed or re-plotted without rerunning.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re

SCHEMA = "peakline-benchmarks/overhead"
SCHEMA_VERSION = 2  # 2: "environments", and each tool's "configuration" / "environment"

# DESIGN.md performance budget: CPU only median <= 1.02x; full median <= 1.05x, worst <= 1.25x.
CPU_ONLY_MEDIAN_TARGET = 1.02
FULL_MEDIAN_TARGET = 1.05
FULL_WORST_TARGET = 1.25
GROUPS = {"cpu": "CPU-only modes", "full": "Full / memory modes"}


def _ratio(value) -> str:
    return "failed" if value is None else f"{value:.2f}x"


def _seconds(value) -> str:
    return "failed" if value is None else f"{value:.2f}"


def _spread(row: dict):
    if row["median_s"] is None or row["runs"] - row["failures"] < 2:
        return None
    return (row["max_s"] - row["min_s"]) / row["median_s"]


def _cap(tool) -> str | None:
    parts = []
    if tool.max_repetitions:
        parts.append(f"measured in the first {tool.max_repetitions} repetition(s) only")
    if tool.run_timeout_s:
        parts.append(f"each run killed after {tool.run_timeout_s:.0f} s")
    return ", ".join(parts) or None


def to_json(*, settings, machine, tools, tool_versions, workloads, skipped, measurements,
            summary, accuracy=None, cost=None, environments=None) -> dict:
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "settings": settings,
        "machine": machine,
        "environments": environments or {},
        "tools": {t.name: {"mode": t.mode, "sampling": t.sampling, "group": t.group,
                           "version": tool_versions[t.name],
                           "configuration": t.configuration,
                           "environment": t.environment,
                           "cap": _cap(t)}
                  for t in tools},
        "workloads": {w.name: {"description": w.description, "script": w.script.name,
                               "requires": list(w.requires),
                               "environment": w.environment} for w in workloads},
        "skipped_workloads": skipped,
        "measurements": [dataclasses.asdict(m) for m in measurements],
        "summary": summary,
        "accuracy": accuracy,
        "cost": cost,
    }


def _environment_cell(data: dict, tool: str) -> str:
    """Where a tool's runs happened: without torch, except the workloads that need it."""
    if "environments" not in data:
        return "one venv, torch installed"
    environments = data["environments"]
    if "current" in environments or not environments:
        return "current interpreter"
    if data["tools"][tool].get("environment") == "torch":
        return "**torch installed**, every workload"
    with_torch = [w for w, info in data["workloads"].items() if info.get("environment") == "torch"]
    return "no torch" + (f"; {', '.join(with_torch)}: with torch" if with_torch else "")


def _environments_section(data: dict) -> list[str]:
    lines = ["", "### Environments", ""]
    if "environments" not in data:
        # Results of a harness that ran everything in one venv with PyTorch installed.
        return lines + [
            "**These figures are not every tool at its best configuration.** Every workload "
            "ran in one venv that had PyTorch installed. Scalene imports torch into every "
            "program it profiles when torch is importable (5-8 s per run here) and, in its "
            "full mode, starts PyTorch's profiler, which records every Python call: Scalene's "
            "rows here include that cost on workloads that never use torch. The harness now "
            "installs torch only where a workload imports it; `python benchmarks/run_overhead.py "
            "--publish` measures that way."]
    environments = data["environments"]
    if not environments:
        return []
    if "current" in environments:
        info = environments["current"]
        torch = info["packages"].get("torch")
        return lines + [f"One environment: the interpreter running the harness "
                        f"(`{info['python']}`), torch {torch or 'not installed'}."]
    lines += ["Each workload runs in an environment with only what it needs, so every tool is "
              "measured at its best honest configuration: PyTorch is installed only where a "
              "workload imports it. (Scalene imports torch into every program it profiles when "
              "torch is importable, and its full mode then starts PyTorch's profiler; measured "
              "next to torch, Scalene pays that on every workload.) The plain run of a workload "
              "uses the same environment as the tools; accuracy and cost runs use the one "
              "without torch.", "",
              "| Environment | Location | Used for | Packages |", "|---|---|---|---|"]
    used_for = {"lean": [], "torch": []}
    for workload, info in data["workloads"].items():
        used_for.setdefault(info.get("environment", "lean"), []).append(workload)
    labelled = [t for t, info in data["tools"].items() if info.get("environment") == "torch"]
    for name, info in environments.items():
        use = used_for.get(name, [])
        stages = [stage for stage in ("accuracy", "cost") if data.get(stage)]
        text = (", ".join(use) if name == "torch" else ", ".join(
            [f"{len(use)} workload{'s' if len(use) != 1 else ''}", *stages])) if use else "-"
        if name == "torch" and labelled:
            text += ("; " if use else "") + "every workload of " + ", ".join(labelled)
        packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
        missing = [k for k, v in info["packages"].items() if not v]
        if missing:
            packages += "; not installed: " + ", ".join(missing)
        lines.append(f"| {'without torch' if name == 'lean' else 'with torch'} | "
                     f"`{info['location']}` | {text} | {packages} |")
    return lines


def to_markdown(data: dict, chart_name: str | None) -> str:
    settings, machine, summary = data["settings"], data["machine"], data["summary"]
    tools = list(data["tools"])
    profilers = [t for t in tools if t != "plain"]
    workloads = list(summary["per_workload"])
    lines = ["# Benchmarks", ""]
    if settings["smoke"]:
        lines += ["> **Smoke run** (tiny sizes, one repetition): checks that the harness works; "
                  "the numbers mean nothing.", ""]
    lines += [
        "Generated by `benchmarks/run_overhead.py`; do not edit by hand — rerun the command "
        "below. Method and workloads: [benchmarks/README.md](../benchmarks/README.md).",
        "",
        "## Overhead",
        "",
        "Wall time of each workload under each tool divided by its unprofiled (plain) wall "
        f"time, median of {settings['repetitions']} interleaved repetitions; lower is better, "
        "1.00x means no overhead. Each tool runs in the mode listed at its default sampling "
        "interval, in the environment listed (see *Environments*); its configuration — what "
        "was left at its default and why — is under *Tools* at the end. *Median* and *worst* "
        "are over the workloads.",
    ]
    for group, title in GROUPS.items():
        members = [t for t in profilers if data["tools"][t].get("group", "cpu") == group]
        if not members:
            continue
        lines += ["", f"### {title}", "",
                  "| Tool | Version | Mode | Environment | Median ratio | Worst ratio (workload) "
                  "| Failed runs |",
                  "|---|---|---|---|---|---|---|"]
        for tool in members:
            info, stats = data["tools"][tool], summary["per_tool"][tool]
            worst = (("> " if stats.get("worst_is_lower_bound") else "")
                     + f"{_ratio(stats['worst_ratio'])} ({stats['worst_workload']})"
                     if stats["worst_workload"] else "failed")
            median = (("≥ " if stats.get("median_is_lower_bound") else "")
                      + _ratio(stats["median_ratio"]))
            killed = [w for w, rows in summary["per_workload"].items()
                      if rows[tool].get("timed_out")]
            failed = ", ".join(
                f"{w} ({rows[tool]['failures'] - rows[tool].get('timed_out', 0)}/"
                f"{rows[tool]['runs']} runs)"
                for w, rows in summary["per_workload"].items()
                if rows[tool]["failures"] > rows[tool].get("timed_out", 0))
            if killed:
                failed = ", ".join(filter(None, [
                    failed, f"{len(killed)} of {len(summary['per_workload'])} workloads killed "
                            "at the time cap"]))
            failed = failed or "none"
            lines.append(f"| {tool} | {info['version']} | {info['mode']} | "
                         f"{_environment_cell(data, tool)} | {median} | {worst} | {failed} |")
    lines += ["", "Ratios include each tool's start-up and the writing of its output, as a user "
              "waits for them: on a 2-3 s workload, 50 ms of start-up is about 2%. The "
              "per-workload figures and the load average below show how noisy the run was."]
    peakline = summary["per_tool"].get("peakline")
    spreads = {w: _spread(summary["per_workload"][w]["plain"]) for w in workloads}
    known = [v for v in spreads.values() if v is not None]
    worst_spread = max(known) if known else None
    full = summary["per_tool"].get("peakline-full")
    if peakline and peakline["median_ratio"] is not None and not settings["smoke"]:
        verdict = "meets" if peakline["median_ratio"] <= CPU_ONLY_MEDIAN_TARGET else "misses"
        lines += ["", f"peakline {verdict} the CPU-only budget in DESIGN.md (median ≤ "
                      f"{CPU_ONLY_MEDIAN_TARGET:.2f}x): {peakline['median_ratio']:.3f}x."]
        if full and full["median_ratio"] is not None:
            ok = (full["median_ratio"] <= FULL_MEDIAN_TARGET
                  and full["worst_ratio"] <= FULL_WORST_TARGET)
            lines[-1] += (f" Full mode {'meets' if ok else 'misses'} its budget (median ≤ "
                          f"{FULL_MEDIAN_TARGET:.2f}x, worst ≤ {FULL_WORST_TARGET:.2f}x): "
                          f"median {full['median_ratio']:.3f}x, worst "
                          f"{full['worst_ratio']:.3f}x ({full['worst_workload']}).")
        if worst_spread is not None:
            lines[-1] += (f" The unprofiled runs of one workload varied by up to "
                          f"{worst_spread:.0%} between repetitions (column *plain spread*), "
                          "so differences smaller than that are noise.")
    lines += _environments_section(data)
    lines += ["", "### Per workload", "",
              "| Workload | plain (s) | plain spread | " + " | ".join(profilers) + " |",
              "|---|---|---|" + "---|" * len(profilers)]
    for workload in workloads:
        rows = summary["per_workload"][workload]
        cells = [f"> {rows[t]['ratio_at_least']:.1f}x (killed)" if rows[t].get("ratio_at_least")
                 else _ratio(rows[t]["ratio"]) for t in profilers]
        spread = "-" if spreads[workload] is None else f"{spreads[workload]:.0%}"
        lines.append(f"| {workload} | {_seconds(rows['plain']['median_s'])} | {spread} | "
                     + " | ".join(cells) + " |")
    lines += ["", "*plain spread*: (slowest − fastest) / median of the unprofiled runs. "
              "*> N x (killed)*: every run hit the tool's time limit (see Tools); N is a lower "
              "bound, counted as it is in the tool's median (marked ≥)."]
    if chart_name:
        lines += ["", f"![Overhead per workload]({chart_name})"]
    if data["skipped_workloads"]:
        lines += ["", "Skipped (modules missing in the benchmark interpreter): "
                  + ", ".join(f"{w} ({', '.join(m)})" for w, m in data["skipped_workloads"].items())]
    # Runs killed at a capped tool's time limit are in the tables as "> N x", not here.
    failures = [(w, t, summary["per_workload"][w][t]["error"]) for w in workloads for t in tools
                if summary["per_workload"][w][t]["failures"]
                > summary["per_workload"][w][t].get("timed_out", 0)]
    if failures:
        lines += ["", "### Failures", ""]
        for workload, tool, error in failures:
            tail = "\n".join(error.strip().splitlines()[-8:])
            lines += [f"- {tool} on {workload} ({summary['per_workload'][workload][tool]['failures']}"
                      f" of {summary['per_workload'][workload][tool]['runs']} runs; failed runs are"
                      " left out of the ratio):", "", "  ```",
                      *("  " + l for l in tail.splitlines()), "  ```"]
    if data.get("accuracy"):
        lines += _accuracy_section(data["accuracy"])
    if data.get("cost"):
        lines += _cost_section(data["cost"], data["tools"])
    lines += [
        "",
        "## Machine and run",
        "",
        f"- CPU: {machine['cpu_model']}, {machine['logical_cpus']} logical CPUs",
        f"- OS: {machine['platform']}",
        f"- Python: {machine['python']}",
        f"- Date: {machine['date_utc']}",
        f"- peakline commit: {machine['git_commit']}",
        f"- Load average (1 / 5 / 15 min) before: {machine.get('load_average_before', '?')}, "
        f"after: {machine.get('load_average_after', '?')} (the machine has "
        f"{machine['logical_cpus']} CPUs; load above what the benchmark itself adds is noise)",
        f"- Repetitions: {settings['repetitions']} (+{settings['warmup']} unrecorded warm-up "
        f"run of each workload), workload scale {settings['scale']}",
        "",
        "Command:",
        "",
        "```",
        settings["command"],
        "```",
    ]
    if settings.get("published_by"):
        lines += ["", f"(one of the runs of `{settings['published_by']}`, which regenerates "
                      "docs/benchmarks.md and docs/benchmarks-python.md with their JSON and "
                      "charts)"]
    lines += [
        "",
        "## Workloads",
        "",
    ]
    for name, info in data["workloads"].items():
        lines.append(f"- `{info['script']}`: {info['description']}")
    lines += ["", "## Tools", ""]
    for tool in profilers:
        info = data["tools"][tool]
        lines.append(f"- {tool} {info['version']}: `{info['mode']}`, sampling {info['sampling']}"
                     + (f". Configuration: {info['configuration']}"
                        if info.get("configuration") else "")
                     + (f"; capped: {info['cap']}" if info.get("cap") else ""))
    return "\n".join(lines) + "\n"


_BYTE_QUANTITIES = ("peak", "alloc_line", "peak_line")


def _mib(value) -> str:
    return f"{value / 2**20:.1f}"


def _accuracy_cell(quantity: str, cell, shown_truth=None) -> str:
    if cell is None:
        return "n/a"
    if "failed" in cell:
        return "killed (limit)" if cell["failed"].startswith("killed") else "failed"
    error, reported, truth = cell["error"], cell["reported"], cell["truth"]
    if error is None:
        return "not reported"
    if quantity == "peak":
        return f"{100 * error:.1f}% ({_mib(reported)} MiB)"
    if quantity in _BYTE_QUANTITIES:
        parts = "/".join(_mib(reported.get(k, 0)) for k in truth)
        return f"{100 * error:.1f}% ({parts})"
    parts = "/".join(f"{100 * reported.get(k, 0.0):.0f}" for k in truth)
    own = ""
    if shown_truth and max(abs(truth[k] - shown_truth.get(k, 0.0)) for k in truth) > 0.05:
        # Scored against the truth of its own run, which the tool itself changed.
        own = "; own run's truth " + "/".join(f"{100 * v:.0f}" for v in truth.values())
    return f"{error:.1f} pp ({parts}{own})"


def _accuracy_section(accuracy: dict) -> list[str]:
    from . import accuracy as acc  # the quantity names and readings live there

    results, truths = accuracy["results"], accuracy.get("truths", {})
    quantities = list(acc.QUANTITIES)
    lines = ["", "## Accuracy", "",
             "Calibration programs with known answers (`benchmarks/calibration/`), each run "
             "once under each tool that reports the quantity; the program measures its own "
             "truth while it runs. Bytes: relative error, the worst of the marked lines for "
             "per-line figures (reported MiB in brackets, in the order of the truth row). "
             "Shares: the worst error over the parts, in percentage points (reported % in "
             "brackets). *n/a*: the tool does not report that quantity.", "",
             "| Tool | " + " | ".join(acc.QUANTITIES[q] for q in quantities) + " |",
             "|---|" + "---|" * len(quantities)]
    truth_cells = []
    for quantity in quantities:
        program = next(p for p, spec in acc.PROGRAMS.items() if quantity in spec[2])
        truth = truths.get(program)
        if truth is None:
            truth_cells.append("?")
            continue
        true = acc.truth_for(quantity, truth)
        if quantity == "peak":
            truth_cells.append(f"{_mib(true)} MiB")
        elif quantity in _BYTE_QUANTITIES:
            truth_cells.append(" / ".join(f"{k} {_mib(v)}" for k, v in true.items()) + " MiB")
        else:
            truth_cells.append(" / ".join(f"{k} {100 * v:.0f}" for k, v in true.items()) + " %")
    lines.append("| *truth* | " + " | ".join(truth_cells) + " |")
    shown = {q: (acc.truth_for(q, truths[p]) if p in truths else None)
             for q in quantities
             for p in [next(p for p, spec in acc.PROGRAMS.items() if q in spec[2])]}
    for tool, cells in results.items():
        lines.append(f"| {tool} | " + " | ".join(
            _accuracy_cell(q, cells.get(q), shown[q] if q not in _BYTE_QUANTITIES else None)
            for q in quantities) + " |")
    lines += ["", "The truth row is the first tool's run; each tool is scored against the truth "
              "measured in its own run (a tool that slows one phase changes the shares: then "
              "the cell shows that run's truth too)."]
    failures = [(t, q, c["failed"]) for t, cells in results.items() for q, c in cells.items()
                if "failed" in c]
    if failures:
        lines += ["", "Failed calibration runs:", ""]
        seen = set()
        for tool, quantity, reason in failures:
            program = next(p for p, spec in acc.PROGRAMS.items() if quantity in spec[2])
            if (tool, program) in seen:
                continue
            seen.add((tool, program))
            short = " ".join(reason.split())[:300]
            lines.append(f"- {tool} on `{program}.py`: {short}")
    lines += ["", "How each tool's figure is read:", ""]
    for tool, text in accuracy.get("reading", {}).items():
        lines.append(f"- **{tool}**: {text}")
    knobs = accuracy.get("knobs", {})
    lines += ["", "Programs (argument in brackets): " + ", ".join(
        f"`{p}.py` ({k})" for p, k in knobs.items())
        + ". Each tool's figures include the interpreter's and numpy's own heap, which no "
        "tool can tell apart from the program's; that is the floor of the peak error."]
    return lines


def _cost_section(cost: dict, tools: dict) -> list[str]:
    rows, seconds = cost["rows"], cost["seconds"]
    lines = ["", "## Cost", "",
             f"One run of `calibration/long_loop.py {seconds:g}` (a {seconds:g} s loop of "
             "dict/list churn and sha256; it stops at a deadline) plain and under each tool. "
             "*Max RSS*: the peak RSS (`ru_maxrss`) of the command the harness started, "
             "as GNU time (`/usr/bin/time -f %M`) reads it for its own child — the harness "
             "does not read it itself, because `ru_maxrss` survives `exec` and a process "
             "forked from the harness would start from the harness's own peak. It is "
             "the largest process of the command's tree (py-spy is the parent of the interpreter; "
             "Scalene and Fil re-exec the interpreter; memray writes from inside it). "
             "*Output*: everything the tool wrote."
             + (f" {cost['note']}" if cost.get("note") else ""), "",
             "| Tool | Wall (s) | Max RSS (MiB) | Extra RSS (MiB) | Output |",
             "|---|---|---|---|---|"]
    for tool, row in rows.items():
        if row["failed"]:
            lines.append(f"| {tool} | {row['wall_s']:.1f} | failed | failed | failed |")
            continue
        extra = "-" if tool == "plain" or row["extra_rss_kb"] is None else \
            f"{row['extra_rss_kb'] / 1024:+.1f}"
        lines.append(f"| {tool} | {row['wall_s']:.1f} | {row['max_rss_kb'] / 1024:.1f} | "
                     f"{extra} | {_size(row['output_bytes']) if tool != 'plain' else '-'} |")
    return lines


def _size(value: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


# Other benchmark scripts keep their own sections at the end of the same report, each opened
# by a line `<!-- name:begin -->` (benchmarks/server_history.py); this harness owns the file up
# to the first such line and keeps everything from it on.
_KEPT_SECTIONS = re.compile(r"^<!-- [\w-]+:begin -->$", re.MULTILINE)


def write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = ""
    if path.exists():
        old = path.read_text()
        found = _KEPT_SECTIONS.search(old)
        if found:
            kept = "\n" + old[found.start():]
    path.write_text(text.rstrip("\n") + "\n" + kept)


def write_json(path: pathlib.Path, data: dict) -> None:
    write(path, json.dumps(data, indent=1) + "\n")
