"""Calibration: each marked line has a known answer (see tests/python/test_cpu_accuracy.py)."""
import hashlib
import random
import time


def python_loop(n):
    total = 0.0
    for i in range(n):
        total += (i % 7) * 1.5  # LINE python_loop
    return total


def add(a, b):
    return a + b


def python_calls(n):
    total = 0
    for i in range(n):
        total = add(total, i)  # LINE python_calls
    return total


def native_hash(buf):
    return hashlib.sha256(buf).hexdigest()  # LINE native_hash


def native_sort(xs):
    return sorted(xs)  # LINE native_sort


def main():
    python_loop(12_000_000)  # ~0.3 s here: ~30 samples, so one stray sample is ~3%
    python_calls(6_000_000)  # ~0.5-0.9 s: calling a Python function is Python time (3.10: via
    # C); ~50+ samples, so a few misclassified ones cannot cross the test's 85% bound
    buf = b"\x01" * (256 * 1024 * 1024)
    for _ in range(3):
        native_hash(buf)
    rng = random.Random(42)
    xs = [rng.randrange(1 << 30) for _ in range(2_000_000)]
    native_sort(xs)
    time.sleep(0.8)  # LINE sleep


main()
