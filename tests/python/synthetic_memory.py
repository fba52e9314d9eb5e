"""A synthetic memory profile for reporter tests: conftest's ``app_profile`` (CPU numbers in its
docstring) plus memory fields whose expected renderings are known exactly.

    line 3  (# HOT)     50 MiB Python, all freed: net 0, a spike in the middle of the run
    line 5  (# NATIVE) 200 MiB native, kept: net +200 MiB, holds 200 MiB (34%) at the peak;
                        copies 1 GiB at 429.5 MB/s
    line 9  (# WAIT)    a leak: 80 MiB native, growing to the end; likelihood 0.99, +32 MiB/s;
                        holds 60 MiB (10%) at the peak
    line 11 (# COLD)    5 MiB Python kept; likelihood 0.90 (under the report threshold);
                        holds 5 MiB (<5%) at the peak, so it is not singled out
    run: peak 590.5 MiB at 0.91 s, peak RSS 700 MiB, growth +12 MiB/s, 285 MiB live at end
"""

from __future__ import annotations

import copy

from peakline.model.profile import Memory, Profile

MiB = 1 << 20
PEAK_BYTES = 619_184_128  # 590.5 MiB

LINES = {
    3: dict(alloc_python_bytes=50 * MiB, alloc_native_bytes=0, free_bytes=50 * MiB,
            net_bytes=0, live_at_peak_bytes=0,
            timeline=[[0.0, 0], [1.0, 50 * MiB], [1.2, 0]],
            leak_likelihood=0.0, leak_rate_bytes_s=0.0, copy_bytes=0, copy_mb_s=0.0),
    5: dict(alloc_python_bytes=0, alloc_native_bytes=200 * MiB, free_bytes=0,
            net_bytes=200 * MiB, live_at_peak_bytes=200 * MiB,
            timeline=[[0.2, 0], [0.4, 200 * MiB]],
            leak_likelihood=0.0, leak_rate_bytes_s=0.0, copy_bytes=1 << 30, copy_mb_s=429.5),
    9: dict(alloc_python_bytes=0, alloc_native_bytes=80 * MiB, free_bytes=0,
            net_bytes=80 * MiB, live_at_peak_bytes=60 * MiB,
            timeline=[[0.5, 10 * MiB], [1.0, 20 * MiB], [1.5, 40 * MiB], [2.0, 60 * MiB],
                      [2.5, 80 * MiB]],
            leak_likelihood=0.99, leak_rate_bytes_s=32.0 * MiB, copy_bytes=0, copy_mb_s=0.0),
    11: dict(alloc_python_bytes=5 * MiB, alloc_native_bytes=0, free_bytes=0,
             net_bytes=5 * MiB, live_at_peak_bytes=5 * MiB,
             timeline=[[2.0, 0], [2.2, 5 * MiB]],
             leak_likelihood=0.90, leak_rate_bytes_s=1.0 * MiB, copy_bytes=0, copy_mb_s=0.0),
}


def with_memory(profile: Profile) -> Profile:
    """A copy of ``profile`` (conftest.app_profile) with the memory fields above."""
    out = copy.deepcopy(profile)
    for record in out.files.values():
        for line in record.lines:
            for name, value in LINES.get(line.lineno, {}).items():
                setattr(line, name, copy.deepcopy(value))
        for function in record.functions:
            mine = [LINES[ln.lineno] for ln in record.lines if ln.lineno in LINES
                    and _owner(record, ln.lineno) is function]
            for name in ("alloc_python_bytes", "alloc_native_bytes", "free_bytes", "net_bytes",
                         "live_at_peak_bytes", "copy_bytes"):
                setattr(function, name, sum(m[name] for m in mine))
    out.peak_bytes = PEAK_BYTES
    out.peak_rss_bytes = 700 * MiB
    out.timeline = [[0.0, 0], [0.4, 200 * MiB], [0.91, PEAK_BYTES], [1.2, 250 * MiB],
                    [2.5, 285 * MiB]]
    out.memory = Memory(sampling_interval_bytes=512 * 1024, peak_time_s=0.91,
                        live_end_bytes=285 * MiB, growth_rate_bytes_s=12.0 * MiB)
    return out


def _owner(record, lineno):
    best = None
    for function in sorted(record.functions, key=lambda f: f.lineno):
        if function.lineno <= lineno:
            best = function
    return best
