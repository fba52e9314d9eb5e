"""The benchmark's own environment, and the description of the machine it ran on.

Full runs use a virtual environment at benchmarks/.venv (git-ignored): created on first use,
peers installed once (PEERS), and peakline reinstalled from the repository on every run so the
figures always describe the code in the working tree. Smoke runs use the current interpreter and
whatever peakline it already has installed.
"""

from __future__ import annotations

import dataclasses
import datetime
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
# PyTorch is pinned: this pin installs a CPU build (~200 MB) where one is at hand; when it does
# not install, the torch_train workload is skipped and the report says so.
OPTIONAL = ["torch==2.13.0"]
_PEERS_MARKER = ".peakline-bench-peers"


@dataclasses.dataclass(frozen=True)
class BenchEnv:
    python: str
    bin_dir: pathlib.Path
    venv_dir: pathlib.Path | None  # None: the current interpreter (smoke mode)


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _pip(python: str, *args: str) -> None:
    command = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    _log("$ " + " ".join(command))
    subprocess.run(command, check=True)


def current_interpreter() -> BenchEnv:
    return BenchEnv(python=sys.executable, bin_dir=pathlib.Path(sys.executable).parent,
                    venv_dir=None)


def prepare_venv(venv_dir: pathlib.Path, base_python: str, *, recreate: bool,
                 reinstall_peakline: bool) -> BenchEnv:
    if recreate and venv_dir.exists():
        shutil.rmtree(venv_dir)
    fresh = not (venv_dir / "bin" / "python").exists()
    if fresh:
        _log(f"creating {venv_dir} with {base_python}")
        subprocess.run([base_python, "-m", "venv", str(venv_dir)], check=True)
    env = BenchEnv(python=str(venv_dir / "bin" / "python"), bin_dir=venv_dir / "bin",
                   venv_dir=venv_dir)
    marker = venv_dir / _PEERS_MARKER
    wanted = " ".join(PEERS + OPTIONAL) + "\n"
    if not marker.exists() or marker.read_text() != wanted:
        _pip(env.python, *PEERS)
        for extra in OPTIONAL:
            try:
                _pip(env.python, extra)
            except subprocess.CalledProcessError:
                _log(f"could not install {extra}: the workloads that need it are skipped")
        marker.write_text(wanted)
    if fresh or reinstall_peakline:
        # --no-deps keeps already-installed peers as they are; a fresh venv resolves deps once.
        extra = [] if fresh else ["--no-deps", "--force-reinstall"]
        # Own CMake build folder outside the work tree, so a benchmark build never races a
        # developer's build/ (nor another checkout's benchmark build).
        build_dir = pathlib.Path(tempfile.gettempdir()) / "peakline-bench-build" / "{wheel_tag}"
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
