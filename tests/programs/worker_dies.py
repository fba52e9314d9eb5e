"""A worker process that dies by SIGKILL in the middle of its task (the OOM killer's way):
it can write no profile, and the merged profile must say that it is missing.

stdout: the worker's exit code as the parent sees it (-9).
"""
import multiprocessing as mp
import os
import signal
import time


def work():
    start = time.process_time()
    while time.process_time() - start < 0.2:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def main():
    worker = mp.get_context("spawn").Process(target=work)
    worker.start()
    worker.join()
    print("worker exit", worker.exitcode, flush=True)


if __name__ == "__main__":
    main()
