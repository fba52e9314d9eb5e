"""A child ended by an uncaught KeyboardInterrupt dies by SIGINT (CPython >= 3.8)."""
import subprocess
import sys

p = subprocess.run([sys.executable, "-c",
                    "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
                    "for _ in range(999): time.sleep(0.01)"], stderr=subprocess.PIPE)
print("child rc", p.returncode)
