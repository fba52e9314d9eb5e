"""How a calibration program reports what it really did, for harness/accuracy.py to compare.

The harness sets PEAKLINE_CALIBRATION_TRUTH to a file path; the program measures its own
truth (phase wall times, each thread's CPU time, object sizes) and writes it there as JSON.
Run by hand, without the variable, the truth is printed to stdout instead.
"""

import json
import os
import sys


def write(truth: dict) -> None:
    path = os.environ.get("PEAKLINE_CALIBRATION_TRUTH")
    text = json.dumps(truth, indent=1)
    if path:
        with open(path, "w") as handle:
            handle.write(text)
    else:
        print(text)


def seconds(default: float) -> float:
    """argv[1]: a length knob (seconds of each phase), so smoke runs can be short."""
    return float(sys.argv[1]) if len(sys.argv) > 1 else default
