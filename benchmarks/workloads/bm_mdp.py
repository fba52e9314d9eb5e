"""pyperformance mdp (Markov decision process solved with Fractions), called directly.

Usage: python bm_mdp.py [SCALE]   (SCALE=1.0: 1 battle evaluation, about 3 s; it checks its result)
"""

import _pyperformance

if __name__ == "__main__":
    bench = _pyperformance.load("mdp")
    bench.bench_mdp(_pyperformance.iterations(1))
