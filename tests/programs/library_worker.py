"""Calibration: CPU of threads that run no line of this file.

usage: library_worker.py TRUTH.json

Twenty times: a thread runs the builtin sum() over 3 million ints (tens of ms of CPU; its
stack has only threading's frames) while the main thread waits for it, then the main thread
sleeps 30 ms on the next line. The workers' CPU belongs to the lines that start and join
them, none to the sleep. TRUTH.json gets the process CPU of the loop (time.process_time).
"""
import json
import sys
import threading
import time

t0 = time.process_time()
for _ in range(20):
    t = threading.Thread(target=sum, args=(range(3_000_000),))
    t.start()  # LINE start
    t.join()  # LINE join
    time.sleep(0.03)  # LINE sleep
loop_cpu = time.process_time() - t0
with open(sys.argv[1], "w") as f:
    json.dump({"loop_cpu_s": loop_cpu}, f)
