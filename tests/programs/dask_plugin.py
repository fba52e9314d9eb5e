"""peakline.dask.profile(client) on a LocalCluster this program starts unprofiled: 2 worker
processes run 4 tasks of known CPU, each holding 40 MiB while it burns.

stdout: "truth X" (the workers' CPU around their loops), then the merged profile's figures as
JSON for the test to check.
"""
import json
import sys
import time

from dask.distributed import Client, LocalCluster

import peakline.dask


def burn(seconds):
    held = bytearray(40 << 20)  # LINE hold
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:  # LINE burn_loop
        total += sum(i * i for i in range(200))  # LINE burn_body
    return len(held), time.process_time() - start


def main():
    outfile = sys.argv[1]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        with peakline.dask.profile(client, outfile=outfile) as result:
            done = client.gather(client.map(burn, [0.25] * 4, pure=False))
    print(f"truth {sum(c for _, c in done):.6f}")
    print(json.dumps({"workers": result.workers}), flush=True)


if __name__ == "__main__":
    main()
