"""Calibration program for `peakline sweep`: lines whose allocations grow in known ways with
N (read from the environment, or from argv[1] when given):

    LINEAR     exactly 4096 * N bytes
    QUADRATIC  exactly N * N bytes (an N x N byte matrix)
    CONSTANT   exactly 8 MiB whatever N is
    NOISY      2048 * N bytes, +-5% at random (seeded by N, so a test run is repeatable)

All four are held together at the end, so they are the heap's peak too.
"""

import os
import random
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ["N"])
NOISE = random.Random(N)


def build():
    linear = bytearray(4096 * N)  # LINEAR
    quadratic = bytearray(N * N)  # QUADRATIC
    constant = bytearray(8 << 20)  # CONSTANT
    noisy = bytearray(int(2048 * N * NOISE.uniform(0.95, 1.05)))  # NOISY
    return [linear, quadratic, constant, noisy]


kept = build()
print(f"N={N} held {sum(map(len, kept))} bytes")
