"""Calibration: allocations of a native thread (no Python state) during a ctypes call.

usage: native_thread_burst.py DIR_OF_LIBBURST

Thirty times: burst(4) runs a C pthread that allocates 4 x 8 MiB (a few ms, shorter than
the profiler's 20 ms tick) while the main thread waits in the call, then the main thread
sleeps on the next line, allocating nothing. All 960 MiB belong to the burst line.
"""
import ctypes
import os
import sys
import time

lib = ctypes.CDLL(os.path.join(sys.argv[1], "libburst.so"))
for _ in range(30):
    lib.burst(4)  # LINE burst
    time.sleep(0.02)  # LINE sleep
