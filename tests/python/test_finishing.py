"""peakline.finishing: a profile is written once per process, and a SIGTERM that lands while
it is written waits for the write, then ends the process. (The owners that use it end to end:
test_signals.py, test_processes.py, test_api.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys

from peakline.finishing import WriteOnce


def test_the_write_runs_once_and_only_in_its_own_process():
    calls = []
    once = WriteOnce()
    once(calls.append, "first")
    once(calls.append, "second")
    assert calls == ["first"] and once.done and not once.writing
    inherited = WriteOnce()
    inherited.pid = -1  # as a fork child sees its parent's object
    inherited(calls.append, "child")
    closed = WriteOnce()
    closed.close()  # nothing to write (the program never started)
    closed(calls.append, "closed")
    assert calls == ["first"]


PROGRAM = r'''
import os, signal, sys, time
from peakline import finishing

once = finishing.WriteOnce()

def write(what):
    with open(sys.argv[1], "a") as f:
        f.write(what + " start\n")
        f.flush()
        os.kill(os.getpid(), signal.SIGTERM)  # lands while the profile is written
        for _ in range(200):
            time.sleep(0.001)  # the handler runs meanwhile, and must not end the write
        f.write(what + " end\n")

signal.signal(signal.SIGTERM, lambda signum, frame: once.sigterm(signum, lambda status: once(write, "sigterm")))
once(write, "exit")
print("still alive")
'''


def test_a_sigterm_while_writing_waits_for_the_write_then_ends_the_process(tmp_path):
    out = tmp_path / "written.txt"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(out)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert out.read_text() == "exit start\nexit end\n"  # written once, whole
    assert "still alive" not in proc.stdout
