"""A process pool whose worker dies mid-task: it burns CPU of known size, says how much on
stdout, then SIGKILLs itself (no exit handler runs: no profile is written at its end).

stdout: "burnt X" (the worker's CPU around its loop before it died), "pool broken".
"""
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool


def burn_then_die(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:  # LINE burn_loop
        total += sum(i * i for i in range(200))  # LINE burn_body
    print(f"burnt {time.process_time() - start:.6f}", flush=True)
    time.sleep(0.5)  # a snapshot after the loop, on a loaded machine too
    os.kill(os.getpid(), signal.SIGKILL)


def main():
    with ProcessPoolExecutor(max_workers=1) as pool:
        try:
            pool.submit(burn_then_die, 1.0).result()
        except BrokenProcessPool:
            print("pool broken", flush=True)


if __name__ == "__main__":
    main()
