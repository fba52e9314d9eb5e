"""Deep call stacks and many short frames: naive recursive Fibonacci.

Usage: python fib.py [SCALE]   (SCALE=1.0 is about 2-4 s on the reference machine)
"""

import math
import sys


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def main(scale):
    # Work grows by the golden ratio per step of n; pick n so work is ~linear in SCALE.
    base_n = 37
    n = max(10, base_n + round(math.log(max(scale, 1e-9)) / math.log((1 + 5 ** 0.5) / 2)))
    print(f"fib({n}) = {fib(n)}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
