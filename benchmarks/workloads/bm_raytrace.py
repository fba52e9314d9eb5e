"""pyperformance raytrace (pure-Python ray tracer, 100x100), called directly.

Usage: python bm_raytrace.py [SCALE]   (SCALE=1.0: 12 renders, about 2-4 s)
"""

import _pyperformance

if __name__ == "__main__":
    bench = _pyperformance.load("raytrace")
    bench.bench_raytrace(_pyperformance.iterations(12), bench.DEFAULT_WIDTH,
                         bench.DEFAULT_HEIGHT, None)
