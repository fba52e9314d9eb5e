"""The first BLAS call maps OpenBLAS's work buffer (tests/python/test_memory_headlines.py).

Run with OPENBLAS_NUM_THREADS=1: one thread, so one buffer, from numpy's OpenBLAS. The
program's own 32 MiB anonymous mapping (the control) is user data and stays on its line.
"""
import mmap

import numpy as np

a = np.ones((300, 300))  # large enough for the buffered GEMM path
b = a @ a  # LINE blas
own = mmap.mmap(-1, 32 << 20)  # LINE own_map
own.write(b"x")
print(float(b.sum()), len(own))
