"""Calibration: three threads do 4:2:1 units of work; each measures its own CPU time.

usage: threads_421.py python|native|short TRUTH.json

python: pure-Python work (threads take turns on the GIL).
native: sha256 of large buffers (the GIL is released, threads run in parallel on all cores).
short: the python work cut into rounds, each in three new threads that live a few sampling
intervals (~12, 24 and 48 ms of CPU): a thread's CPU must count from its birth to its end.
Each thread adds time.thread_time() spent in its work function to TRUTH.json: the truth
that the profiler's per-function CPU time is compared with.
"""
import hashlib
import json
import sys
import threading
import time

MODE = sys.argv[1]
BUF = b"\x02" * (16 * 1024 * 1024)
PY_UNIT = 12_000_000 if MODE == "python" else 300_000
NATIVE_UNIT = 40
ROUNDS = 10 if MODE == "short" else 1
truth = {"weight4": 0.0, "weight2": 0.0, "weight1": 0.0}


def weight4():
    t0 = time.thread_time()
    if MODE != "native":
        x = 0
        for i in range(4 * PY_UNIT):
            x += i & 3  # LINE python4
    else:
        for _ in range(4 * NATIVE_UNIT):
            hashlib.sha256(BUF).digest()  # LINE native4
    truth["weight4"] += time.thread_time() - t0


def weight2():
    t0 = time.thread_time()
    if MODE != "native":
        x = 0
        for i in range(2 * PY_UNIT):
            x += i & 3  # LINE python2
    else:
        for _ in range(2 * NATIVE_UNIT):
            hashlib.sha256(BUF).digest()  # LINE native2
    truth["weight2"] += time.thread_time() - t0


def weight1():
    t0 = time.thread_time()
    if MODE != "native":
        x = 0
        for i in range(1 * PY_UNIT):
            x += i & 3  # LINE python1
    else:
        for _ in range(1 * NATIVE_UNIT):
            hashlib.sha256(BUF).digest()  # LINE native1
    truth["weight1"] += time.thread_time() - t0


for _ in range(ROUNDS):
    threads = [threading.Thread(target=f, name=f.__name__) for f in (weight4, weight2, weight1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
with open(sys.argv[2], "w") as f:
    json.dump(truth, f)
