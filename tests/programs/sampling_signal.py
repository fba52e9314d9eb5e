"""Calibration: programs that touch every signal, among them peakline's CPU sampling signal
(tests/python/test_signals.py). Each burns a known amount of CPU and prints what it measured.

usage: sampling_signal.py MODE
  reset     every signal to SIG_DFL (as daemons and sandboxes do); then asks libc's sigaction
            what each real-time signal's disposition is (must be what was asked: SIG_DFL)
  catchall  a handler for every catchable signal; prints what arrived (must be nothing)
  realtime  a handler for every real-time signal; sends each one to itself once; prints how
            often each arrived (must be exactly once: no tick, no loss)
  blockall  blocks every signal in the (only) thread and burns CPU: sampling cannot work
"""
import ctypes
import os
import signal
import sys
import time

CPU_S = 1.0


def burn(seconds):
    t0 = time.process_time()
    n = 0
    while time.process_time() - t0 < seconds:  # LINE burn
        n += 1
    return time.process_time() - t0


def catchable():
    for sig in sorted(signal.valid_signals()):
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            yield sig


def realtime():
    return range(signal.SIGRTMIN, signal.SIGRTMAX + 1)


def libc_disposition(sig):
    """(handler address, sa_flags) as libc's sigaction reports them (glibc's struct sigaction:
    handler, 128-byte mask, int flags)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(256)
    if libc.sigaction(sig, None, buf) != 0:
        raise OSError(ctypes.get_errno(), "sigaction")
    handler = int.from_bytes(buf.raw[:8], sys.byteorder)
    flags = int.from_bytes(buf.raw[136:140], sys.byteorder)
    return handler, flags


mode = sys.argv[1]
arrived = {}


def count(sig, frame):
    arrived[sig] = arrived.get(sig, 0) + 1


if mode == "reset":
    for sig in catchable():
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    used = burn(CPU_S)
    reported = {sig: libc_disposition(sig) for sig in realtime()}
    print("cpu", round(used, 3))
    print("all SIG_DFL", all(h == 0 and not flags & 4 for h, flags in reported.values()))
elif mode == "catchall":
    for sig in catchable():
        if sig == signal.SIGINT:
            continue
        try:
            signal.signal(sig, count)
        except (OSError, ValueError, RuntimeError):
            pass
    used = burn(CPU_S)
    print("cpu", round(used, 3))
    print("arrived", arrived)
elif mode == "realtime":
    for sig in realtime():
        signal.signal(sig, count)
    used = burn(CPU_S)
    for sig in realtime():
        os.kill(os.getpid(), sig)
    deadline = time.monotonic() + 5
    while len(arrived) < len(realtime()) and time.monotonic() < deadline:
        time.sleep(0.01)
    print("cpu", round(used, 3))
    print("each once", arrived == {sig: 1 for sig in realtime()}, arrived)
elif mode == "blockall":
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    used = burn(1.5)
    print("cpu", round(used, 3))
else:
    sys.exit(f"unknown mode {mode}")
