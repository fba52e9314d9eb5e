"""A program whose report needs every figure the HTML explains (tests/python/test_html_polish.py).

Two phases; a small (600 KiB) and a big (64 MiB) holder, so that one shared sparkline scale
shows the small one as a sliver; a 256 MiB anonymous mapping that is never touched (the
heap peak counts it, the peak RSS does not: bytearray(n) would zero its pages).
"""
import mmap
import time

import peakline


def small():
    return bytearray(600 * 1024)  # LINE small


def big():
    return [bytearray(1 << 20) for _ in range(64)]  # LINE big


def untouched():
    return mmap.mmap(-1, 256 << 20)  # LINE untouched


with peakline.phase("load"):
    a = small()
    b = big()
    time.sleep(0.15)
with peakline.phase("train"):
    c = untouched()
    time.sleep(0.15)
    c.close()
    del c
del b
time.sleep(0.1)
