"""peakline.dask.profile(client) on a cluster where one worker cannot import peakline and
another dies: two LocalCluster workers (which can), one of which is SIGKILLed after the
tasks (its nanny starts a new one), and a `dask worker` process started with a package named
peakline first on its path that fails to import (as where peakline is not installed).

argv[1]: a directory for that package. stdout: "hidden ADDRESS" (the worker without
peakline), "killed ADDRESS", "error MESSAGE" (the ProfilerStateError), "profiled
[ADDRESSES]" as JSON.
"""
import json
import os
import signal
import subprocess
import sys
import time

from dask.distributed import Client, LocalCluster

import peakline.dask
from peakline.errors import ProfilerStateError


def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        sum(i * i for i in range(200))
    return os.getpid()


def main():
    package = os.path.join(sys.argv[1], "peakline")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write("raise ImportError('No module named peakline (hidden for this worker)')\n")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
             "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
            env={**os.environ, "PYTHONPATH": sys.argv[1]})
        try:
            client.wait_for_workers(3, timeout=120)
            pids = client.run(os.getpid)
            hidden = [a for a, pid in pids.items() if pid == worker.pid]
            print("hidden", hidden[0], flush=True)
            victim = sorted(a for a in pids if a != hidden[0])[0]
            print("killed", victim, flush=True)
            try:
                with peakline.dask.profile(client) as result:
                    client.gather(client.map(burn, [0.1] * 4, pure=False))
                    os.kill(pids[victim], signal.SIGKILL)
                    deadline = time.monotonic() + 120
                    while victim in client.scheduler_info()["workers"]:
                        assert time.monotonic() < deadline, "the killed worker stayed listed"
                        time.sleep(0.1)
            except ProfilerStateError as error:
                print("error", error, flush=True)
            print("profiled", json.dumps(result.workers), flush=True)
            print("lines", sum(1 for _ in result.profile.lines()), flush=True)
        finally:
            worker.terminate()
            worker.wait(60)


if __name__ == "__main__":
    main()
