"""Throughput and memory of a steady process before and after 20 `peakline attach`
attach/detach cycles, next to the same windows without any attach (the machine's own noise).

    python benchmarks/attach_cycles.py        # four runs, ~1 min; figures in docs/long-running.md

The target is tests/programs/attach_target.py (steady mode), driven through the test suite's
Target helper; throughput is work units per second of wall time and of the target's CPU time,
in a 6 s window after the cycles over a 6 s window before them.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

from test_attach import Target  # noqa: E402

from peakline.attach import Attachment  # noqa: E402
from peakline.session import SessionOptions  # noqa: E402

WINDOW_S = 6.0


def run(cycles: int):
    t = Target("steady", "300", "3")
    try:
        t.wait_for("progress")
        time.sleep(1)
        a = time.monotonic()
        time.sleep(WINDOW_S)
        before = t.units_per_s(a, time.monotonic())
        before_cpu = t.units_per_s(a, time.monotonic(), clock=3)
        rss0 = t.rss_bytes()
        for _ in range(cycles):
            Attachment.attach(t.proc.pid, SessionOptions()).detach()
        rss1 = t.rss_bytes()
        a = time.monotonic()
        time.sleep(WINDOW_S)
        after = t.units_per_s(a, time.monotonic())
        after_cpu = t.units_per_s(a, time.monotonic(), clock=3)
        t.proc.terminate()
        rc, err = t.finish(30)
        return after / before, after_cpu / before_cpu, (rss1 - rss0) / 2**20, rc, err
    finally:
        t.kill()


def main() -> None:
    for label, cycles in (("no attach", 0), ("20 cycles", 20), ("no attach", 0), ("20 cycles", 20)):
        ratio, cpu_ratio, rss, rc, err = run(cycles)
        print(f"{label}: throughput after/before {ratio:.3f} per wall second, {cpu_ratio:.3f} "
              f"per CPU second; resident {rss:+.2f} MiB; exit {rc}; stderr {err!r}", flush=True)


if __name__ == "__main__":
    main()
