"""A multiprocessing Pool whose workers do all the CPU work (start method from argv[1])."""
import multiprocessing as mp
import sys


def work(n):
    total = 0
    for i in range(n):  # LINE worker_loop
        total += i * i  # LINE worker_body
    return total


def main():
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        results = pool.map(work, [1_500_000] * 4)
    print("results", sum(results) % 1000003, flush=True)


if __name__ == "__main__":
    main()
