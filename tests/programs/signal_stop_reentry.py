"""A signal handler stops the profile while the core is inside one of its own callbacks.

The core calls Python (its file filter) while it drains; a signal arriving then runs its
Python handler right there, on top of the core's half-finished drain. A handler that stops
the profile (as peakline's own SIGTERM handler does in a child process) must not wait for
that drain to finish: it never can. Prints one JSON line.
"""
import json
import os
import signal
import sys
import threading

import peakline
from peakline.model import selection

original = selection.FileSelection.is_reported
state = {"sent": False, "inside": None, "profile": None}


def is_reported(self, filename):
    if ("peakline_sigstop" in filename and not state["sent"]
            and threading.current_thread() is threading.main_thread()):
        state["sent"] = True
        os.kill(os.getpid(), signal.SIGUSR1)
        for _ in range(1000):  # the handler runs at one of these bytecode boundaries
            pass
    return original(self, filename)


def handler(signum, frame):
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    state["inside"] = "is_reported" in names
    state["profile"] = peakline.stop()


selection.FileSelection.is_reported = is_reported
signal.signal(signal.SIGUSR1, handler)
peakline.start(memory_sampling_interval=4096)
for i in range(2000):
    exec(compile("x = [bytearray(65536) for _ in range(4)]\n",
                 f"/tmp/peakline_sigstop_{i}.py", "exec"), {})
    if state["profile"] is not None:
        break
profile = state["profile"]
print(json.dumps({"rounds": i + 1, "stopped": profile is not None, "inside": state["inside"],
                  "cpu_samples": profile.sampling.cpu_samples if profile else None,
                  "skipped_ticks": profile.sampling.skipped_ticks if profile else None}))
sys.stdout.flush()
