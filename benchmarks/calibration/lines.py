"""Known per-line allocations: a 64 MiB temporary (line D, freed at once), then 100 MiB
(line A), 300 MiB (line B) and 200,000 small bytes objects (line C, ~44 MiB), held together:
the peak. Lines are found by their LINE markers (a comment naming the letter at the line's end).

Truth per line: bytes allocated there (D included), and bytes it holds at the peak (D: 0).
Line C fills a list made beforehand, from ints made beforehand, so it allocates the bytes
objects and nothing else (no list growth, no int churn).
"""

import sys
import time

import numpy as np

import _truth

N = 200_000
hold = _truth.seconds(0.5)
d = np.ones(64 * 1024 * 1024 // 8).sum()  # LINE:D
a = np.ones(100 * 1024 * 1024 // 8)  # LINE:A
b = np.ones(300 * 1024 * 1024 // 8)  # LINE:B
c, ids = [None] * N, list(range(N))
for j in ids: c[j] = bytes(200)  # LINE:C
time.sleep(hold)
small = sum(sys.getsizeof(o) for o in c)
truth = {"A": a.nbytes, "B": b.nbytes, "C": small, "D": 64 * 1024 * 1024}
del a, b, c
_truth.write({"alloc_bytes": truth, "live_at_peak_bytes": {**truth, "D": 0}})
