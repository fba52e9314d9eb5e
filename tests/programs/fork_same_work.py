"""Six fork children do the same work, each on a line of its own: their sampled estimates
must be independent draws, not one draw repeated."""
import os

N = 60_000  # bytes(400): 433 bytes each with the header, 26 MB a child
pids = []
for k in range(6):
    pid = os.fork()
    if pid == 0:
        if k == 0:
            junk = [bytes(400) for _ in range(N)]  # LINE c0
        elif k == 1:
            junk = [bytes(400) for _ in range(N)]  # LINE c1
        elif k == 2:
            junk = [bytes(400) for _ in range(N)]  # LINE c2
        elif k == 3:
            junk = [bytes(400) for _ in range(N)]  # LINE c3
        elif k == 4:
            junk = [bytes(400) for _ in range(N)]  # LINE c4
        else:
            junk = [bytes(400) for _ in range(N)]  # LINE c5
        os._exit(0)
    pids.append(pid)
print("exit codes", [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids])
