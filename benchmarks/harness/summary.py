"""From raw measurements to the figures in the report.

Per workload and tool: the median wall time over the repetitions that exited 0, and the ratio
median(tool) / median(plain). Per tool: the median and the worst (largest) of those ratios over
the workloads. A tool that failed on a workload is listed as failed there and left out of its
median/worst, so read the failure column beside them.
"""

from __future__ import annotations

import math
import signal
import statistics


def _describe_failure(measurement) -> str:
    code = measurement.exit_code
    if code < 0:
        try:
            status = f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            status = f"killed by signal {-code}"
    else:
        status = f"exit status {code}"
    tail = measurement.stderr_tail.strip()
    return f"{status}; stderr:\n{tail}" if tail else f"{status}; no stderr output"


def summarise(measurements, workload_names: list[str], tool_names: list[str]) -> dict:
    per_workload: dict[str, dict[str, dict]] = {}
    for workload in workload_names:
        rows = {}
        for tool in tool_names:
            runs = [m for m in measurements if m.workload == workload and m.tool == tool]
            ok = [m.wall_s for m in runs if m.exit_code == 0]
            rows[tool] = {
                "runs": len(runs),
                "failures": len(runs) - len(ok),
                "median_s": statistics.median(ok) if ok else None,
                "min_s": min(ok) if ok else None,
                "max_s": max(ok) if ok else None,
                "median_max_rss_kb": statistics.median(
                    [m.max_rss_kb for m in runs if m.exit_code == 0]) if ok else None,
                "median_output_bytes": statistics.median(
                    [m.output_bytes for m in runs if m.exit_code == 0]) if ok else None,
                "error": next((_describe_failure(m) for m in runs if m.exit_code != 0), ""),
            }
        baseline = rows["plain"]["median_s"]
        for tool in tool_names:
            median = rows[tool]["median_s"]
            rows[tool]["ratio"] = (median / baseline
                                   if median is not None and baseline else None)
            # Every run killed at the tool's time limit: the ratio is at least limit / plain.
            runs = [m for m in measurements if m.workload == workload and m.tool == tool]
            killed = [m.wall_s for m in runs if getattr(m, "timed_out", False)]
            rows[tool]["timed_out"] = len(killed)
            rows[tool]["ratio_at_least"] = (min(killed) / baseline
                                            if killed and median is None and baseline else None)
        per_workload[workload] = rows

    per_tool = {}
    for tool in tool_names:
        ratios = {w: per_workload[w][tool]["ratio"] for w in workload_names
                  if per_workload[w][tool]["ratio"] is not None}
        failed = [w for w in workload_names if per_workload[w][tool]["ratio"] is None
                  and not per_workload[w][tool].get("ratio_at_least")]
        every = {**ratios, **{w: per_workload[w][tool]["ratio_at_least"] for w in workload_names
                              if per_workload[w][tool].get("ratio_at_least")}}
        worst = max(every, key=every.get) if every else None
        bounds = {w: per_workload[w][tool]["ratio_at_least"] for w in workload_names
                  if per_workload[w][tool].get("ratio_at_least")}
        per_tool[tool] = {
            # Lower bounds of timed-out workloads count in the median as they are (an
            # underestimate); the worst is then at least the largest bound.
            "median_ratio": (statistics.median([*ratios.values(), *bounds.values()])
                             if ratios or bounds else None),
            "median_is_lower_bound": bool(bounds),
            "worst_is_lower_bound": bool(bounds) and (
                not ratios or max(bounds.values()) >= max(ratios.values())),
            "worst_ratio": every[worst] if worst else None,
            "worst_workload": worst,
            "geomean_ratio": (math.exp(statistics.fmean(math.log(r) for r in ratios.values()))
                              if ratios else None),
            "failed_workloads": failed,
        }
    return {"per_workload": per_workload, "per_tool": per_tool}
