"""pyperformance pprint (PrettyPrinter.pformat of 100,000 nested tuples), called directly.

Usage: python bm_pprint.py [SCALE]   (SCALE=1.0: 2 pformat calls, about 2-3 s)
"""

import _pyperformance

if __name__ == "__main__":
    bench = _pyperformance.load("pprint")
    for _ in range(_pyperformance.iterations(2)):
        bench.p.pformat(bench.printable)
