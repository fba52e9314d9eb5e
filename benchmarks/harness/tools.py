"""The tool registry: how each profiler wraps one run of a workload.

Every tool builds an argv from (environment, workload argv, scratch directory). Output files go
to the scratch directory, which the runner measures (output size) and then deletes, so nothing
piles up between repetitions. Each tool runs at its default sampling interval (listed in
`sampling`), so the figures compare what users get out of the box, in two groups: CPU-only
modes (peakline --cpu-only, scalene --cpu-only, py-spy, pyinstrument) and full / memory modes
(peakline and scalene by default: CPU + memory; memray and Fil: memory only).

Each tool is measured in its best honest configuration: the mode a user gets by default, in an
environment with only what the workload needs (environment.py: PyTorch only for the workloads
that import it — Scalene imports torch into every program it profiles when torch is installed,
and its full mode then starts PyTorch's profiler). `configuration` says what each row used and
which of the tool's options were left at their default (memray's --native, py-spy's --idle and
--nonblocking, Fil's OOM detection); `environment` = "torch" registers a tool to run in the
torch environment for every workload, for a separately labelled row that shows that cost.

Adding a tool or a mode is one entry in TOOLS.
"""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
from typing import Callable, Protocol


class Env(Protocol):
    python: str  # the interpreter that runs the workloads
    bin_dir: pathlib.Path  # where the tools' console scripts live


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    mode: str
    sampling: str
    build: Callable[[Env, list[str], pathlib.Path], list[str]]
    version: Callable[[Env], str]
    # Python modules / executables the tool needs in the environment (for --smoke checks).
    needs_module: str | None = None
    needs_executable: str | None = None
    group: str = "cpu"  # "cpu": CPU-only mode; "full": memory (and CPU) profiling
    # A tool that is pathologically slow here can be capped: measured in the first
    # `max_repetitions` repetitions only, each run killed after `run_timeout_s` (the report
    # then shows a lower bound, "> N x"). None: no cap.
    max_repetitions: int | None = None
    run_timeout_s: float | None = None
    # What the row used: options, what was left at its default and why this is the tool's
    # best honest configuration (shown in the report).
    configuration: str = ""
    # None: the workload's own environment (torch only where the workload imports it);
    # "torch": the torch environment for every workload (labelled rows, not the default set).
    environment: str | None = None


def _run_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({error.__class__.__name__})"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0].strip() if out.returncode == 0 and text else "unavailable"


def _pip_version(env, distribution: str) -> str:
    code = f"import importlib.metadata as m; print('{distribution}', m.version('{distribution}'))"
    return _run_version([env.python, "-c", code])


def _memray_version(env) -> str:
    return _pip_version(env, "memray")


def _plain(env, args, scratch):
    return [env.python, *args]


def _peakline(env, args, scratch):
    return [env.python, "-m", "peakline", "run", "--cpu-only", "--no-report",
            "--outfile", str(scratch / "peakline.json"), *args]


def _peakline_full(env, args, scratch):
    # Everything peakline measures by default: CPU, memory and copy volume (GPU: none here).
    return [env.python, "-m", "peakline", "run", "--no-report",
            "--outfile", str(scratch / "peakline.json"), *args]


def _scalene_is_v2(env) -> bool:
    """Scalene 2.x has subcommands (`scalene run ...`); 1.x takes flags directly."""
    probe = subprocess.run([str(env.bin_dir / "scalene"), "--help"], capture_output=True,
                           text=True, timeout=60)
    return "{run,view}" in probe.stdout


_scalene_v2_cache: dict[str, bool] = {}


def _scalene(env, args, scratch):
    key = str(env.bin_dir)
    if key not in _scalene_v2_cache:
        _scalene_v2_cache[key] = _scalene_is_v2(env)
    script, *script_args = args
    separator = ["---", *script_args] if script_args else []
    if _scalene_v2_cache[key]:
        return [str(env.bin_dir / "scalene"), "run", "--cpu-only",
                "-o", str(scratch / "scalene.json"), script, *separator]
    return [str(env.bin_dir / "scalene"), "--cpu-only", "--cli", "--no-browser",
            "--outfile", str(scratch / "scalene.txt"), script, *separator]


def _scalene_full(env, args, scratch):
    argv = _scalene(env, args, scratch)
    return [part for part in argv if part != "--cpu-only"]


def _memray(env, args, scratch):
    # Default: every allocation through malloc & co. and pymalloc arenas, Python stacks.
    return [str(env.bin_dir / "memray"), "run", "--force", "--quiet",
            "--output", str(scratch / "memray.bin"), *args]


def _fil(env, args, scratch):
    return [str(env.bin_dir / "fil-profile"), "-o", str(scratch / "fil-result"), "--no-browser",
            "run", *args]


def _py_spy(env, args, scratch):
    # Default mode (blocking: py-spy pauses the target while it reads each sample).
    return [str(env.bin_dir / "py-spy"), "record", "--output", str(scratch / "py-spy.svg"),
            "--", env.python, *args]


def _pyinstrument(env, args, scratch):
    return [str(env.bin_dir / "pyinstrument"), "--outfile", str(scratch / "pyinstrument.txt"),
            *args]


def _peakline_version(env) -> str:
    return _run_version([env.python, "-m", "peakline", "--version"])


def _scalene_version(env) -> str:
    return _run_version([str(env.bin_dir / "scalene"), "--version"])


_SCALENE_TORCH_NOTE = (
    "Every workload runs in the environment with PyTorch installed: Scalene then imports torch "
    "into each profiled program (5-8 s here) and, in full mode, records every Python call with "
    "PyTorch's profiler. Shown separately to make that cost visible; not Scalene's best "
    "configuration for programs that do not use torch.")

TOOLS = {
    tool.name: tool
    for tool in (
        Tool("plain", "unprofiled", "-", _plain,
             lambda env: _run_version([env.python, "--version"]),
             configuration="`python script.py`"),
        Tool("peakline", "run --cpu-only --no-report", "10 ms of each thread's CPU time",
             _peakline, _peakline_version, needs_module="peakline",
             configuration="CPU only (no allocation or copy hooks), default interval"),
        Tool("peakline-full", "run --no-report (CPU + memory + copy)",
             "10 ms CPU, 512 KiB allocation sampling (defaults)", _peakline_full,
             _peakline_version, needs_module="peakline", group="full",
             configuration="defaults: CPU, sampled allocations and copies (GPU: none here)"),
        Tool("scalene", "run --cpu-only", "10 ms (default)", _scalene, _scalene_version,
             needs_executable="scalene",
             configuration="CPU only (Python / native / system time), default interval; "
                           "PyTorch installed only for workloads that import it"),
        Tool("scalene-full", "run (CPU + memory)", "10 ms CPU, allocation sampling (default)",
             _scalene_full, _scalene_version, needs_executable="scalene", group="full",
             # Capped: on the asyncio workloads a run of a 3 s program takes over 120 s here
             # even without torch in the environment (the CPU-only mode takes 13 s on
             # async_tree at a tenth of the size), so it is measured in the first repetition
             # only and killed after 60 s (the report then shows "> N x").
             max_repetitions=1, run_timeout_s=60.0,
             configuration="defaults: CPU + memory (sampled allocations, copy volume); "
                           "PyTorch installed only for workloads that import it"),
        Tool("memray", "run (Python stacks)", "every allocation", _memray,
             lambda env: _memray_version(env), needs_executable="memray", group="full",
             configuration="defaults: every malloc-family allocation with its Python stack; "
                           "no --native (native stacks cost more), no "
                           "--trace-python-allocators (pymalloc seen by its arenas)"),
        Tool("fil", "fil-profile run", "every allocation (peak only)", _fil,
             lambda env: _pip_version(env, "filprofiler"), needs_executable="fil-profile",
             group="full",
             configuration="defaults: every allocation, peak only; out-of-memory detection "
                           "on (its default)"),
        Tool("py-spy", "record (default: blocking)", "100 Hz (default)", _py_spy,
             lambda env: _run_version([str(env.bin_dir / "py-spy"), "--version"]),
             needs_executable="py-spy",
             configuration="defaults: blocking (pauses the program while it reads a sample; "
                           "--nonblocking is cheaper and less exact), on-CPU samples only "
                           "(no --idle), no --native"),
        Tool("pyinstrument", "default (statistical)", "1 ms (default)", _pyinstrument,
             lambda env: _run_version([str(env.bin_dir / "pyinstrument"), "--version"]),
             needs_executable="pyinstrument",
             configuration="defaults: wall-clock sampling of the main thread, 1 ms, "
                           "text report"),
        # Not in the default set: Scalene as measured in an environment that has PyTorch.
        Tool("scalene-torchenv", "run --cpu-only (torch installed)", "10 ms (default)",
             _scalene, _scalene_version, needs_executable="scalene", environment="torch",
             configuration=_SCALENE_TORCH_NOTE),
        Tool("scalene-full-torchenv", "run (CPU + memory; torch installed)",
             "10 ms CPU, allocation sampling (default)", _scalene_full, _scalene_version,
             needs_executable="scalene", group="full", environment="torch",
             # Scalene's full mode with torch installed ran 50-200x slower than plain here
             # (a 0.2 s loop: 28 s): one repetition, killed at 25 s, bounds a run's length.
             max_repetitions=1, run_timeout_s=25.0, configuration=_SCALENE_TORCH_NOTE),
    )
}

DEFAULT_TOOLS = ["plain", "peakline", "scalene", "py-spy", "pyinstrument",
                 "peakline-full", "scalene-full", "memray", "fil"]
SMOKE_TOOLS = ["plain", "peakline"]


def by_names(names: list[str]) -> list[Tool]:
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        raise SystemExit(f"unknown tool(s): {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    if "plain" not in names:
        names = ["plain", *names]  # ratios need the baseline
    return [TOOLS[n] for n in names]
