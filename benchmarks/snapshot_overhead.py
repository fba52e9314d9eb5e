"""What periodic snapshots cost a running program (docs/benchmarks.md, "Snapshots of a running
session").

Runs one workload from benchmarks/workloads unprofiled, under `peakline run` without
snapshots (--snapshot-signal none), and with --snapshot-every at each interval given,
repetitions interleaved; prints a Markdown table of median wall times and ratios, with the
number of snapshots each run wrote (read back from the profile file while it ran).

Usage: python benchmarks/snapshot_overhead.py [--workload object_churn] [--scale 12]
                                              [--intervals 10,1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def one_run(args: list[str], outfile: Path | None) -> tuple[float, int]:
    """Wall seconds of one run, and the snapshots it wrote (the last one's sequence number,
    read once it ended: a stat every 0.2 s tells when the file changes, so the watching costs
    nothing measurable)."""
    if outfile is not None and outfile.exists():
        outfile.unlink()
    began = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    last_inode, sequence = None, 0
    while proc.poll() is None:
        if outfile is not None:
            try:
                inode = os.stat(outfile).st_ino
                if inode != last_inode:
                    last_inode = inode
                    snapshot = json.loads(outfile.read_text()).get("snapshot")
                    sequence = max(sequence, snapshot["sequence"] if snapshot else 0)
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.2)
    wall = time.perf_counter() - began
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{stderr}")
    return wall, sequence


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="object_churn")
    parser.add_argument("--scale", default="12")
    parser.add_argument("--intervals", default="10,1")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    script = WORKLOADS / f"{opts.workload}.py"
    intervals = [s.strip() for s in opts.intervals.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.json"
        peakline = [sys.executable, "-m", "peakline", "run", "--no-report", "--outfile", str(out)]
        configs = {"plain": ([sys.executable, str(script), opts.scale], None),
                   "peakline, no snapshots": ([*peakline, "--snapshot-signal", "none",
                                               str(script), opts.scale], None)}
        for every in intervals:
            configs[f"peakline --snapshot-every {every}"] = (
                [*peakline, "--snapshot-every", every, str(script), opts.scale], out)
        walls: dict[str, list[float]] = {name: [] for name in configs}
        snaps: dict[str, list[int]] = {name: [] for name in configs}
        for _ in range(opts.repeat):
            for name, (args, watch) in configs.items():
                wall, n = one_run(args, watch)
                walls[name].append(wall)
                snaps[name].append(n)
                print(f"  {name}: {wall:.2f} s, {n} snapshots", file=sys.stderr)
    base = statistics.median(walls["peakline, no snapshots"])
    plain = statistics.median(walls["plain"])
    print(f"Workload `{opts.workload}.py {opts.scale}`, median of {opts.repeat} interleaved "
          f"repetitions; load average {os.getloadavg()[0]:.1f} at the end.\n")
    print("| Run | Median wall (s) | All runs (s) | vs. no snapshots | vs. plain | "
          "Snapshots per run |")
    print("|---|---|---|---|---|---|")
    for name in configs:
        median = statistics.median(walls[name])
        runs = ", ".join(f"{w:.1f}" for w in walls[name])
        count = "-" if name in ("plain", "peakline, no snapshots") else \
            ", ".join(str(n) for n in snaps[name])
        print(f"| {name} | {median:.2f} | {runs} | {median / base:.3f}x | {median / plain:.3f}x "
              f"| {count} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
