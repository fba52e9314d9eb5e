"""Which signals peakline's own threads block while a profile runs. Prints one JSON line:
for each thread of the process that is not one of the program's threads, its name and
blocked-signal mask, and the main thread's mask (/proc/self/task/*/status).

A thread seen in its first microseconds is still in glibc's start-up state (every signal
blocked, SIGSEGV included, while it installs its creator's mask), so the snapshot is retaken
until no thread is in that state, for at most 5 s; after that the last snapshot is printed
as it is and the test fails on it."""
import json
import os
import threading
import time

import peakline


def mask(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16)
    return None


def name(tid):
    with open(f"/proc/self/task/{tid}/comm") as f:
        return f.read().strip()


ALL_SIGNALS = (1 << 64) - 1 - (1 << 8) - (1 << 18)  # what glibc blocks (not SIGKILL/SIGSTOP)


def snapshot():
    mine = {t.native_id for t in threading.enumerate()}
    others = [int(t) for t in os.listdir("/proc/self/task") if int(t) not in mine]
    return [{"name": name(t), "mask": mask(t)} for t in others]


peakline.start()
deadline = time.monotonic() + 5
own = snapshot()
while any(t["mask"] == ALL_SIGNALS for t in own) and time.monotonic() < deadline:
    time.sleep(0.01)
    own = snapshot()
print(json.dumps({"main_mask": mask(threading.main_thread().native_id), "own": own}))
peakline.stop()
