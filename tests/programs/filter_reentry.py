"""Stress: the core calls back into Python (its file filter) while other threads run.

The filter is made to hand the GIL over on every call (time.sleep(0)), so while one thread
is half-way through draining samples inside that callback, the tick thread and other
threads run: they take samples, intern new frames and free code objects (each compile() of
a fresh file name makes a code object that dies right after exec). A profiler that holds a
reference into its tables across the callback, or lets a second thread into its drain,
crashes here or reports garbage lines.

argv[1]: rounds per thread. Prints one JSON line of what the profile holds.
"""
import json
import sys
import threading
import time

import peakline
from peakline.model import selection

original = selection.FileSelection.is_reported


def yielding_is_reported(self, filename):
    time.sleep(0)  # releases the GIL: another thread may enter the core now
    return original(self, filename)


selection.FileSelection.is_reported = yielding_is_reported
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 400
SRC = "x = [bytearray(65536) for _ in range(8)]\n"


def churn(tag):
    for i in range(ROUNDS):
        exec(compile(SRC, f"/tmp/peakline_reentry_{tag}_{i}.py", "exec"), {})


peakline.start(memory_sampling_interval=65536, cpu_sampling_interval=0.001)
threads = [threading.Thread(target=churn, args=(t,)) for t in range(3)]
for t in threads:
    t.start()
churn("main")
for t in threads:
    t.join()
profile = peakline.stop()
generated = [f for f in profile.files if "peakline_reentry" in f]
print(json.dumps({
    "generated_files": len(generated),
    # every generated file has one line: anything else is a frame read through a bad pointer
    "generated_linenos": sorted({line.lineno for f in generated for line in profile.files[f].lines}),
    "other_files": [f for f in profile.files if "peakline_reentry" not in f],
    "deferred_code_frees": profile.sampling.deferred_code_frees,
    "skipped_ticks": profile.sampling.skipped_ticks,
    "alloc_bytes": sum(line.alloc_python_bytes + line.alloc_native_bytes
                       for f in profile.files.values() for line in f.lines),
}))
