"""Calibration: run delay (runnable, not scheduled) versus wait (sleeping).

usage: run_delay.py CPU SECONDS TRUTH.json

Two threads run for SECONDS of wall time each, at the same time. "loop" pins itself to CPU,
which the test keeps busy with N other processes pinned there too, and spins in pure Python:
it is always runnable, so it runs about 1/(N+1) of the time and waits for the CPU the rest:
run delay ~ SECONDS * N/(N+1), wait ~ 0. "sleeper" sleeps: wait ~ SECONDS, run delay ~ 0.
TRUTH.json gets each thread's wall, CPU and the kernel's run delay over its work
(/proc/thread-self/schedstat, second field), read by the thread itself.
"""
import json
import os
import sys
import threading
import time

CPU, SECONDS, TRUTH = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
truth = {}


def run_delay_s():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def measured(name, work):
    w0, c0, d0 = time.perf_counter(), time.thread_time(), run_delay_s()
    work()
    truth[name] = {"wall_s": time.perf_counter() - w0, "cpu_s": time.thread_time() - c0,
                   "run_delay_s": run_delay_s() - d0}


def spin():
    end = time.perf_counter() + SECONDS
    x = 0
    while time.perf_counter() < end:  # LINE spin
        x += 1  # LINE spin_body


def loop():
    os.sched_setaffinity(0, {CPU})  # this thread only
    measured("loop", spin)


def sleeper():
    measured("sleeper", lambda: time.sleep(SECONDS))  # LINE sleep


threads = [threading.Thread(target=loop, name="loop"),
           threading.Thread(target=sleeper, name="sleeper")]
for t in threads:
    t.start()
for t in threads:
    t.join()  # LINE join
with open(TRUTH, "w") as f:
    json.dump(truth, f)
