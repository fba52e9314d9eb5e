"""Shared by the pyperformance wrappers: load a benchmark's module from the installed package.

pyperformance (PyPI) ships each benchmark as data-files/benchmarks/bm_NAME/run_benchmark.py,
written for pyperf.Runner, which re-runs it in worker processes. Profilers should see one plain
process, so the wrappers import the module (its `__main__` block, which builds the Runner, does
not run on import) and call the benchmark's own workload function a fixed number of times.
"""

import importlib.util
import pathlib
import sys


def benchmark_dir(name: str) -> pathlib.Path:
    spec = importlib.util.find_spec("pyperformance")
    if spec is None or not spec.origin:
        raise SystemExit("pyperformance is not installed (pip install pyperformance)")
    return pathlib.Path(spec.origin).parent / "data-files" / "benchmarks" / f"bm_{name}"


def load(name: str):
    """The module bm_NAME/run_benchmark.py, imported as pyperformance_bm_NAME."""
    path = benchmark_dir(name) / "run_benchmark.py"
    spec = importlib.util.spec_from_file_location(f"pyperformance_bm_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def iterations(per_unit_scale: int) -> int:
    """Iterations for this run: SCALE (argv[1], default 1.0) times the count sized for 1.0."""
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    return max(1, round(per_unit_scale * scale))
