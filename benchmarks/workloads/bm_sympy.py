"""pyperformance sympy (expand, integrate, sum, str; cache cleared each time), called directly.

Usage: python bm_sympy.py [SCALE]   (SCALE=1.0: 4 rounds of the four benchmarks, about 2-3 s)
"""

import _pyperformance

if __name__ == "__main__":
    bench = _pyperformance.load("sympy")
    for _ in range(_pyperformance.iterations(4)):
        for name in bench.BENCHMARKS:
            bench.bench_sympy(1, getattr(bench, "bench_" + name))
