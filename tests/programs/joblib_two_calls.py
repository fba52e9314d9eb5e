"""Two joblib calls at two lines of the parent, on the same reused loky workers, each with
work of known size: the "charged to the submitting line" view must give each line its own.

stderr: "first cpu_s X" and "second cpu_s Y", the workers' CPU around their loops per call.
"""
import sys
import time

from joblib import Parallel, delayed


def burn(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:
        total += sum(i * i for i in range(200))
    return time.process_time() - start


def main():
    with Parallel(n_jobs=2, backend="loky") as parallel:
        first = parallel(delayed(burn)(0.1) for _ in range(4))  # LINE first
        time.sleep(0.3)
        second = parallel(delayed(burn)(0.25) for _ in range(4))  # LINE second
    print(f"first cpu_s {sum(first):.6f}", file=sys.stderr)
    print(f"second cpu_s {sum(second):.6f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
