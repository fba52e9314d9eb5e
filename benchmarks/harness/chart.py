"""Draw the overhead chart from the raw JSON. Runs inside the benchmark venv (needs matplotlib).

One panel per tool group (CPU-only modes, full / memory modes): per workload, each tool's
median wall-time ratio to the unprofiled run, on a log scale (the memory tools reach 10x+).

Usage: python chart.py RESULTS.json OUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GROUPS = {"cpu": "CPU-only modes", "full": "Full / memory modes"}


def main(results_path, out_path):
    with open(results_path) as handle:
        data = json.load(handle)
    per_workload = data["summary"]["per_workload"]
    workloads = list(per_workload)
    groups = {}
    for tool, info in data["tools"].items():
        if tool != "plain":
            groups.setdefault(info.get("group", "cpu"), []).append(tool)
    panels = [g for g in GROUPS if g in groups]
    if not workloads or not panels:
        return
    figure, axes_list = plt.subplots(len(panels), 1, squeeze=False,
                                     figsize=(2.0 + 0.9 * len(workloads), 3.6 * len(panels)))
    for axes, group in zip(axes_list[:, 0], panels):
        tools = groups[group]
        width = 0.8 / len(tools)
        for index, tool in enumerate(tools):
            # Runs killed at a capped tool's time limit: the lower bound, hatched.
            ratios = [per_workload[w][tool]["ratio"]
                      or per_workload[w][tool].get("ratio_at_least") or 0.0 for w in workloads]
            bounded = any(per_workload[w][tool].get("ratio_at_least") for w in workloads)
            positions = [i + (index - (len(tools) - 1) / 2) * width for i in range(len(workloads))]
            median = data["summary"]["per_tool"][tool]["median_ratio"]
            label = tool + (f" (median {'≥ ' if bounded else ''}{median:.2f}x"
                            f"{', hatched: killed, lower bound' if bounded else ''})"
                            if median else " (failed)")
            axes.bar(positions, ratios, width, label=label, hatch="//" if bounded else None)
        axes.axhline(1.0, color="black", linewidth=0.8)
        axes.set_yscale("log")
        axes.set_xticks(range(len(workloads)), workloads, rotation=30, ha="right", fontsize=8)
        axes.set_ylabel("wall time / unprofiled")
        axes.set_title(f"{GROUPS[group]}: overhead, median of "
                       f"{data['settings']['repetitions']} runs ({data['machine']['python']}); "
                       "lower is better", fontsize=10)
        axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(out_path, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
