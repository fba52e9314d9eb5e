"""The benchmark's own environments, and the description of the machine it ran on.

Each workload runs in an environment with only what it needs, so no tool is measured doing work
that the workload did not ask for. That matters: Scalene imports PyTorch into every profiled
program when PyTorch is importable (5-8 s here), and in its full mode starts PyTorch's profiler,
which records every Python call — a venv with torch next to Scalene made Scalene's CPU-only mode
look 2x slower and its full mode 10x+ slower on workloads that never touch torch. Two virtual
environments (git-ignored), each with every peer and peakline:

    benchmarks/.venv        PEERS: the tools and every workload's packages except PyTorch
    benchmarks/.venv-torch  PEERS + TORCH: only for workloads that need torch (torch_train),
                            and for tools registered to run there on purpose (tools.py)

The torch venv is created only when a selected workload or tool needs it. Both are created on
first use, peers installed once, and peakline reinstalled from the repository on every run so
the figures always describe the code in the working tree. Smoke runs use the current
interpreter (one environment, whatever it has) and whatever peakline it already has installed.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / "benchmarks" / ".venv"

# Peers and what the workloads / chart need. Unpinned on purpose: the report records versions.
PEERS = ["scalene", "py-spy", "pyinstrument", "memray", "filprofiler",
         "pyperformance", "pyperf", "docutils", "sympy",
         "numpy", "scikit-learn", "pandas", "matplotlib"]
# PyTorch, in its own environment only. Pinned: this pin installs a CPU build (~200 MB) where
# one is at hand; when it does not install, the torch workloads are skipped and the report says
# so.
TORCH = ["torch==2.13.0"]
_PEERS_MARKER = ".peakline-bench-peers"
# Distributions whose versions the report lists for each environment.
REPORTED_PACKAGES = ("torch", "numpy", "scikit-learn", "pandas", "pyperformance", "sympy",
                     "docutils")

LEAN = "lean"
WITH_TORCH = "torch"


@dataclasses.dataclass(frozen=True)
class BenchEnv:
    python: str
    bin_dir: pathlib.Path
    venv_dir: pathlib.Path | None  # None: the current interpreter (smoke mode)
    name: str = LEAN  # LEAN: no torch installed; WITH_TORCH: torch installed


@dataclasses.dataclass(frozen=True)
class BenchEnvs:
    """The environments of one run, and which one each (workload, tool) pair runs in."""

    lean: BenchEnv
    torch: BenchEnv | None  # None: PyTorch could not be installed, or nothing needs it

    def get(self, name: str) -> BenchEnv | None:
        if name == WITH_TORCH:
            return self.torch
        return self.lean

    def for_run(self, workload, tool) -> BenchEnv:
        """A workload that needs torch runs in the torch environment; so does a tool
        registered there on purpose. Everything else runs without torch."""
        wanted = getattr(tool, "environment", None) or getattr(workload, "environment", LEAN)
        env = self.get(wanted)
        if env is None:
            raise RuntimeError(f"no '{wanted}' environment in this run")
        return env

    def all(self) -> list[BenchEnv]:
        unique = {}
        for env in (self.lean, self.torch):
            if env is not None:
                unique.setdefault(env.python, env)
        return list(unique.values())


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _pip(python: str, *args: str) -> None:
    command = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    _log("$ " + " ".join(command))
    subprocess.run(command, check=True)


def current_interpreter() -> BenchEnvs:
    """One environment for everything: the interpreter running the harness (smoke runs)."""
    env = BenchEnv(python=sys.executable, bin_dir=pathlib.Path(sys.executable).parent,
                   venv_dir=None)
    return BenchEnvs(lean=env, torch=env)


def torch_venv_path(venv_dir: pathlib.Path) -> pathlib.Path:
    return venv_dir.with_name(venv_dir.name + "-torch")


def existing_venvs(venv_dir: pathlib.Path) -> BenchEnvs:
    """The environments a previous full run left (for re-rendering a report)."""
    def at(path, name):
        return BenchEnv(str(path / "bin" / "python"), path / "bin", path, name)
    torch_dir = torch_venv_path(venv_dir)
    return BenchEnvs(at(venv_dir, LEAN),
                     at(torch_dir, WITH_TORCH) if (torch_dir / "bin" / "python").exists()
                     else None)


def prepare_venvs(venv_dir: pathlib.Path, base_python: str, *, recreate: bool,
                  reinstall_peakline: bool, need_torch: bool) -> BenchEnvs:
    """benchmarks/.venv without torch; benchmarks/.venv-torch with it, when `need_torch`."""
    lean = prepare_venv(venv_dir, base_python, recreate=recreate,
                        reinstall_peakline=reinstall_peakline, name=LEAN)
    torch = None
    if need_torch:
        try:
            torch = prepare_venv(torch_venv_path(venv_dir), base_python, recreate=recreate,
                                 reinstall_peakline=reinstall_peakline, name=WITH_TORCH)
        except subprocess.CalledProcessError:
            _log(f"could not prepare {torch_venv_path(venv_dir)} ({' '.join(TORCH)}): "
                 "the workloads that need torch are skipped")
    return BenchEnvs(lean, torch)


def prepare_venv(venv_dir: pathlib.Path, base_python: str, *, recreate: bool,
                 reinstall_peakline: bool, name: str = LEAN) -> BenchEnv:
    if recreate and venv_dir.exists():
        shutil.rmtree(venv_dir)
    fresh = not (venv_dir / "bin" / "python").exists()
    if fresh:
        _log(f"creating {venv_dir} with {base_python}")
        subprocess.run([base_python, "-m", "venv", str(venv_dir)], check=True)
    env = BenchEnv(python=str(venv_dir / "bin" / "python"), bin_dir=venv_dir / "bin",
                   venv_dir=venv_dir, name=name)
    marker = venv_dir / _PEERS_MARKER
    wanted_packages = PEERS + (TORCH if name == WITH_TORCH else [])
    wanted = " ".join(wanted_packages) + "\n"
    if not marker.exists() or marker.read_text() != wanted:
        _pip(env.python, *PEERS)
        if name == WITH_TORCH:
            _pip(env.python, *TORCH)  # raises: the caller skips the torch environment
        else:
            # A venv made by an older harness held torch next to the peers: take it out.
            if subprocess.run([env.python, "-c", "import torch"],
                              capture_output=True).returncode == 0:
                subprocess.run([env.python, "-m", "pip", "uninstall", "-y", "-q", "torch"],
                               check=True)
        marker.write_text(wanted)
    if fresh or reinstall_peakline:
        # --no-deps keeps already-installed peers as they are; a fresh venv resolves deps once.
        extra = [] if fresh else ["--no-deps", "--force-reinstall"]
        # Own CMake build folder outside the work tree, so a benchmark build never races a
        # developer's build/; one per checkout, as CMake refuses a build folder configured
        # for another source tree.
        checkout = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12]
        build_dir = (pathlib.Path(tempfile.gettempdir()) / f"peakline-bench-build-{checkout}"
                     / "{wheel_tag}")
        _pip(env.python, *extra, f"--config-settings=build-dir={build_dir}", str(REPO_ROOT))
    return env


def _lscpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return "unknown"
    if out.returncode != 0:
        return "none (no commit yet)"
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"],
                           capture_output=True, text=True, timeout=30).stdout.strip()
    return out.stdout.strip() + (" + uncommitted changes" if dirty else "")


def load_average() -> str:
    """1/5/15-minute load: other work on the machine shows up here as noise in the figures."""
    try:
        return " / ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def describe(env: BenchEnv) -> dict:
    """What sets an environment apart, for the report: where it is and key package versions."""
    code = ("import importlib.metadata as m, json, sys\n"
            "out = {}\n"
            f"for name in {list(REPORTED_PACKAGES)!r}:\n"
            "    try: out[name] = m.version(name)\n"
            "    except m.PackageNotFoundError: out[name] = None\n"
            "print(json.dumps(out))")
    done = subprocess.run([env.python, "-c", code], capture_output=True, text=True)
    try:
        packages = json.loads(done.stdout)
    except ValueError:
        packages = {}
    where = (str(env.venv_dir.relative_to(REPO_ROOT)) if env.venv_dir
             and env.venv_dir.is_relative_to(REPO_ROOT) else str(env.venv_dir or env.python))
    return {"name": env.name, "python": env.python, "location": where,
            "current_interpreter": env.venv_dir is None, "packages": packages}


def machine_info(env: BenchEnv) -> dict:
    python_version = subprocess.run(
        [env.python, "-c", "import platform; print(platform.python_implementation(), "
                           "platform.python_version())"],
        capture_output=True, text=True).stdout.strip()
    return {
        "cpu_model": _lscpu_model(),
        "logical_cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": python_version,
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": _git_commit(),
    }
