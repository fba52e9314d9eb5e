"""A local Ray cluster (2 CPUs) runs tasks of known CPU and an actor that holds a known
100 MiB, plus (with argument "bad") a task in a worker where peakline cannot be imported and
a task whose worker dies by SIGKILL mid-task. It does not call ray.shutdown() (Ray's own exit
handler does), unless given "shutdown": then it asks the workers for their profiles first
(peakline.ray.hand_in) and shuts Ray down.

stdout: "tasks cpu_s X" (the tasks' CPU around their loops, measured in the tasks), "actor
pid P", then "done".
"""
import os
import signal
import sys
import time

import ray


@ray.remote
def burn(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:  # LINE burn_loop
        total += sum(i * i for i in range(200))  # LINE burn_body
    return time.process_time() - start


@ray.remote
class Holder:
    def __init__(self, size):
        self.block = bytearray(size)  # LINE hold
        for i in range(0, size, 4096):
            self.block[i] = 1

    def pid(self):
        return os.getpid()


@ray.remote(max_retries=0)
def die_midway(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:  # LINE die_loop
        pass
    os.kill(os.getpid(), signal.SIGKILL)


@ray.remote
def unprofiled():
    return os.getpid()


def main():
    args = set(sys.argv[1:])
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             log_to_driver=False)
    holder = Holder.remote(100 << 20)
    print("actor pid", ray.get(holder.pid.remote()), flush=True)
    spent = ray.get([burn.remote(0.3) for _ in range(4)])  # LINE submit
    print(f"tasks cpu_s {sum(spent):.6f}", flush=True)
    if "bad" in args:
        fake = os.path.join(os.path.dirname(os.path.abspath(__file__)), "no_peakline")
        print("unprofiled pid", ray.get(unprofiled.options(
            runtime_env={"env_vars": {"PYTHONPATH": fake}}).remote()), flush=True)
        try:
            ray.get(die_midway.remote(1.5))
        except ray.exceptions.WorkerCrashedError:
            print("worker died", flush=True)
    if "shutdown" in args:
        import peakline.ray
        print("handed in", peakline.ray.hand_in(), flush=True)
        ray.shutdown()
    print("done", flush=True)


if __name__ == "__main__":
    main()
