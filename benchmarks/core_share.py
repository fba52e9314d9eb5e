#!/usr/bin/env python3
"""Where a profiled run's CPU goes: peakline's own share of `perf` samples, per workload.

Wall-clock ratios (run_overhead.py) are what a user waits for, but on a shared VM whose speed
drifts by 20% over seconds they cannot tell 1.03x from 1.06x. This reads the direct cost
instead, inside one run, where the drift cancels: `perf record -e cpu-clock` samples every
thread of `python -m peakline run` (start-up, the program, the profile written at the end),
and the share of samples in peakline's extension module (`_core.*.so`: the hooks, the
wrappers, the tick and staging threads) is what peakline's own code cost. The share in the
kernel is printed beside the same workload's unprofiled kernel share (signal delivery and
timers are the sampling's indirect cost). Needs `perf` (Debian: linux-perf) and a core built
with its symbol table for per-function names (`-Ccmake.define.PEAKLINE_KEEP_SYMBOLS=ON
-Cinstall.strip=false`); the shares are right either way.

    python benchmarks/core_share.py --python VENV/bin/python             # full mode
    python benchmarks/core_share.py --python VENV/bin/python --cpu-only
    python benchmarks/core_share.py --python VENV/bin/python --workloads json_roundtrip --top 8

Only the interpreter given runs the workloads (peakline must be installed there); this script
itself needs only the standard library.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

WORKLOADS = pathlib.Path(__file__).resolve().parent / "workloads"
DEFAULT_WORKLOADS = "nbody,fib,json_roundtrip,object_churn"
# "  1.43%  _core.cpython-311-x86_64-linux-gnu.so  [.] peakline::hooks::Malloc<...>"
ROW = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+\[([.k])\]\s+(.*\S)\s*$")


def record(command: list[str], data: pathlib.Path, frequency: int) -> None:
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(frequency),
                    "-o", str(data), "--", *command],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)


def shares(data: pathlib.Path, symfs: str | None) -> list[tuple[float, str, str]]:
    """(percent, dso, symbol) for every row of `perf report`, percent of all samples."""
    cmd = ["perf", "report", "-i", str(data), "--no-children", "--sort", "dso,sym",
           "--stdio", "-q", "--percent-limit", "0"]
    if symfs:
        cmd.append(f"--symfs={symfs}")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            rows.append((float(m.group(1)), m.group(2), m.group(4)))
    return rows


def short(symbol: str) -> str:
    """peakline::hooks::(anonymous namespace)::Malloc<...::g_obj> -> hooks::Malloc<g_obj>"""
    symbol = symbol.replace("(anonymous namespace)::", "")
    while re.search(r"\([^()]*\)", symbol):  # argument lists, innermost first
        symbol = re.sub(r"\([^()]*\)", "", symbol)
    return re.sub(r"peakline::(?:hooks::)?(?=\w+>)", "", symbol).replace("peakline::", "")


def is_core(dso: str) -> bool:
    return dso.startswith("_core.") and dso.endswith(".so")


def is_kernel(dso: str) -> bool:
    return dso.startswith("[kernel")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with peakline installed (default: this one)")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                        help="comma list of benchmarks/workloads/*.py "
                             f"(default {DEFAULT_WORKLOADS})")
    parser.add_argument("--cpu-only", action="store_true", help="profile in CPU-only mode")
    parser.add_argument("--frequency", type=int, default=2000, help="perf samples/s (default 2000)")
    parser.add_argument("--top", type=int, default=4, help="peakline functions listed per workload")
    parser.add_argument("--symfs", help="perf's --symfs (a chroot the interpreter runs in)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the figures here")
    args = parser.parse_args()

    results = []
    with tempfile.TemporaryDirectory(prefix="peakline-share-") as tmp:
        scratch = pathlib.Path(tmp)
        for name in args.workloads.split(","):
            script = WORKLOADS / f"{name}.py"
            if not script.is_file():
                print(f"core_share: no workload {script}", file=sys.stderr)
                return 2
            mode = ["--cpu-only"] if args.cpu_only else []
            profiled = [args.python, "-m", "peakline", "run", "--no-report", *mode,
                        "-o", str(scratch / "profile.json"), str(script)]
            record([args.python, str(script)], scratch / "plain.data", args.frequency)
            record(profiled, scratch / "profiled.data", args.frequency)
            plain_rows = shares(scratch / "plain.data", args.symfs)
            rows = shares(scratch / "profiled.data", args.symfs)
            core = [r for r in rows if is_core(r[1])]
            results.append({
                "workload": name,
                "core_percent": round(sum(r[0] for r in core), 2),
                "kernel_percent": round(sum(r[0] for r in rows if is_kernel(r[1])), 2),
                "plain_kernel_percent": round(sum(r[0] for r in plain_rows if is_kernel(r[1])), 2),
                "top": [{"function": r[2], "percent": r[0]} for r in core[:args.top]],
            })

    mode = "CPU-only" if args.cpu_only else "full (CPU + memory + copies)"
    print(f"peakline's share of perf cpu-clock samples, {mode}, {args.python}\n")
    print("| Workload | peakline's code | kernel (unprofiled) | peakline's largest functions |")
    print("|---|---|---|---|")
    for r in results:
        top = "; ".join(f"{short(t['function'])} {t['percent']:.2f}%" for t in r["top"])
        print(f"| {r['workload']} | {r['core_percent']:.2f}% | {r['kernel_percent']:.2f}% "
              f"({r['plain_kernel_percent']:.2f}%) | {top} |")
    if args.json:
        args.json.write_text(json.dumps({"python": args.python, "mode": mode,
                                         "frequency": args.frequency, "workloads": results},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
