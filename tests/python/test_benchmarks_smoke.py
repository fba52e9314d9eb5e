"""The overhead benchmark (benchmarks/run_overhead.py) cannot silently rot.

The full benchmark never runs in the tests (too slow and noisy); its --smoke mode does: tiny
workloads, one repetition, plain + peakline under this interpreter, report written to tmp_path.
The summary arithmetic is checked separately on synthetic measurements.
"""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"


@pytest.fixture
def harness(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    from harness import summary, timing

    return summary, timing


def test_smoke_run_writes_report_with_finite_ratios(tmp_path):
    report, data = tmp_path / "benchmarks.md", tmp_path / "benchmarks.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "run_overhead.py"), "--smoke",
         "--report", str(report), "--json", str(data)],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert report.is_file() and "| peakline |" in report.read_text()
    results = json.loads(data.read_text())
    assert results["settings"]["smoke"] is True
    per_workload = results["summary"]["per_workload"]
    assert {"nbody", "fib", "json_roundtrip", "object_churn"} <= set(per_workload)
    for workload, rows in per_workload.items():
        ratio = rows["peakline"]["ratio"]
        assert ratio is not None and math.isfinite(ratio) and ratio > 0, (workload, rows)
    stats = results["summary"]["per_tool"]["peakline"]
    for key in ("median_ratio", "worst_ratio"):
        assert math.isfinite(stats[key]) and stats[key] > 0


def test_summary_ratios_and_failures(harness):
    summary, timing = harness

    def m(workload, tool, rep, wall, code=0):
        return timing.Measurement(workload, tool, rep, wall, code, 1000, 0)

    measurements = [
        m("a", "plain", 0, 1.0), m("a", "plain", 1, 1.2), m("a", "plain", 2, 1.1),
        m("a", "x", 0, 1.1), m("a", "x", 1, 1.3), m("a", "x", 2, 1.2),
        m("b", "plain", 0, 2.0), m("b", "x", 0, 5.0),
        m("c", "plain", 0, 1.0), m("c", "x", 0, 9.0, code=1),
    ]
    figures = summary.summarise(measurements, ["a", "b", "c"], ["plain", "x"])
    assert figures["per_workload"]["a"]["x"]["ratio"] == pytest.approx(1.2 / 1.1)
    assert figures["per_workload"]["b"]["x"]["ratio"] == pytest.approx(2.5)
    assert figures["per_workload"]["c"]["x"]["ratio"] is None  # failed runs do not count
    per_tool = figures["per_tool"]["x"]
    assert per_tool["median_ratio"] == pytest.approx((1.2 / 1.1 + 2.5) / 2)
    assert per_tool["worst_ratio"] == pytest.approx(2.5) and per_tool["worst_workload"] == "b"
    assert per_tool["failed_workloads"] == ["c"]
