#!/usr/bin/env python3
"""Compatibility suite: third-party tests, unprofiled and under `peakline run`, test by test.

    python benchmarks/compat/run.py                      # everything, writes docs/compatibility.md
    python benchmarks/compat/run.py --smoke              # 3 small CPython modules, full mode
    python benchmarks/compat/run.py --targets test_os,attrs --modes cpu-only
    python benchmarks/compat/run.py --python /path/to/venv/bin/python   # that venv's peakline
    python benchmarks/compat/run.py --from-json benchmarks/results/compat.json  # re-render

Each target (a CPython regression-test module, or a pinned third-party suite) runs in its own
process --baseline-runs times unprofiled and once under each peakline mode (`peakline run`:
full; `peakline run --cpu-only`). runner.py records every test's outcome; a test whose outcome
under peakline differs from the unprofiled one is listed with both outcomes and the end of its
failure text. Tests whose unprofiled runs disagree are flaky and not counted. See
benchmarks/README.md ("Compatibility suite").
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from compat import compare, report, suites, targets  # noqa: E402
from harness import environment  # noqa: E402

REPO = environment.REPO_ROOT
RUNNER = pathlib.Path(__file__).resolve().parent / "runner.py"
RESULTS = REPO / "benchmarks" / "results"
MODES = {"full": ["--no-report"], "cpu-only": ["--cpu-only", "--no-report"]}


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", "--modules", type=_csv,
                        help="comma list of targets, or the groups 'cpython' and 'suites' "
                             "(default: all): " + ", ".join(t.name for t in targets.ALL))
    parser.add_argument("--modes", type=_csv,
                        help=f"peakline modes, comma list from {', '.join(MODES)} (default: all)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter that runs the tests (and, by default, peakline)")
    parser.add_argument("--peakline",
                        help="command that starts peakline (default: 'PYTHON -m peakline')")
    parser.add_argument("--baseline-runs", type=int,
                        help="unprofiled runs of each target; tests that differ between them "
                             "are flaky (default 2; smoke 1)")
    parser.add_argument("--timeout", type=float,
                        help="seconds per run (default: each target's own, 600-1200)")
    parser.add_argument("--jobs", "-j", type=int, default=1,
                        help="runs at a time (default 1: parallel runs add timing noise)")
    parser.add_argument("--resources", type=_csv,
                        help="CPython test resources, as `python -m test -u` (default: "
                             + ",".join(targets.RESOURCES) + ")")
    parser.add_argument("--cache", type=pathlib.Path, default=suites.DEFAULT_CACHE,
                        help="where the third-party sdists and their site folders go")
    parser.add_argument("--report", type=pathlib.Path, help="Markdown output")
    parser.add_argument("--json", type=pathlib.Path, help="raw results (every run's outcomes)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"{', '.join(targets.SMOKE)}; full mode; one baseline run")
    parser.add_argument("--keep-scratch", action="store_true",
                        help="keep each run's folder (outputs, profile) and print where")
    parser.add_argument("--from-json", type=pathlib.Path, metavar="RESULTS",
                        help="run nothing: re-render the report from saved raw results")
    parser.add_argument("--quiet", action="store_true", help="no line per run on stderr")
    args = parser.parse_args(argv)
    if args.smoke:
        args.targets = args.targets or list(targets.SMOKE)
        args.modes = args.modes or ["full"]
        args.baseline_runs = args.baseline_runs or 1
    args.modes = args.modes or list(MODES)
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    args.baseline_runs = args.baseline_runs or 2
    if args.baseline_runs < 1:
        parser.error("--baseline-runs must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    args.resources = targets.RESOURCES if args.resources is None else tuple(args.resources)
    stem = "compat-smoke" if args.smoke else "compat"
    args.report = args.report or (RESULTS / f"{stem}.md" if args.smoke
                                  else REPO / "docs" / "compatibility.md")
    args.json = args.json or RESULTS / f"{stem}.json"
    args.peakline = shlex.split(args.peakline) if args.peakline else [args.python, "-m",
                                                                      "peakline"]
    return args


@dataclasses.dataclass(frozen=True)
class Job:
    target: targets.Target
    mode: str
    index: int


def _runner_args(target: targets.Target, out: pathlib.Path, resources) -> list[str]:
    argv = [str(RUNNER), "--out", str(out)]
    for folder in target.path:
        argv += ["--path", str(folder)]
    if target.kind == "cpython":
        argv += ["unittest", target.module, "--resources", ",".join(resources)]
        for pattern in target.include:
            argv += ["--include", pattern]
        for pattern in target.exclude:
            argv += ["--exclude", pattern]
    else:
        argv += ["pytest", target.tests_dir]
    return argv


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def run_job(job: Job, args, prepared: dict[str, pathlib.Path]) -> compare.RunResult:
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="peakline-compat-"))
    work = scratch / "work"
    env = dict(os.environ)
    if job.target.kind == "suite":
        base = prepared[job.target.name]
        shutil.copytree(base / "src", work, symlinks=True)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(base / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])
    else:
        work.mkdir()
    out = scratch / "outcomes.jsonl"
    profile = scratch / "profile.json"
    runner = _runner_args(job.target, out, args.resources)
    if job.mode == "plain":
        argv = [args.python, *runner]
    else:
        argv = [*args.peakline, "run", *MODES[job.mode], "--outfile", str(profile), *runner]
    limit = args.timeout or job.target.timeout_s
    started = time.perf_counter()
    with open(scratch / "stdout.txt", "wb") as stdout, open(scratch / "stderr.txt", "wb") as err:
        process = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                   stdout=stdout, stderr=err, start_new_session=True)
        timer = threading.Timer(limit, _kill_group, (process.pid,))
        timer.start()
        try:
            code = process.wait()
        finally:
            timer.cancel()
    wall = time.perf_counter() - started
    timed_out = wall >= limit * 0.99 and code == -signal.SIGKILL
    # Whatever the tests left running in their session (daemons, stuck children) goes too.
    _kill_group(process.pid)
    seconds: dict[str, float] = {}
    outcomes, details, finished = compare.read_outcomes(out, timed_out=timed_out,
                                                        seconds=seconds)
    slowest = dict(sorted(seconds.items(), key=lambda item: -item[1])[:3])
    stderr_tail = (scratch / "stderr.txt").read_text(errors="replace")[-3000:]
    profile_ok = None
    if job.mode != "plain":
        try:
            profile_ok = isinstance(json.loads(profile.read_text()), dict)
        except (OSError, ValueError):
            profile_ok = False
    if args.keep_scratch:
        print(f"[compat] kept {scratch}", file=sys.stderr)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return compare.RunResult(job.target.name, job.mode, job.index, code, wall, timed_out,
                             finished, outcomes, details, stderr_tail, profile_ok,
                             [str(a) for a in argv], slowest)


def schedule(selected: list[targets.Target], modes: list[str], baseline_runs: int) -> list[Job]:
    """Per target: the first unprofiled run, each mode, then the other unprofiled runs, so
    the baseline runs bracket the profiled ones in time."""
    jobs = []
    for target in selected:
        jobs.append(Job(target, "plain", 0))
        jobs += [Job(target, mode, 0) for mode in modes]
        jobs += [Job(target, "plain", i) for i in range(1, baseline_runs)]
    return jobs


def _versions(args, prepared: dict[str, pathlib.Path]) -> dict:
    def out(argv):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"unavailable ({error.__class__.__name__})"
        return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 \
            else "unavailable"
    return {
        "python": out([args.python, "-c", "import sys; print(sys.version.split()[0], "
                                          "sys.executable)"]),
        "peakline": out([*args.peakline, "--version"]),
        "peakline_location": out([args.python, "-c", "import os, peakline; "
                                  "print(os.path.dirname(peakline.__file__))"]),
        "suites": {name: suites.installed_versions(base / "site")
                   for name, base in prepared.items()},
    }


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    args = parse_args(raw)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Started in the background by a shell (`cmd &`), which ignores SIGINT: the tests
        # would inherit that and test Ctrl-C handling differently than from a terminal. A
        # Python-level handler is reset by exec, so every run starts with SIGINT's default.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if args.from_json:
        data = json.loads(args.from_json.read_text())
        report.write(args.report, report.to_markdown(data))
        print(f"[compat] wrote {args.report}", file=sys.stderr)
        return 0
    selected = targets.by_names(args.targets)
    probe = subprocess.run([args.python, "-c", "import test.support"], capture_output=True)
    if probe.returncode != 0 and any(t.kind == "cpython" for t in selected):
        print(f"[compat] {args.python} has no `test` package (CPython's regression tests); "
              "install it (Debian: libpython3.X-testsuite) or choose --targets suites",
              file=sys.stderr)
        return 2
    probe = subprocess.run([*args.peakline, "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"[compat] {' '.join(args.peakline)} --version failed: "
              f"{(probe.stderr or probe.stdout).strip()[-300:]}", file=sys.stderr)
        return 2
    prepared = {}
    for target in selected:
        if target.kind == "suite":
            try:
                prepared[target.name] = suites.prepare(target, args.python, args.cache)
            except (subprocess.CalledProcessError, RuntimeError, OSError) as error:
                print(f"[compat] cannot prepare {target.name}: {error}", file=sys.stderr)
                return 2
    machine = environment.machine_info(environment.BenchEnv(args.python, pathlib.Path(
        args.python).parent, None))
    machine["load_average_before"] = environment.load_average()
    jobs = schedule(selected, args.modes, args.baseline_runs)
    started = time.perf_counter()
    results: list[compare.RunResult] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_job, job, args, prepared): job for job in jobs}
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            results.append(result)
            if not args.quiet:
                tally = compare.counts(result.outcomes)
                label = result.mode + (f"#{result.index + 1}" if result.mode == "plain" else "")
                print(f"[compat] {len(results)}/{len(jobs)} {result.target:<32} {label:<9}"
                      f" {result.wall_s:7.1f} s  exit {result.exit_code}"
                      f"{' TIMEOUT' if result.timed_out else ''}  "
                      + " ".join(f"{k} {v}" for k, v in tally.items()),
                      file=sys.stderr, flush=True)
    machine["load_average_after"] = environment.load_average()
    order = {job: i for i, job in enumerate(jobs)}
    results.sort(key=lambda r: order[next(j for j in jobs if j.target.name == r.target
                                          and j.mode == r.mode and j.index == r.index)])
    data = {
        "schema": "peakline-compat",
        "version": 1,
        "settings": {
            "command": "python " + " ".join(shlex.quote(p) for p in
                                            ["benchmarks/compat/run.py", *raw]),
            "targets": [t.name for t in selected],
            "modes": args.modes,
            "baseline_runs": args.baseline_runs,
            "jobs": args.jobs,
            "resources": list(args.resources),
            "peakline_command": args.peakline,
            "smoke": args.smoke,
            "elapsed_s": round(time.perf_counter() - started, 1),
        },
        "machine": machine,
        "versions": _versions(args, prepared),
        "targets": {t.name: {"kind": t.kind, "module": t.module, "note": t.note,
                             "include": list(t.include), "exclude": list(t.exclude),
                             "distribution": t.distribution, "version": t.version,
                             "test_requirements": list(t.test_requirements)}
                    for t in selected},
        "runs": [dataclasses.asdict(r) for r in results],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    report.write(args.report, report.to_markdown(data))
    comparisons = report.comparisons(data)
    differing = [c for c in comparisons if c.differences or c.notes]
    for c in comparisons:
        if c.differences or c.notes:
            print(f"[compat] {c.target} ({c.mode}): {len(c.differences)} difference(s)"
                  + (f"; {'; '.join(c.notes)}" if c.notes else ""), file=sys.stderr)
    print(f"[compat] wrote {args.report} (raw results: {args.json}); "
          f"{data['settings']['elapsed_s']:.0f} s", file=sys.stderr)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
