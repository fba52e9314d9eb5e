"""Calibration: three threads do 4:2:1 units of work; each measures its own CPU time.

usage: threads_421.py python|native TRUTH.json

python: pure-Python work (threads take turns on the GIL).
native: sha256 of large buffers (the GIL is released, threads run in parallel on all cores).
Each thread writes time.thread_time() spent in its work function to TRUTH.json: the truth
that the profiler's per-function CPU time is compared with.
"""
import hashlib
import json
import sys
import threading
import time

MODE = sys.argv[1]
BUF = b"\x02" * (16 * 1024 * 1024)
PY_UNIT = 12_000_000
NATIVE_UNIT = 40
truth = {}


def weight4():
    t0 = time.thread_time()
    if MODE == "python":
        x = 0
        for i in range(4 * PY_UNIT):
            x += i & 3  # LINE python4
    else:
        for _ in range(4 * NATIVE_UNIT):
            hashlib.sha256(BUF).digest()  # LINE native4
    truth["weight4"] = time.thread_time() - t0


def weight2():
    t0 = time.thread_time()
    if MODE == "python":
        x = 0
        for i in range(2 * PY_UNIT):
            x += i & 3  # LINE python2
    else:
        for _ in range(2 * NATIVE_UNIT):
            hashlib.sha256(BUF).digest()  # LINE native2
    truth["weight2"] = time.thread_time() - t0


def weight1():
    t0 = time.thread_time()
    if MODE == "python":
        x = 0
        for i in range(1 * PY_UNIT):
            x += i & 3  # LINE python1
    else:
        for _ in range(1 * NATIVE_UNIT):
            hashlib.sha256(BUF).digest()  # LINE native1
    truth["weight1"] = time.thread_time() - t0


threads = [threading.Thread(target=f, name=f.__name__) for f in (weight4, weight2, weight1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(sys.argv[2], "w") as f:
    json.dump(truth, f)
