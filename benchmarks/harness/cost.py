"""Cost: what each tool adds to a long run, besides time — memory, and the size of its output.

One run of calibration/long_loop.py (a mixed loop: dict/list churn and sha256, SECONDS long,
30 by default; it stops at a deadline, so a slower tool does less work in the same time) plain
and under every tool, one after the other.

* max RSS: os.wait4()'s ru_maxrss for the child — the largest resident set of the process
  tree the harness started (the profiled interpreter, or a tool's own process where that is
  larger: py-spy is the parent of the interpreter it samples, Fil and Scalene re-exec the
  interpreter, memray writes from inside it). Extra memory = that minus the plain run's.
* output: the bytes of everything the tool wrote into its scratch directory (a profile, a
  capture file, an HTML report directory).
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import sys
import tempfile

from . import timing

LONG_LOOP = pathlib.Path(__file__).resolve().parent.parent / "calibration" / "long_loop.py"


@dataclasses.dataclass
class CostRun:
    tool: str
    seconds: float  # the loop's length
    wall_s: float
    exit_code: int
    max_rss_kb: int
    output_bytes: int
    stderr_tail: str = ""


def measure(envs, tools: list, *, seconds: float, timeout_s: float) -> list[CostRun]:
    """`envs`: environment.BenchEnvs; the loop needs no torch, so each tool runs in the
    environment without it unless it is registered in the torch one."""
    runs = []
    for tool in tools:
        env = envs.for_run(None, tool)
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="peakline-cost-"))
        try:
            argv = tool.build(env, [str(LONG_LOOP), repr(seconds)], scratch)
            capped = tool.run_timeout_s is not None
            limit = seconds + tool.run_timeout_s if capped else max(timeout_s, 20 * seconds)
            wall, code, rss, tail = timing._run_once(
                argv, scratch, limit,
                memory_limit_kb=timing.CAPPED_RSS_LIMIT_KB if capped else None)
            if code == -9 and capped:
                tail = (f"killed after {wall:.0f} s at {rss / 2**20:.1f} GiB resident (limits "
                        f"for capped tools: {limit:.0f} s, "
                        f"{timing.CAPPED_RSS_LIMIT_KB / 2**20:.0f} GiB)")
            output = timing._output_bytes(scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        runs.append(CostRun(tool.name, seconds, wall, code, rss, output, tail))
        print(f"[bench] cost {tool.name:<13} {wall:6.1f} s  max RSS {rss / 1024:7.1f} MiB  "
              f"output {output / 1024:9.1f} KiB" + ("" if code == 0 else f"  EXIT {code}"),
              file=sys.stderr, flush=True)
    return runs


def summarise(runs: list[CostRun]) -> dict:
    plain = next((r for r in runs if r.tool == "plain" and r.exit_code == 0), None)
    rows = {}
    for run in runs:
        ok = run.exit_code == 0
        rows[run.tool] = {
            "wall_s": run.wall_s,
            "max_rss_kb": run.max_rss_kb if ok else None,
            "extra_rss_kb": (run.max_rss_kb - plain.max_rss_kb) if ok and plain else None,
            "output_bytes": run.output_bytes if ok else None,
            "failed": None if ok else f"exit {run.exit_code}: {run.stderr_tail.strip()[-300:]}",
        }
    return rows
