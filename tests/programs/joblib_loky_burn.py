"""joblib's loky backend runs a function defined here in 2 worker processes.

loky ships the function by value (cloudpickle), and the workers rebuild its code object with
co_filename "<dynamic-code>": the profile must still charge the workers' CPU to these lines.
stdout: the result (the same profiled or not). stderr: "worker cpu_s X", the CPU time the
workers measured for their own calls (time.process_time around the loop): the truth.
"""
import sys
import time

from joblib import Parallel, delayed


def burn(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:  # LINE burn_loop
        total += sum(i * i for i in range(200))  # LINE burn_body
    return total > 0, time.process_time() - start


def main():
    results = Parallel(n_jobs=2, backend="loky")(delayed(burn)(0.3) for _ in range(4))  # LINE submit
    print("results", all(ok for ok, _ in results), flush=True)
    print(f"worker cpu_s {sum(c for _, c in results):.6f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
