"""A multiprocessing Pool whose workers do all the CPU work (start method from argv[1]).

stdout: the result (the same profiled or not). stderr: "worker cpu_s X", the CPU time the
workers measured for their own work function (time.process_time around it): the truth the
profile's worker lines are compared with.
"""
import multiprocessing as mp
import sys
import time


def work(n):
    start = time.process_time()
    total = 0
    for i in range(n):  # LINE worker_loop
        total += i * i  # LINE worker_body
    return total, time.process_time() - start


def main():
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        results = pool.map(work, [3_000_000] * 4)
    print("results", sum(r for r, _ in results) % 1000003, flush=True)
    print(f"worker cpu_s {sum(c for _, c in results):.6f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
