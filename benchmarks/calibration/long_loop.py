"""For the cost table: a long mixed run (Python loops, allocations, a little native work), so a
tool's output size and its memory show how they grow with run time.

Usage: python long_loop.py [SECONDS]   (default 30)
"""

import hashlib
import sys
import time


def churn(n):
    rows = [{"i": i, "s": str(i), "l": [i] * 4} for i in range(n)]
    return sum(len(r["s"]) for r in rows)


def hashing(buffer):
    return hashlib.sha256(buffer).hexdigest()


def main(seconds):
    deadline = time.perf_counter() + seconds
    buffer = bytes(4 * 1024 * 1024)
    rounds = 0
    while time.perf_counter() < deadline:
        churn(20_000)
        hashing(buffer)
        rounds += 1
    print(f"long_loop: {rounds} rounds")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
