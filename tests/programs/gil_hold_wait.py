"""Calibration: wait time inside a bytecode that holds the GIL.

usage: gil_hold_wait.py CPU TRUTH.json

The main thread pins itself to CPU, which the test keeps busy with another process, so the
main thread waits for the CPU about half of the time. `accum += bytes(...)` is one BINARY_OP
that copies a growing buffer with the GIL held; the next line is trivial. TRUTH.json gets the
loop's off-CPU time (wall minus the thread's CPU time): the wait that belongs to the copy
line.
"""
import json
import os
import sys
import time

os.sched_setaffinity(0, {int(sys.argv[1])})  # this thread only


def main():
    accum = bytes()
    for i in range(20):
        accum += bytes(10 * 1024 * 1024)  # LINE copy
        bogus = None  # LINE trivial


w0, c0 = time.perf_counter(), time.thread_time()
main()
off = (time.perf_counter() - w0) - (time.thread_time() - c0)
with open(sys.argv[2], "w") as f:
    json.dump({"off_cpu_s": off}, f)
