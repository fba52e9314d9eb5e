"""Children that use peakline themselves: `peakline run` and `peakline.profile()`."""
import os
import subprocess
import sys


def child(label, argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    print(label, "child rc", r.returncode, r.stdout.strip())
    sys.stderr.write(r.stderr)


out = sys.argv[1]
inner = os.path.join(out, "inner_program.py")
with open(inner, "w") as f:
    f.write("x = [bytearray(1000) for _ in range(10000)]\nprint('inner ran', len(x))\n")
child("cli", [sys.executable, "-m", "peakline", "run", "--no-report", "--outfile",
              os.path.join(out, "inner_cli.json"), inner])
code = ("import peakline\n"
        "with peakline.profile(outfile=%r) as p:\n"
        "    x = [bytearray(1000) for _ in range(10000)]\n"
        "print('api peak ok', p.profile.peak_bytes >= 10_000_000)\n"
        % os.path.join(out, "inner_api.json"))
child("api", [sys.executable, "-c", code])
code = ("import peakline\n"
        "@peakline.profile(outfile=%r, report=False)\n"
        "def work():\n"
        "    return [bytearray(1000) for _ in range(10000)]\n"
        "work()\n"
        "print('decorator profiled', work.last_profile is not None)\n"
        % os.path.join(out, "inner_decorator.json"))
child("decorator", [sys.executable, "-c", code])
