"""A process for `peakline attach` tests to attach to (tests/python/test_attach.py).

    attach_target.py steady SECONDS EXIT_CODE   compute and allocate steadily, print progress
    attach_target.py sleep SECONDS              print "sleeping", sleep SECONDS, print the time slept
    attach_target.py input                      print "ready", read a line, print it back
    attach_target.py idle SECONDS               print "idle", then sleep 50 ms at a time (no
                                                allocation) for SECONDS

steady: every unit of work is a known loop (the hot line) and 1 MiB of bytearrays of which
the last 8 MiB are kept (the allocation line); "progress N MONOTONIC_S PROCESS_CPU_S" is
printed every 20 units, and
at the end (after SECONDS, or at once on SIGTERM) "done N" and the exit status EXIT_CODE. The
unit count per second (wall, and of the process's CPU time, which a busy machine disturbs
less) is the throughput the tests compare.

With ATTACH_TARGET_ANY_TRACER=1 in its environment it first allows any process of its user to
trace it (PR_SET_PTRACER_ANY): under kernel.yama.ptrace_scope=1 (Ubuntu hosts, CI containers)
only a parent may trace otherwise, and `peakline attach` run by a test is a sibling.
"""

import signal
import sys
import time


def burn(n):
    total = 0
    for i in range(n):
        total += i * i % 7  # the hot line
    return total


def allocate():
    return [bytearray(64 * 1024) for _ in range(16)]  # the allocation line


def steady(seconds, exit_code):
    kept = []
    units = 0
    end = [time.monotonic() + seconds]

    def finish(signo, frame):
        end[0] = 0.0

    signal.signal(signal.SIGTERM, finish)
    while time.monotonic() < end[0]:
        burn(20_000)
        kept.append(allocate())
        if len(kept) > 8:
            kept.pop(0)
        units += 1
        if units % 20 == 0:
            print(f"progress {units} {time.monotonic():.3f} {time.process_time():.3f}", flush=True)
    print(f"done {units}", flush=True)
    sys.exit(exit_code)


def allow_any_tracer():
    import ctypes
    import os

    if os.environ.get("ATTACH_TARGET_ANY_TRACER") == "1":
        pr_set_ptracer, any_tracer = 0x59616D61, ctypes.c_ulong(-1)
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_ptracer, any_tracer, 0, 0, 0)


def main():
    allow_any_tracer()
    mode = sys.argv[1]
    if mode == "steady":
        steady(float(sys.argv[2]), int(sys.argv[3]))
    elif mode == "sleep":
        print("sleeping", flush=True)
        start = time.monotonic()
        time.sleep(float(sys.argv[2]))  # the sleep line
        print(f"slept {time.monotonic() - start:.3f}", flush=True)
    elif mode == "idle":
        print("idle", flush=True)
        end = time.monotonic() + float(sys.argv[2])
        while time.monotonic() < end:
            time.sleep(0.05)
    elif mode == "input":
        print("ready", flush=True)
        line = input()
        print(f"got {line}", flush=True)


if __name__ == "__main__":
    main()
