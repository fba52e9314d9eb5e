"""Known thread CPU shares: three threads doing pure-Python work in the ratio 4:2:1, one
function each (work_4, work_2, work_1), all started together.

Truth: each thread's own CPU time (time.thread_time() at its end); shares of their sum.
"""

import threading
import time

import _truth

UNIT = int(_truth.seconds(1.0) * 15_000_000)  # loop iterations per unit of work
cpu = {}


# Each worker has its own loop (no shared helper), so per-line and per-function tools can
# tell the threads apart as well as per-thread ones.
def work_4():
    total = 0
    for i in range(4 * UNIT):
        total += i % 7
    cpu["work_4"] = time.thread_time()


def work_2():
    total = 0
    for i in range(2 * UNIT):
        total += i % 7
    cpu["work_2"] = time.thread_time()


def work_1():
    total = 0
    for i in range(1 * UNIT):
        total += i % 7
    cpu["work_1"] = time.thread_time()


threads = [threading.Thread(target=f, name=f.__name__) for f in (work_4, work_2, work_1)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
total = sum(cpu.values())
_truth.write({"thread_cpu_s": cpu, "share": {k: v / total for k, v in cpu.items()}})
