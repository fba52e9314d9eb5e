"""Ends by os._exit, or sleeps until SIGTERM, with a daemon thread running forever."""
import os
import sys
import threading
import time


def spin():
    while True:
        time.sleep(0.01)


threading.Thread(target=spin, daemon=True).start()
total = sum(i * i for i in range(400_000))  # LINE work
mode = sys.argv[1]
print("ready", flush=True)
if mode == "os_exit":
    os._exit(4)
elif mode == "sigterm":
    time.sleep(60)
print("end", flush=True)
