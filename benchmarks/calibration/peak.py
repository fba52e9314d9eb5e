"""Known peak: 16 MiB of small Python objects, then one 512 MiB numpy array, held together.

Truth: peak_bytes = the array's nbytes + the small objects' sys.getsizeof sum (+ their list).
Every tool also sees the interpreter's and numpy's own heap at that moment (a few tens of MB),
which no tool can tell apart from the program's: that is the floor of the error.
"""

import sys
import time

import numpy as np

import _truth

hold = _truth.seconds(1.0)
small = [bytes(4000) for _ in range(4096)]
big = np.ones(512 * 1024 * 1024 // 8)  # 512 MiB, every page written
time.sleep(hold)  # hold the peak long enough for samplers that poll
peak = big.nbytes + sum(sys.getsizeof(o) for o in small) + sys.getsizeof(small)
del big
del small
_truth.write({"peak_bytes": peak})
