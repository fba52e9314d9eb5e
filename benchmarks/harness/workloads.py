"""The workload registry.

A workload is a script under benchmarks/workloads/ that takes one argument, SCALE: 1.0 is
sized to run 2-4 s unprofiled on the reference machine (2 vCPU), and the work is roughly
linear in SCALE. `requires` lists modules that must import in the benchmark interpreter; a
workload whose modules are missing is skipped and the report says so.
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

    def args(self, scale: float) -> list[str]:
        return [str(self.script), repr(scale)]


def _workload(name, description, requires=(), kind="python"):
    return Workload(name, WORKLOADS_DIR / f"{name}.py", description, tuple(requires), kind)


ALL = (
    _workload("nbody", "float arithmetic in tight loops (n-body simulation)"),
    _workload("fib", "deep recursion, many short frames (naive Fibonacci)"),
    _workload("json_roundtrip", "build nested records, json.dumps + json.loads"),
    _workload("object_churn", "create and drop many small objects, dicts, lists"),
    _workload("ml_numpy", "numpy BLAS + scikit-learn Ridge and LogisticRegression",
              requires=("numpy", "sklearn"), kind="ml"),
)


def by_names(names: list[str] | None) -> list[Workload]:
    if not names:
        return list(ALL)
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
