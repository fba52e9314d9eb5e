"""Replaces itself with os.execv (stage 1 -> stage 2), like CLIs and reloaders that re-exec.
With "child", it first runs itself as a subprocess that execs with os.execve and an explicit
copy of the environment."""
import os
import subprocess
import sys


def report():
    print("pythonpath", os.environ.get("PYTHONPATH", "<unset>"))
    print("peakline variables", sorted(k for k in os.environ if k.startswith("PEAKLINE")))


if sys.argv[1:2] == ["stage2"]:
    s = 0
    for i in range(1_000_000):
        s += i
    print("stage2 done", s)
    report()
    sys.exit(7)
if sys.argv[1:2] == ["child"]:
    x = [bytearray(1000) for _ in range(5000)]
    print("child stage1", flush=True)
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), "stage2"],
              dict(os.environ))
if sys.argv[1:2] == ["api"]:  # run with plain python: the API profiles, then the exec
    import peakline
    peakline.start(outfile=sys.argv[2])
    x = [bytearray(1000) for _ in range(10000)]
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "stage2"])
if sys.argv[1:2] == ["parent"]:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "child"],
                       capture_output=True, text=True)
    print("child rc", r.returncode)
    print(r.stdout, end="")
    sys.exit(0)
x = [bytearray(1000) for _ in range(10000)]  # LINE alloc
s = 0
for i in range(3_000_000):  # LINE loop
    s += i
print("stage1 exec", flush=True)
os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "stage2"])
