"""Calibration: work that has no frame of the user's own code on its stack.

- A thread pool (stdlib) hashes large buffers: its threads' stacks are all library frames, so
  their CPU belongs to the user's line that handed the work out (the main thread is there).
- copy.deepcopy of a 150-deep nested list recurses ~450 frames in copy.py and allocates at
  the bottom: only the root of that stack holds the user's line.
"""
import concurrent.futures
import copy
import hashlib

MiB = 1 << 20
# Written here, on the main thread: untouched zero pages would make the workers' first reads
# page faults, system time that grows on a loaded machine (a quarter to two fifths of theirs).
bufs = [b"\x5a" * (64 * MiB) for _ in range(8)]

with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    digests = list(pool.map(hashlib.sha256, bufs))  # LINE pool

nested = leaf = []
for _ in range(150):
    child = []
    leaf.append(child)
    leaf = child
leaf.append([0] * (8 * MiB))  # 64 MiB of list slots at the bottom
clone = copy.deepcopy(nested)  # LINE deep
print(len(digests))
