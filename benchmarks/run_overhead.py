#!/usr/bin/env python3
"""peakline and its peers side by side: overhead, accuracy and cost, in one run.

    python benchmarks/run_overhead.py --publish  # everything docs/ publishes: ~60-70 min
    python benchmarks/run_overhead.py            # full run: ~40-60 min on 2 cores
    python benchmarks/run_overhead.py --smoke    # seconds: harness check, plain + peakline only

A full run creates benchmarks/.venv on first use (peers: scalene, py-spy, pyinstrument, memray,
Fil; the workloads' pyperformance, docutils, sympy, numpy, scikit-learn, pandas; and
matplotlib — no PyTorch) and, when a selected workload needs torch, benchmarks/.venv-torch (the
same plus torch), reinstalls peakline in both from this repository, then

1. overhead: runs every workload plain and under every tool, interleaved, --repetitions times;
2. accuracy: runs the calibration programs (known peak, per-line allocations, time split,
   thread shares) under each tool that reports those quantities and scores its error;
3. cost: one long loop (--cost-seconds) plain and under each tool: max RSS and output size;

and writes the Markdown report, the raw JSON and a PNG chart. --smoke uses the current
interpreter's installed peakline and writes to benchmarks/results/ unless --report/--json say
otherwise. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from harness import (accuracy, cost, environment, report, summary, timing,  # noqa: E402
                     tools, workloads)

REPO = environment.REPO_ROOT
RESULTS = REPO / "benchmarks" / "results"
PUBLISH_COMMAND = "python benchmarks/run_overhead.py --publish"
# What docs/ publishes, run one after the other by --publish (from the repository root):
# docs/benchmarks.md (the default set) and docs/benchmarks-python.md (pure-Python micro
# workloads), each with its raw JSON and chart.
PUBLISH = [
    ["--reps", "3"],
    ["--reps", "3", "--workloads", "nbody,fib,json_roundtrip,object_churn",
     "--tools", "plain,peakline,peakline-full,scalene,scalene-full,py-spy,pyinstrument,memray,"
                "fil",
     "--no-accuracy", "--no-cost", "--report", "docs/benchmarks-python.md",
     "--json", "docs/benchmarks-python.json", "--chart", "docs/benchmarks-python.png"],
]


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--publish", action="store_true",
                        help="regenerate everything docs/ publishes: docs/benchmarks.md and "
                             "docs/benchmarks-python.md with their JSON and charts (other "
                             "options given are passed to both runs)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, 1 repetition, plain + peakline, current interpreter")
    parser.add_argument("--repetitions", "--reps", type=int,
                        help="interleaved repetitions (default 5)")
    parser.add_argument("--warmup", type=int,
                        help="unrecorded plain runs of each workload first (default 1)")
    parser.add_argument("--scale", type=float, help="workload size; 1.0 = 2-4 s each (default)")
    parser.add_argument("--tools", type=_csv,
                        help=f"comma list from {','.join(tools.TOOLS)} (default: all)")
    parser.add_argument("--workloads", type=_csv,
                        help=f"comma list from {','.join(w.name for w in workloads.ALL)}")
    parser.add_argument("--venv", type=pathlib.Path, default=environment.DEFAULT_VENV,
                        help="benchmark environment without torch (default benchmarks/.venv); "
                             "the one with torch is its name + '-torch'")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that creates the venv (default: this one)")
    parser.add_argument("--no-venv", action="store_true",
                        help="use the current interpreter and its installed tools")
    parser.add_argument("--recreate-venv", action="store_true", help="delete and rebuild the venv")
    parser.add_argument("--no-reinstall", action="store_true",
                        help="keep the peakline already installed in the venv")
    parser.add_argument("--report", type=pathlib.Path, help="Markdown output")
    parser.add_argument("--json", type=pathlib.Path, help="raw results output")
    parser.add_argument("--chart", type=pathlib.Path, help="PNG chart output")
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--no-overhead", action="store_true", help="skip the overhead stage")
    parser.add_argument("--no-accuracy", action="store_true", help="skip the accuracy stage")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost stage")
    parser.add_argument("--cost-seconds", type=float,
                        help="length of the cost stage's long loop (default 30; smoke 1)")
    parser.add_argument("--accuracy-timeout", type=float, default=120.0,
                        help="seconds per calibration run (default 120)")
    parser.add_argument("--from-json", type=pathlib.Path, metavar="RESULTS",
                        help="measure nothing: re-render the report (and chart) from saved "
                             "raw results")
    args = parser.parse_args(argv)
    # Runs start in scratch folders: a relative venv path would name nothing there.
    args.venv = args.venv.absolute()
    smoke = args.smoke
    if args.repetitions is None:
        args.repetitions = 1 if smoke else 5
    if args.warmup is None:
        args.warmup = 0 if smoke else 1
    if args.scale is None:
        args.scale = 0.02 if smoke else 1.0
    if args.tools is None:
        args.tools = tools.SMOKE_TOOLS if smoke else tools.DEFAULT_TOOLS
    if args.cost_seconds is None:
        args.cost_seconds = 1.0 if smoke else 30.0
    if smoke:
        args.no_venv = True
    default_dir = RESULTS if smoke else REPO / "docs"
    stem = "smoke" if smoke else "benchmarks"
    args.report = args.report or default_dir / f"{stem}.md"
    args.json = args.json or (RESULTS / "smoke.json" if smoke
                              else REPO / "docs" / "benchmarks-overhead.json")
    args.chart = args.chart or args.report.with_name(f"{stem}-overhead.png")
    chart_given = any(a == "--chart" or a.startswith("--chart=") for a in argv)
    if smoke and not chart_given:
        args.no_chart = True
    return args


def main(argv: list[str] | None = None, *, published_by: str | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    args = parse_args(raw)
    if args.publish:
        os.chdir(REPO)  # the PUBLISH paths are relative to the repository root
        extra = [a for a in raw if a != "--publish"]
        status = 0
        for index, part in enumerate(PUBLISH):
            # peakline is built and installed once, by the first run.
            again = ["--no-reinstall"] if index and "--no-reinstall" not in extra else []
            command = PUBLISH_COMMAND + "".join(" " + shlex.quote(a) for a in extra)
            status = max(status, main([*part, *extra, *again], published_by=command))
        return status
    if args.from_json:
        data = json.loads(args.from_json.read_text())
        # Recompute the figures from the raw measurements, so summary changes apply.
        data["summary"] = summary.summarise(
            [timing.Measurement(**m) for m in data["measurements"]],
            list(data["workloads"]), list(data["tools"]))
        return _render(data, args, args.from_json,
                       (environment.current_interpreter() if args.no_venv
                        else environment.existing_venvs(args.venv)).lean)
    selected_tools = tools.by_names(args.tools)
    candidates = workloads.by_names(args.workloads, smoke=args.smoke)
    if args.no_venv:
        envs = environment.current_interpreter()
    else:
        need_torch = (any(w.environment == environment.WITH_TORCH for w in candidates)
                      or any(t.environment == environment.WITH_TORCH for t in selected_tools))
        envs = environment.prepare_venvs(args.venv, args.python, recreate=args.recreate_venv,
                                         reinstall_peakline=not args.no_reinstall,
                                         need_torch=need_torch)
    for tool in selected_tools:
        env = envs.get(tool.environment or environment.LEAN)
        if env is None:
            print(f"[bench] {tool.name} runs in the environment with torch, which could not be "
                  "prepared", file=sys.stderr)
            return 2
        missing = ((tool.needs_module and subprocess.run(
            [env.python, "-c", f"import {tool.needs_module}"], capture_output=True).returncode)
            or (tool.needs_executable and not (env.bin_dir / tool.needs_executable).exists()))
        if missing:
            print(f"[bench] {tool.name} is not installed for {env.python}"
                  + ("" if env.venv_dir else " (install it, or drop --no-venv/--smoke)"),
                  file=sys.stderr)
            return 2
    selected, skipped = [], {}
    for workload in candidates:
        workload_env = envs.get(workload.environment)
        missing = (list(workload.requires) if workload_env is None
                   else workloads.missing_requirements(workload, workload_env.python))
        if missing:
            skipped[workload.name] = missing
            print(f"[bench] skipping {workload.name}: missing {', '.join(missing)}",
                  file=sys.stderr)
        else:
            selected.append(workload)
    if not selected:
        print("[bench] no runnable workloads", file=sys.stderr)
        return 2

    broken = timing.preflight(envs, selected[0], selected_tools, timeout_s=args.timeout)
    if broken:
        for name, error in broken.items():
            print(f"[bench] preflight: {name} fails on a tiny {selected[0].name}: {error}",
                  file=sys.stderr)
        print("[bench] fix the install or leave those tools out (--tools ...); nothing measured",
              file=sys.stderr)
        return 2
    versions = {tool.name: tool.version(envs.get(tool.environment or environment.LEAN))
                for tool in selected_tools}
    env = envs.lean  # accuracy, cost, the chart and the machine description
    machine = environment.machine_info(env)
    machine["load_average_before"] = environment.load_average()
    used = {envs.for_run(w, t).python for w in selected for t in selected_tools}
    environments = {}
    for candidate in envs.all():
        if candidate.python in used or candidate is env:
            environments[candidate.name if candidate.venv_dir else "current"] = \
                environment.describe(candidate)
    measurements = [] if args.no_overhead else timing.measure(
        envs, selected, selected_tools, scale=args.scale, repetitions=args.repetitions,
        warmup=args.warmup, timeout_s=args.timeout)
    accuracy_results = None
    if not args.no_accuracy:
        # Accuracy uses each tool in its measuring mode: peakline and scalene in full mode.
        names = {t.name.removesuffix("-full") for t in selected_tools}
        accuracy_tools = [t for t in accuracy.REPORTS if t in names]
        accuracy_results = accuracy.measure(env, accuracy_tools, smoke=args.smoke,
                                            timeout_s=args.accuracy_timeout)
    cost_results = None
    if not args.no_cost:
        runs = cost.measure(envs, selected_tools, seconds=args.cost_seconds,
                            timeout_s=args.timeout)
        cost_results = {"seconds": args.cost_seconds, "rows": cost.summarise(runs)}
    machine["load_average_after"] = environment.load_average()
    figures = summary.summarise(measurements, [w.name for w in selected],
                                [t.name for t in selected_tools])
    settings = {
        "smoke": args.smoke,
        "repetitions": args.repetitions,
        "warmup": args.warmup,
        "scale": args.scale,
        "command": "python " + " ".join(
            shlex.quote(part) for part in ["benchmarks/run_overhead.py", *raw]),
        "published_by": published_by,
    }
    data = report.to_json(settings=settings, machine=machine, environments=environments,
                          tools=selected_tools,
                          tool_versions=versions, workloads=selected, skipped=skipped,
                          measurements=measurements, summary=figures,
                          accuracy=accuracy_results, cost=cost_results)
    report.write_json(args.json, data)
    _render(data, args, args.json, env)
    for name, stats in figures["per_tool"].items():
        if name != "plain":
            median = stats["median_ratio"]
            worst = stats["worst_ratio"]
            print(f"[bench] {name:<13} median {median if median is None else f'{median:.3f}x'}"
                  f"  worst {worst if worst is None else f'{worst:.3f}x'}"
                  f" ({stats['worst_workload']})", file=sys.stderr)
    must_pass = {"plain", "peakline", "peakline-full"} if not args.smoke else set(args.tools)
    broken = [(w, t) for w, rows in figures["per_workload"].items() for t, row in rows.items()
              if t in must_pass and row["failures"]]
    if accuracy_results:
        broken += [("accuracy:" + q, "peakline") for q, cell in
                   accuracy_results["results"].get("peakline", {}).items() if "failed" in cell]
    if cost_results:
        broken += [("cost", t) for t, row in cost_results["rows"].items()
                   if t in must_pass and row["failed"]]
    if broken:
        print(f"[bench] failures: {broken}", file=sys.stderr)
        return 1
    return 0


def _render(data: dict, args: argparse.Namespace, json_path: pathlib.Path, env) -> int:
    chart_name = None
    if not args.no_chart:
        args.chart.parent.mkdir(parents=True, exist_ok=True)
        drawn = subprocess.run([env.python, str(REPO / "benchmarks" / "harness" / "chart.py"),
                                str(json_path), str(args.chart)])
        if drawn.returncode == 0:
            chart_name = _relative(args.chart, args.report.parent)
        else:
            print("[bench] chart not drawn (matplotlib missing?)", file=sys.stderr)
    elif args.from_json and args.chart.exists():
        chart_name = _relative(args.chart, args.report.parent)  # the chart of the same data
    report.write(args.report, report.to_markdown(data, chart_name))
    print(f"[bench] wrote {args.report} (raw results: {json_path})", file=sys.stderr)
    return 0


def _relative(path: pathlib.Path, start: pathlib.Path) -> str:
    try:
        return str(path.resolve().relative_to(start.resolve()))
    except ValueError:
        return str(path.resolve())


if __name__ == "__main__":
    sys.exit(main())
