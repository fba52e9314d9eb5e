"""Rewrites constraints/test.txt: the exact versions pip resolves today for `.[test]`.

The test command installs with these pins, so a fresh machine tests against the versions the
suite was last checked with. Refresh on purpose: run this, run `bash scripts/test.sh` in a
fresh virtual environment, and commit the new pins with the suite's result.

    python scripts/pin_test_constraints.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "constraints", "test.txt")
HEADER = """\
# Versions the test environment is pinned to: scripts/test.sh installs
# `pip install -c constraints/test.txt '.[test]'`, so a fresh machine tests against what the
# suite was last checked with, not whatever the registry serves that day.
# Written by scripts/pin_test_constraints.py (the resolution of `.[test]` for CPython {py});
# refresh on purpose and rerun the suite.
"""


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run",
                        "--ignore-installed", "--report", report, f"{ROOT}[test]"],
                       check=True)
        with open(report, encoding="utf-8") as f:
            resolved = json.load(f)["install"]
    pins = sorted((item["metadata"]["name"], item["metadata"]["version"]) for item in resolved
                  if item["metadata"]["name"].lower() != "peakline")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(HEADER.format(py="%d.%d" % sys.version_info[:2]))
        f.writelines(f"{name}=={version}\n" for name, version in pins)
    print(f"{len(pins)} pins written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
