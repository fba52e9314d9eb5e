"""Known time split: a pure-Python loop, sha256 of big buffers (native), and a sleep (waiting),
one function each, of about equal length.

Truth: each phase's wall time measured here with perf_counter; shares of their sum.
"""

import hashlib
import time

import _truth

PHASE_S = _truth.seconds(1.2)


def python_phase(deadline):
    total = 0
    while time.perf_counter() < deadline:
        for i in range(10_000):
            total += i * i % 7
    return total


def native_phase(deadline):
    buffer = bytes(range(256)) * (16 * 1024 * 1024 // 256)  # 16 MiB
    digest = b""
    while time.perf_counter() < deadline:
        digest = hashlib.sha256(buffer).digest()
    return digest


def wait_phase(seconds):
    time.sleep(seconds)


phases = {}
start = time.perf_counter()
python_phase(start + PHASE_S)
phases["python"] = time.perf_counter() - start
start = time.perf_counter()
native_phase(start + PHASE_S)
phases["native"] = time.perf_counter() - start
start = time.perf_counter()
wait_phase(PHASE_S)
phases["wait"] = time.perf_counter() - start
total = sum(phases.values())
_truth.write({"phase_s": phases, "share": {k: v / total for k, v in phases.items()}})
