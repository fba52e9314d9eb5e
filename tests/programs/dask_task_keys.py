"""A Dask LocalCluster with 2 worker processes runs two kinds of task of known size: ``burn``
(4 tasks of 0.25 s of CPU) and ``hold`` (2 tasks that each hold a 100 MiB block for 0.3 s).

stdout: "burn cpu_s X" (the process CPU time around the burn loops, measured in the tasks)
and "hold bytes N" (the size of each held block).
"""
import time

from dask.distributed import Client, LocalCluster

HELD = 100 << 20


def burn(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:
        total += sum(i * i for i in range(200))
    return time.process_time() - start


def hold(n_bytes, seconds):
    block = bytearray(n_bytes)
    time.sleep(seconds)
    return len(block)


def main():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        spent = client.gather(client.map(burn, [0.25] * 4, pure=False))
        held = client.gather(client.map(hold, [HELD] * 2, [0.3] * 2, pure=False))
    print(f"burn cpu_s {sum(spent):.6f}", flush=True)
    print(f"hold bytes {held[0]}", flush=True)


if __name__ == "__main__":
    main()
