"""Draw the overhead chart from the raw JSON. Runs inside the benchmark venv (needs matplotlib).

Usage: python chart.py RESULTS.json OUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results_path, out_path):
    with open(results_path) as handle:
        data = json.load(handle)
    per_workload = data["summary"]["per_workload"]
    workloads = list(per_workload)
    tools = [t for t in data["tools"] if t != "plain"]
    width = 0.8 / max(1, len(tools))
    figure, axes = plt.subplots(figsize=(1.6 + 1.5 * len(workloads), 4.2))
    for index, tool in enumerate(tools):
        ratios = [per_workload[w][tool]["ratio"] or 0.0 for w in workloads]
        positions = [i + (index - (len(tools) - 1) / 2) * width for i in range(len(workloads))]
        bars = axes.bar(positions, ratios, width, label=tool)
        axes.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(workloads)), workloads)
    axes.set_ylabel("wall time / unprofiled (lower is better)")
    axes.set_title(f"CPU-only profiling overhead, median of "
                   f"{data['settings']['repetitions']} runs ({data['machine']['python']})")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out_path, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
