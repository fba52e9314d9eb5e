"""pyperformance fannkuch (permutation flips on lists), called directly.

Usage: python bm_fannkuch.py [SCALE]   (SCALE=1.0: 10 calls of fannkuch(9), about 2-4 s)
"""

import _pyperformance

if __name__ == "__main__":
    bench = _pyperformance.load("fannkuch")
    for _ in range(_pyperformance.iterations(10)):
        bench.fannkuch(bench.DEFAULT_ARG)
