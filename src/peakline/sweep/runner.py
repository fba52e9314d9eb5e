"""Runs a sweep: one ``peakline run`` process per combination of the varied values (times
``--repeat``), one after another so timings stay honest, then the fits.

Each run is ``python -m peakline run --no-report --outfile RUNS/run-NNN.json [run options]
(script | -m module) args``, with the values as environment variables (``--as env``) or
substituted for ``{NAME}`` in the arguments (``--as arg``). The program's stdout and stderr go
to ``RUNS/run-NNN.log``; the terminal shows progress. The run gets its own session (process
group), so Ctrl-C reaches the sweep only: the sweep forwards SIGINT to the run, waits for its
profile to be written, records it as "interrupted" and stops, keeping every finished run.

The sweep file is rewritten (atomically) after every run, so a sweep killed outright still
leaves the runs it finished; the fits are computed at the end (and ``peakline view``
computes them for a sweep file that has none).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

from peakline.errors import PeaklineError, ProfileFormatError, UsageError
from peakline.runner import Target
from peakline.sweep import params as _params
from peakline.sweep.analysis import compute_fits
from peakline.sweep.sweep_file import write_sweep

# How long an interrupted run gets to write its profile before it is terminated, then killed.
INTERRUPT_GRACE_S = 30.0
TERMINATE_GRACE_S = 5.0


class SweepFailed(PeaklineError):
    """Every run failed: nothing to fit. The sweep file still records each failure."""

    exit_code = 1


@dataclass
class Plan:
    target: Target
    vary: list[_params.Vary]
    targets: dict[str, _params.Number]
    as_arg: bool
    repeat: int
    run_options: list[str]
    outfile: str
    runs_dir: str
    combos: list[dict[str, _params.Number]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.combos:
            self.combos = [c for c in _params.grid(self.vary) for _ in range(self.repeat)]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def _estimate_left(done: list[tuple[dict, float]], left: list[dict]) -> float | None:
    """Seconds still to go: each remaining run's duration from a power law of the product of
    its values, fitted on the successful finished runs (log-log least squares, exponent
    between 0 and 3; the mean without two distinct sizes). A run that failed at once says
    nothing about how long the others take."""
    if not done or not left:
        return None

    def size(combo: dict) -> float:
        return math.log(math.prod(float(v) for v in combo.values()))

    xs = [size(c) for c, _ in done]
    ys = [math.log(max(d, 1e-3)) for _, d in done]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = 0.0 if sxx <= 1e-12 else \
        min(3.0, max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx))
    return sum(math.exp(mean_y + slope * (size(c) - mean_x)) for c in left)


def _last_words(log_path: str) -> str:
    """The last non-empty line of a run's output (the exception, usually), for one-line errors."""
    try:
        with open(log_path, "rb") as stream:
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - 8192))
            tail = stream.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in tail.splitlines()
             if ln.strip() and not ln.startswith("peakline: profile written")]
    return lines[-1][:200] if lines else ""


# Signals that stop the sweep cleanly. SIGHUP too: the runs are in sessions of their own, so
# closing the terminal would otherwise leave the running program orphaned.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stop(Exception):
    """Ctrl-C or SIGTERM reached the sweep."""


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    raise _Stop(signum)


def _command(plan: Plan, combo: dict, profile_path: str) -> list[str]:
    args = _params.substitute(plan.target.args, combo) if plan.as_arg else plan.target.args
    what = ["-m", plan.target.module] if plan.target.module else [plan.target.script]
    return [sys.executable, "-m", "peakline", "run", "--no-report", "--outfile", profile_path,
            *plan.run_options, *what, *args]


def _run_one(plan: Plan, index: int, combo: dict, repeat: int) -> dict[str, Any]:
    stem = f"run-{index + 1:03d}"
    profile_path = os.path.join(plan.runs_dir, stem + ".json")
    log_path = os.path.join(plan.runs_dir, stem + ".log")
    if os.path.exists(profile_path):  # from an earlier sweep to the same file
        os.unlink(profile_path)
    env = dict(os.environ)
    if not plan.as_arg:
        env.update({k: _params.format_value(v) for k, v in combo.items()})
    record: dict[str, Any] = {"index": index, "params": dict(combo), "repeat": repeat,
                              "status": "failed", "exit_code": None, "error": None,
                              "profile": None, "log": _relative(log_path, plan.outfile)}
    started = time.perf_counter()
    interrupted = None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(_command(plan, combo, profile_path), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            proc.wait()
        except _Stop as stop:
            interrupted = stop
            _stop_child(proc)
    record["wall_s"] = time.perf_counter() - started
    code = proc.returncode
    record["exit_code"] = code
    if interrupted is not None:
        record["status"] = "interrupted"
    elif code == 0:
        record["status"] = "ok"
    elif code < 0:
        record["status"] = "killed"
    if os.path.exists(profile_path):
        record["profile"] = _relative(profile_path, plan.outfile)
        try:
            from peakline.model.profile_file import read_profile
            from peakline.sweep.summary import summarise
            profile = read_profile(profile_path)
            summary = summarise(profile)
            record["summary"] = summary
            for key in ("peak_bytes", "peak_rss_bytes", "cpu_s", "elapsed_s", "gpu_peak_bytes"):
                record[key] = summary.get(key)
        except ProfileFormatError as error:
            record["status"] = "failed" if record["status"] == "ok" else record["status"]
            record["error"] = f"unreadable profile: {error}"
    elif record["status"] == "ok":
        record["status"] = "failed"
        record["error"] = "no profile was written"
    if record["status"] != "ok" and record["error"] is None:
        words = _last_words(log_path)
        how = (f"killed by signal {-code}" if code is not None and code < 0
               else "interrupted" if interrupted is not None else f"exit status {code}")
        record["error"] = f"{how}: {words}" if words else how
    if interrupted is not None:
        raise _Interrupted(record, interrupted.args[0])
    return record


class _Interrupted(Exception):
    def __init__(self, record: dict, signum: int) -> None:
        super().__init__(signum)
        self.record = record
        self.signum = signum


def _stop_child(proc: subprocess.Popen) -> None:
    """Ctrl-C for the run as for a program on a terminal: SIGINT, time to write its profile,
    then SIGTERM, then SIGKILL. Further signals to the sweep meanwhile are ignored."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in _STOP_SIGNALS}
    try:
        for sig, grace in ((signal.SIGINT, INTERRUPT_GRACE_S), (signal.SIGTERM, TERMINATE_GRACE_S),
                           (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _relative(path: str, outfile: str) -> str:
    return os.path.relpath(path, os.path.dirname(os.path.abspath(outfile)))


def sweep_document(plan: Plan, runs: list[dict], started_at: str, elapsed_s: float,
                   complete: bool, fits: dict | None) -> dict[str, Any]:
    return {
        "program": plan.target.display,
        "argv": [plan.target.display, *plan.target.args],
        "as": "arg" if plan.as_arg else "env",
        "run_options": list(plan.run_options),
        "vary": [{"name": v.name, "values": list(v.values)} for v in plan.vary],
        "target": dict(plan.targets) or None,
        "repeat": plan.repeat,
        "started_at": started_at,
        "elapsed_s": elapsed_s,
        "complete": complete,
        "runs": runs,
        "fits": fits or {"program": {}, "lines": [], "functions": [], "phases": []},
    }


def run_sweep(plan: Plan, progress: TextIO) -> tuple[dict[str, Any], int]:
    """Run every combination; returns (the sweep document, the exit status: 0 all runs
    succeeded, 1 some failed, 128 + the signal when stopped: 130 Ctrl-C, 143 SIGTERM,
    129 SIGHUP). Every run failing
    raises SweepFailed after the sweep file is written."""
    try:
        os.makedirs(plan.runs_dir, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create {plan.runs_dir}: {error.strerror or error}") from None
    started_at = _now()
    t0 = time.perf_counter()
    runs: list[dict] = []
    done: list[tuple[dict, float]] = []
    previous = {s: signal.signal(s, _on_signal) for s in _STOP_SIGNALS}
    stopped: int | None = None
    total = len(plan.combos)
    seen: dict[tuple, int] = {}
    try:
        for i, combo in enumerate(plan.combos):
            key = tuple(combo.items())
            repeat = seen.get(key, 0)
            seen[key] = repeat + 1
            head = f"peakline sweep: [{i + 1}/{total}] {_params.label(combo)}"
            print(f"{head} ...", file=progress, flush=True)
            try:
                record = _run_one(plan, i, combo, repeat)
            except _Interrupted as stop:
                runs.append(stop.record)
                stopped = stop.signum
                print(f"{head} interrupted; stopping (finished runs are kept)", file=progress,
                      flush=True)
                break
            runs.append(record)
            if record["status"] == "ok":
                done.append((combo, record["wall_s"]))
            elapsed = time.perf_counter() - t0
            left = _estimate_left(done, plan.combos[i + 1:])
            status = _describe_run(record)
            eta = f", about {_clock(left)} left" if left is not None else ""
            print(f"{head} {status} · elapsed {_clock(elapsed)}{eta}", file=progress, flush=True)
            _save(sweep_document(plan, runs, started_at, elapsed, False, None), plan.outfile)
    except _Stop as stop:  # between two runs
        stopped = stop.args[0]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    fits = compute_fits([{"name": v.name, "values": list(v.values)} for v in plan.vary], runs,
                        dict(plan.targets))
    document = sweep_document(plan, runs, started_at, time.perf_counter() - t0,
                              stopped is None, fits)
    _save(document, plan.outfile)
    failed = [r for r in runs if r["status"] != "ok"]
    if runs and len(failed) == len(runs) and stopped is None:
        first = failed[0]
        raise SweepFailed(f"every run failed; run 1 ({_params.label(first['params'])}): "
                          f"{first['error']} (log: {first['log']}; sweep file: {plan.outfile})")
    if stopped is not None:
        return document, 128 + stopped
    return document, 1 if failed else 0


def _save(document: dict, path: str) -> None:
    try:
        write_sweep(document, path)
    except OSError as error:
        raise PeaklineError(f"cannot write the sweep file {path}: "
                            f"{error.strerror or error}") from None


def _describe_run(record: dict) -> str:
    from peakline.reporters._format import human_bytes
    if record["status"] == "ok":
        peak = record.get("peak_bytes")
        memory = f", peak {human_bytes(peak)}" if peak is not None else ""
        return f"ok in {record['wall_s']:.1f} s{memory}"
    return f"{record['status'].upper()} ({record['error']})"
