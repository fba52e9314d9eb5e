"""The workload registry.

A workload is a script under benchmarks/workloads/ that takes one argument, SCALE: 1.0 is
sized to run 2-4 s unprofiled on the reference machine (2 vCPU), and the work is roughly
linear in SCALE. `requires` lists modules that must import in the benchmark interpreter; a
workload whose modules are missing is skipped and the report says so. `environment` names the
environment it runs in (environment.py): "lean" (no PyTorch installed) unless it needs torch.
"""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess

WORKLOADS_DIR = pathlib.Path(__file__).resolve().parent.parent / "workloads"


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    script: pathlib.Path
    description: str
    requires: tuple[str, ...] = ()
    kind: str = "python"  # "python" (pure Python) or "ml" (numpy / scikit-learn)
    environment: str = "lean"  # "lean": no torch installed; "torch": the torch venv

    def args(self, scale: float) -> list[str]:
        return [str(self.script), repr(scale)]


def _workload(name, description, requires=(), kind="python", script=None):
    # Only a workload that imports torch gets the environment that has it.
    environment = "torch" if "torch" in requires else "lean"
    return Workload(name, WORKLOADS_DIR / f"{script or name}.py", description, tuple(requires),
                    kind, environment)


def _pyperformance(name, description, requires=()):
    # bm_NAME.py: a thin wrapper that imports pyperformance's own benchmark module (see
    # workloads/_pyperformance.py); the bm_ prefix keeps e.g. pprint.py from shadowing pprint.
    return _workload(name, description, ("pyperf", "pyperformance", *requires),
                     kind="pyperformance", script=f"bm_{name}")


# The Scalene paper's ten pyperformance benchmarks, then the ML workloads: the default set.
PYPERFORMANCE = (
    _pyperformance("async_tree", "asyncio.gather over a 6x6 tree, no work at the leaves"),
    _pyperformance("async_tree_cpu_io_mixed", "async tree: half factorial(500), half memoised sleeps"),
    _pyperformance("async_tree_io", "async tree: every leaf sleeps 50 ms (mostly waiting)"),
    _pyperformance("async_tree_memoization", "async tree: 50 ms sleeps unless memoised (90%)"),
    _pyperformance("docutils", "render reST documents to HTML5", requires=("docutils",)),
    _pyperformance("fannkuch", "permutation flips on small lists"),
    _pyperformance("mdp", "Markov decision process with Fractions"),
    _pyperformance("pprint", "PrettyPrinter.pformat of 100,000 nested tuples"),
    _pyperformance("raytrace", "pure-Python ray tracer, object-heavy"),
    _pyperformance("sympy", "symbolic expand / integrate / sum / str", requires=("sympy",)),
)
ML = (
    _workload("sklearn_linear", "LinearRegression, Ridge, LogisticRegression on 60k x 200",
              requires=("numpy", "sklearn"), kind="ml"),
    _workload("sklearn_mlp", "MLPClassifier (128, 64) on 30k x 100, 8 epochs",
              requires=("numpy", "sklearn"), kind="ml"),
    _workload("pandas_csv", "DataFrame to_csv / read_csv / groupby round trips, 200k rows",
              requires=("numpy", "pandas"), kind="ml"),
    _workload("torch_train", "PyTorch CPU training loop, 3-layer MLP, SGD",
              requires=("torch",), kind="ml"),
)
# The harness's first workloads: small, quick, standard library (+ numpy): --smoke uses them.
SMOKE = (
    _workload("nbody", "float arithmetic in tight loops (n-body simulation)"),
    _workload("fib", "deep recursion, many short frames (naive Fibonacci)"),
    _workload("json_roundtrip", "build nested records, json.dumps + json.loads"),
    _workload("object_churn", "create and drop many small objects, dicts, lists"),
    _workload("ml_numpy", "numpy BLAS + scikit-learn Ridge and LogisticRegression",
              requires=("numpy", "sklearn"), kind="ml"),
)
DEFAULT = PYPERFORMANCE + ML
ALL = DEFAULT + SMOKE


def by_names(names: list[str] | None, *, smoke: bool = False) -> list[Workload]:
    if not names:
        return list(SMOKE if smoke else DEFAULT)
    known = {w.name: w for w in ALL}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]


def missing_requirements(workload: Workload, python: str) -> list[str]:
    """Modules in `workload.requires` that do not import under `python`."""
    missing = []
    for module in workload.requires:
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
        if probe.returncode != 0:
            missing.append(module)
    return missing
