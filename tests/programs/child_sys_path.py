"""Prints what a child sees of its import path, with the same and with another Python."""
import subprocess
import sys

probe = ("import sys\n"
         "try:\n import numpy; print('numpy importable')\n"
         "except ImportError: print('no numpy')\n"
         "print(sys.path)\n")
for python in [sys.executable, *sys.argv[1:]]:
    r = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    print(python, r.returncode, r.stdout, r.stderr)
