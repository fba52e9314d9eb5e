"""A quick example with no dependencies and known hot lines.

Each stage spends its time in a different place, so the report shows each
column of the line table at work:

    python_loop   -- interpreter time (Time Python)
    sort_numbers  -- the builtin list.sort (Time native)
    json_work     -- the json C accelerator (mostly native)
    hash_bytes    -- hashlib over a large buffer (native)
    nap           -- time.sleep (waiting, ~0 CPU)

    SCALE   multiplies the work (default 1.0: about 1-2 s on a 2-core machine)

Run it:  peakline run examples/pure_python.py
"""

import hashlib
import json
import os
import random
import time

SCALE = float(os.environ.get("SCALE", "1.0"))


def python_loop(n):
    total = 0.0
    for i in range(n):
        total += (i % 7) * 0.5 - (i % 3)  # hot line: pure bytecode
    return total


def sort_numbers(n):
    rng = random.Random(1)
    numbers = [rng.random() for _ in range(n)]
    numbers.sort()  # hot line: native (list.sort)
    return numbers[n // 2]


def json_work(n):
    records = [{"id": i, "name": f"item{i}", "tags": ["a", "b", "c"]} for i in range(n)]
    text = json.dumps(records)  # native json encoder
    return len(json.loads(text))


def hash_bytes(megabytes):
    buffer = b"\x5a" * (megabytes * 1024 * 1024)
    return hashlib.sha256(buffer).hexdigest()  # hot line: native hashing


def nap(seconds):
    time.sleep(seconds)  # waiting, not CPU


def main():
    loop_total = python_loop(int(3_000_000 * SCALE))
    median = sort_numbers(int(1_000_000 * SCALE))
    count = json_work(int(100_000 * SCALE))
    digest = hash_bytes(max(1, int(200 * SCALE)))
    nap(0.3 * SCALE)
    print(f"pure_python: loop={loop_total:.1f} median={median:.3f} json={count} sha={digest[:12]}")


if __name__ == "__main__":
    main()
