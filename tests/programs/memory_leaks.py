"""Calibration: one leaking line, one bounded cache, one transient line, interleaved in the same
loop so they span the same time (tests/python/test_memory_accuracy.py)."""
import collections
import time

import numpy as np

MiB = 1 << 20
leak = []
cache = collections.OrderedDict()

for i in range(160):
    leak.append(np.ones(MiB // 8))  # LINE leak
    cache[i] = np.ones(MiB // 8)  # LINE cache
    if len(cache) > 25:
        cache.popitem(last=False)
    tmp = np.ones(MiB // 8)  # LINE transient
    del tmp
    time.sleep(0.01)
print(len(leak), len(cache))
