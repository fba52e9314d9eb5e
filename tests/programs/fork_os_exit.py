"""Fork children that do some work and end with os._exit (multiprocessing's way)."""
import os

data = [bytearray(1024) for _ in range(5000)]
pids = []
for k in range(3):
    pid = os.fork()
    if pid == 0:
        s = 0
        for i in range(1_000_000):
            s += i
        junk = [bytes(100) for _ in range(100_000)]  # LINE junk
        os._exit(10 + k)  # LINE exit
    pids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
print("exit codes", codes)
