"""execs that cannot go ahead raise what they raise unprofiled, and the program carries on
profiled."""
import os
import sys

for path, argv in (("/nonexistent/prog", ["prog"]), (sys.executable, ()),
                   (sys.executable, [""]), ("/nonexistent/prog", [])):
    try:
        os.execv(path, argv)
    except (OSError, ValueError) as error:
        print(type(error).__name__)
for env in ({"A=B": "1"}, {"A": "1\0"}, {"": "1"}):
    try:
        os.execve(sys.executable, [sys.executable, "-c", "pass"], env)
    except ValueError as error:
        print(type(error).__name__)
print("peakline variables", sorted(k for k in os.environ if k.startswith("PEAKLINE")) != [])
data = [bytearray(1000) for _ in range(10_000)]  # LINE after
print("done")
sys.exit(3)
