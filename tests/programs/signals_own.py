"""A program with its own SIGALRM, SIGPROF and SIGINT handlers, interval timers and blocking
system calls (sleep, select, socket reads) that must not fail with EINTR."""
import select
import signal
import socket
import sys
import time

counts = {"alrm": 0, "prof": 0, "int": 0}


def on_alarm(signum, frame):
    counts["alrm"] += 1


def on_prof(signum, frame):
    counts["prof"] += 1


def on_int(signum, frame):
    counts["int"] += 1


signal.signal(signal.SIGALRM, on_alarm)
signal.signal(signal.SIGPROF, on_prof)
signal.signal(signal.SIGINT, on_int)

signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)  # fires during every blocking call below
t0 = time.monotonic()
time.sleep(0.3)
slept = time.monotonic() - t0 >= 0.29
a, b = socket.socketpair()
ready = select.select([a], [], [], 0.3)[0]
b.settimeout(None)
a.settimeout(0.3)
try:
    a.recv(10)
    recv = "data"
except socket.timeout:
    recv = "timeout"
signal.setitimer(signal.ITIMER_REAL, 0)

signal.setitimer(signal.ITIMER_PROF, 0.02)
x = 0
while counts["prof"] == 0:
    x += 1
signal.setitimer(signal.ITIMER_PROF, 0)
signal.raise_signal(signal.SIGINT)
print("slept", slept, "select", ready, "recv", recv, "alarms>=10", counts["alrm"] >= 10,
      "prof", counts["prof"], "int", counts["int"], flush=True)
sys.exit(3)
