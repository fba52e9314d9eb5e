"""Calibration: a slow leak of large buffers (tests/python/test_memory_accuracy.py).

One line keeps 4 MiB buffers: 30 at once, then, after a pause that puts the rest in the
second half of the run, 6 more 0.1 s apart: it holds 144 MiB at the end and grew by 24 MiB
(17%) in the second half. Buffers of 4 MiB are sampled with odds 98% at a 1 MiB interval, so
the line's estimate is nearly exact; the small-object noise floor, 3 x sqrt(T x 144 MiB) =
36 MiB, would hide that growth.
"""
import time

MiB = 1 << 20
held = []


def keep():
    held.append(bytearray(4 * MiB))  # LINE leak


for _ in range(30):
    keep()
time.sleep(0.8)
for _ in range(6):
    keep()
    time.sleep(0.1)
print(len(held))
