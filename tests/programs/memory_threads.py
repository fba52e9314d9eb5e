"""Calibration: 4 threads allocate and free concurrently; each keeps 25 x 2 MiB, all freed at
the end. Exact totals must balance: the end-of-run live bytes return to what the imports
alone leave, which `--imports-only` measures (same imports, then exit)."""
import sys
import threading

import numpy as np

if "--imports-only" in sys.argv:
    sys.exit(0)

MiB = 1 << 20
kept = [[] for _ in range(4)]


def worker(slot):
    for i in range(25):
        kept[slot].append(np.ones(2 * MiB // 8))  # LINE keep
        for _ in range(4):
            tmp = np.ones(MiB // 8)  # LINE temp
            del tmp


threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
total = sum(len(k) for k in kept)  # LINE after_join
kept.clear()
print(total)
