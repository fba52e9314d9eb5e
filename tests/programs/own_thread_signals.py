"""Which signals peakline's own threads block while a profile runs. Prints one JSON line:
for each thread of the process that is not one of the program's threads, its name and
blocked-signal mask, and the main thread's mask (/proc/self/task/*/status)."""
import json
import os
import threading

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


peakline.start()
mine = {t.native_id for t in threading.enumerate()}
others = [int(t) for t in os.listdir("/proc/self/task") if int(t) not in mine]
print(json.dumps({"main_mask": mask(threading.main_thread().native_id),
                  "own": [{"name": name(t), "mask": mask(t)} for t in others]}))
peakline.stop()
