"""Benchmark harness: workloads x tools, run interleaved, summarised as ratios to the plain run.

The pipeline, one module per stage:

    workloads.py    what to run (scripts with a size knob)
    tools.py        how each profiler wraps a run (plain, peakline, scalene, py-spy, pyinstrument)
    environment.py  the benchmark's own virtual environment and the machine description
    timing.py       interleaved repetitions, one subprocess per measurement
    summary.py      medians and ratios from the raw measurements
    report.py       docs/benchmarks.md (+ raw JSON); chart.py draws the PNG inside the venv

Only the standard library is used here, so the harness runs under any interpreter; the
profilers and the workloads run under the benchmark environment's interpreter.
"""
