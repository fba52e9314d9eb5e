"""Imported by import_growth.py: fills a module-level cache, at import time (argv[1] ==
"import") or when import_growth.py calls fill() ("call"). Same line, same growth."""
import sys
import time

MIB = 1 << 20
CACHE = []


def fill():
    for _ in range(40):
        CACHE.append(bytearray(MIB))  # LINE fill
        time.sleep(0.02)


if sys.argv[1:] == ["import"]:
    fill()
