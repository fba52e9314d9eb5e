"""What each stand-in in peakline/_lean.py saves the program peakline profiles.

For each standard module a stand-in replaces, a program run under `python -m peakline run`
(full mode) imports that module at its first line and reports what the import added to its
resident memory (VmRSS), how long it took and how many modules it loaded: exactly what the
profiled program would carry if peakline imported the module itself instead of using the
stand-in. The same is measured in a child process the program starts (profiled
automatically, docs/processes.md), where peakline's start-up has already loaded what a child
needs. Median of --runs runs each (default 5).

    python benchmarks/stand_ins.py [--runs 5] [--python PATH]

Output: one row per stand-in and process, as a Markdown table (docs/architecture.md,
"peakline's own memory").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

# stand-in -> the imports it saves (and, for sysconfig, the call that loads its build data)
CASES = {
    "(nothing: the noise floor)": [],
    "parse_plain_options": ["argparse"],
    "json_text": ["json"],
    "temporary_bases": ["tempfile"],
    "code_of_file, path_importer": ["runpy", "pkgutil"],
    "all_opmap": ["dis"],
    "free_threaded_build": ["sysconfig"],
}

PROGRAM = r'''
import os, sys, time

def rss_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

def measure(names):
    before = set(sys.modules)
    rss0, t0 = rss_kib(), time.perf_counter()
    for name in names:
        module = __import__(name)
        if name == "sysconfig":
            module.get_config_var("Py_GIL_DISABLED")
    t1, rss1 = time.perf_counter(), rss_kib()
    return rss1 - rss0, (t1 - t0) * 1e3, len(set(sys.modules) - before)

where, names = sys.argv[1], sys.argv[2:]
if where == "child":
    import subprocess
    subprocess.run([sys.executable, __file__, "in-child", *names], check=True)
else:
    print("RESULT", "parent" if where == "parent" else "child", *measure(names), flush=True)
'''


def run_once(python: str, program: str, where: str, names: list[str]) -> tuple[float, float, int]:
    profile = os.path.join(os.path.dirname(program), "p.json")
    out = subprocess.run([python, "-m", "peakline", "run", "--no-report", "-o", profile,
                          program, where, *names],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    row = next(line.split() for line in out.splitlines() if line.startswith("RESULT"))
    return float(row[2]), float(row[3]), int(row[4])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        program = os.path.join(folder, "imports.py")
        with open(program, "w") as f:
            f.write(PROGRAM)
        print("| stand-in | replaces | process | RSS added (KiB) | import (ms) | modules |")
        print("|---|---|---|---:|---:|---:|")
        for stand_in, names in CASES.items():
            for where in ("parent", "child"):
                runs = [run_once(args.python, program, where, names) for _ in range(args.runs)]
                rss = statistics.median(r[0] for r in runs)
                ms = statistics.median(r[1] for r in runs)
                modules = int(statistics.median(r[2] for r in runs))
                print(f"| {stand_in} | {', '.join(names) or '-'} | {where} | {rss:.0f} | "
                      f"{ms:.1f} | {modules} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
