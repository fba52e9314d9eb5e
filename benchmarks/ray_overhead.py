#!/usr/bin/env python3
"""peakline's overhead on a Ray workload: the same program unprofiled and under `peakline run`
(workers profiled through the job's runtime_env, docs/distributed.md "Ray"), in alternating
pairs.

    python benchmarks/ray_overhead.py --pairs 3 --tasks 40

The program starts a local Ray cluster (2 CPUs), warms both workers up, then runs --tasks tasks
of 0.1 s CPU each and prints how long they took, measured inside the program (so the
cluster's start and shutdown, which dominate a short run, are reported apart: "whole run").
Prints one row per run and the ratios of the medians. Needs ray and peakline installed in the
interpreter that runs it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = """\
import sys, time
import ray

@ray.remote
def burn(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:
        total += sum(i * i for i in range(200))
    return total

ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
         log_to_driver=False)
ray.get([burn.remote(0.05) for _ in range(4)])  # both workers started and warm
start = time.perf_counter()
ray.get([burn.remote(0.1) for _ in range(int(sys.argv[1]))])
print(f"tasks_s {time.perf_counter() - start:.3f}", flush=True)
"""


def run_once(profiled: bool, tasks: int, directory: str) -> tuple[float, float]:
    script = os.path.join(directory, "ray_workload.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(PROGRAM)
    command = [sys.executable, script, str(tasks)]
    if profiled:
        command = [sys.executable, "-m", "peakline", "run", "--no-report", "--outfile",
                   os.path.join(directory, "profile.json"), script, str(tasks)]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=directory)
    whole = time.perf_counter() - start
    found = re.search(r"tasks_s ([0-9.]+)", proc.stdout)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"run failed ({'profiled' if profiled else 'plain'}): "
                         f"{proc.stderr[-2000:]}")
    return float(found.group(1)), whole


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=40)
    args = parser.parse_args()
    rows: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(args.pairs):
            for profiled in (False, True):
                tasks_s, whole_s = run_once(profiled, args.tasks, directory)
                rows[profiled].append((tasks_s, whole_s))
                print(f"{'peakline run' if profiled else 'unprofiled':13} tasks {tasks_s:6.2f} s"
                      f"  whole run {whole_s:6.2f} s", flush=True)
    for index, what in ((0, "tasks"), (1, "whole run")):
        plain = statistics.median(r[index] for r in rows[False])
        profiled = statistics.median(r[index] for r in rows[True])
        print(f"{what}: median {profiled:.2f} s profiled / {plain:.2f} s unprofiled = "
              f"{profiled / plain:.2f} ({args.pairs} pairs, {args.tasks} tasks of 0.1 s CPU)")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
