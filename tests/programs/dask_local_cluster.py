"""A Dask LocalCluster with 2 worker processes runs a function defined here (shipped by value
with cloudpickle) on 4 tasks of known CPU; each task also holds 40 MiB while it burns.

stdout: the result. stderr: "worker cpu_s X", the workers' CPU time around their loops.
"""
import sys
import time

from dask.distributed import Client, LocalCluster


def burn(seconds):
    held = bytearray(40 << 20)  # LINE hold
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:  # LINE burn_loop
        total += sum(i * i for i in range(200))  # LINE burn_body
    return len(held), time.process_time() - start


def main():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        results = client.gather(client.map(burn, [0.25] * 4, pure=False))  # LINE submit
    print("results", sorted({n for n, _ in results}), flush=True)
    print(f"worker cpu_s {sum(c for _, c in results):.6f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
