"""The Python API in a plain interpreter: a 200 MB numpy allocation inside a with block."""
import sys

import numpy as np

import peakline

outfile = sys.argv[1]
with peakline.profile(outfile=outfile) as p:
    with peakline.phase("alloc"):
        big = np.ones(200 * 1024 * 1024 // 8)  # LINE alloc
    with peakline.phase("sum"):
        total = float(big.sum())
    del big
print("total", total, "peak", p.profile.peak_bytes, flush=True)
