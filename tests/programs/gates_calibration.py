"""Calibration for budgets and comparisons (tests/python/test_gates*.py): known exact peaks.

usage: gates_calibration.py [--hold MIB] [--grow PCT] [--leak] [--spin SECONDS] [--exit N]

Holds 200 MiB (one numpy array, line "hold"; --hold changes the size) plus, with --grow, PCT%
more on line "grow"; with --leak, line "leak" keeps 1 MiB every 10 ms for 1.6 s; --spin burns SECONDS of CPU time
on line "spin". Phases: "load", "fit".
"""
import sys
import time

import numpy as np

import peakline

MiB = 1 << 20
args = sys.argv[1:]
grow = float(args[args.index("--grow") + 1]) if "--grow" in args else 0.0
hold = int(args[args.index("--hold") + 1]) if "--hold" in args else 200

with peakline.phase("load"):
    held = np.ones(hold * MiB // 8)  # LINE hold
    extra = np.ones(int(hold * MiB * grow / 100) // 8) if grow else None  # LINE grow

with peakline.phase("fit"):
    leak = []
    if "--leak" in args:
        for _ in range(160):
            leak.append(np.ones(MiB // 8))  # LINE leak
            time.sleep(0.01)
    total = float(held.sum())
    if "--spin" in args:
        until = time.process_time() + float(args[args.index("--spin") + 1])
        while time.process_time() < until:  # LINE spin
            pass

del held, extra
print("done", total, flush=True)
if "--exit" in args:
    sys.exit(int(args[args.index("--exit") + 1]))
