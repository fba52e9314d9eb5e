"""Calibration: N threads, one after another, each counting to ITER and ending.

usage: threads_lifetime.py N ITER TRUTH.json

A thread-per-task program: each thread lives from well under one sampling interval (400 x
30,000: ~0.7 ms) to a few (10 x 1,500,000: ~40 ms). TRUTH.json gets the process CPU time of
the loop (time.process_time: every thread, the main one included), which the profile's CPU
on this file's lines must match: a thread's CPU counts from its birth to its end.
"""
import json
import sys
import threading
import time

N = int(sys.argv[1])
ITER = int(sys.argv[2])


def work():
    s = 0
    for i in range(ITER):
        s += i  # LINE work


t0 = time.process_time()
for _ in range(N):
    t = threading.Thread(target=work)
    t.start()  # LINE start
    t.join()  # LINE join
loop_cpu = time.process_time() - t0
with open(sys.argv[3], "w") as f:
    json.dump({"loop_cpu_s": loop_cpu}, f)
