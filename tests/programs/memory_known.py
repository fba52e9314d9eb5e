"""Calibration: lines whose memory behaviour is known exactly (tests/python/test_memory_accuracy.py).

usage: memory_known.py [--ext]   (--ext: also use the peakline_testext C extension)
"""
import sys

import numpy as np

MiB = 1 << 20


def keep_200():
    return np.ones(200 * MiB // 8)  # LINE keep_200


def strings():
    return [f"item-{i:08d}" for i in range(600_000)]  # LINE strings


def churn():
    for _ in range(10):
        block = np.ones(100 * MiB // 8)  # LINE churn
        del block


def copies():
    src = bytearray(100 * MiB)
    out = None
    for _ in range(10):
        out = bytes(src)  # LINE copy
    return len(out)


def peak_pair():
    a = np.ones(300 * MiB // 8)  # LINE peak_a
    b = np.ones(150 * MiB // 8)  # LINE peak_b
    total = a[0] + b[0]
    del a, b
    return total


def native_ext():
    import peakline_testext as ext
    ext.malloc_keep(48 * MiB)  # LINE ext_malloc
    ext.mmap_keep(32 * MiB)  # LINE ext_mmap
    return ext


kept = keep_200()
words = strings()
churn()
copies()
peak_pair()
if "--ext" in sys.argv:
    native_ext()
print("done")
