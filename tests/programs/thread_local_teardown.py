"""Calibration: CPU a thread spends after its function returned, tearing itself down.

usage: thread_local_teardown.py N BURN_S TRUTH.json

N threads, one after another, each keeps a `Connection` in a threading.local; when the thread
ends, the interpreter clears its thread-local data and the object's __del__ burns BURN_S of
CPU (a connection closing, a buffer flushed). That runs after threading's bootstrap is done
with the thread: no sample sees it. TRUTH.json gets the process CPU time of the loop (every
thread, the main one included) and the CPU the __del__ calls burned, by their own clocks.
"""
import json
import sys
import threading
import time

N = int(sys.argv[1])
BURN_S = float(sys.argv[2])
local = threading.local()
burned = []


class Connection:
    def __del__(self):
        t0 = time.thread_time()
        while time.thread_time() - t0 < BURN_S:  # LINE teardown
            pass
        burned.append(time.thread_time() - t0)


def work():
    local.conn = Connection()
    s = 0
    for i in range(20_000):
        s += i  # LINE work


t0 = time.process_time()
for _ in range(N):
    t = threading.Thread(target=work)
    t.start()  # LINE start
    t.join()  # LINE join
loop_cpu = time.process_time() - t0
with open(sys.argv[3], "w") as f:
    json.dump({"loop_cpu_s": loop_cpu, "teardown_cpu_s": sum(burned), "teardowns": len(burned)}, f)
