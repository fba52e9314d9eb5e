"""One run's profile, read through the model, boiled down to what a sweep fits and charts:
the whole program's figures and, per line / function / phase, memory and time. This summary
is embedded in sweep.json (``runs[].summary``), so the sweep is rendered again and refitted
without the profile files (docs/sweep.md, "Run summary").
"""

from __future__ import annotations

from typing import Any

from peakline.model.profile import Profile

# A line or function is kept in the summary when it reached any of these in the run; the
# rest is noise under the samplers' resolution and only makes the file bigger.
KEEP_BYTES = 64 * 1024
KEEP_TIME_FRACTION = 0.002


def _text(filename: str, lineno: int, cache: dict[str, list[str] | None]) -> str:
    if filename not in cache:
        from peakline.reporters._source import read_source
        cache[filename] = read_source(filename)[0]
    lines = cache[filename]
    if lines is None or not 0 < lineno <= len(lines):
        return ""
    return lines[lineno - 1].strip()


def summarise(profile: Profile) -> dict[str, Any]:
    """The run summary of ``profile`` (plain JSON data)."""
    sampled = profile.sampled_s
    min_time = max(profile.options.cpu_sampling_interval_s, KEEP_TIME_FRACTION * sampled)

    def keep(record) -> bool:
        return (record.alloc_bytes >= KEEP_BYTES or (record.live_at_peak_bytes or 0) >= KEEP_BYTES
                or record.total_s >= min_time)

    cache: dict[str, list[str] | None] = {}
    lines = [{"file": f, "lineno": line.lineno, "text": _text(f, line.lineno, cache),
              **_usage(line)} for f, line in profile.lines() if keep(line)]
    functions = [{"file": f, "function": fn.name, "lineno": fn.lineno, **_usage(fn)}
                 for f, fn in profile.functions() if keep(fn)]
    phases = [{"name": p.name, "wall_s": p.wall_s, "cpu_s": p.cpu_s,
               "peak_bytes": p.peak_bytes, "net_bytes": p.net_bytes}
              for p in profile.phases or ()]
    alloc_total = sum(line.alloc_bytes for _, line in profile.lines())
    if profile.memory is not None:
        alloc_total += profile.memory.unattributed_alloc_bytes
    return {
        "peak_bytes": profile.peak_bytes,
        "peak_rss_bytes": profile.peak_rss_bytes,
        "cpu_s": profile.totals.cpu_s,
        "time_s": profile.sampled_s,
        "elapsed_s": profile.elapsed_s,
        "gpu_peak_bytes": profile.gpu.peak_bytes if profile.gpu is not None else None,
        "alloc_bytes": alloc_total if profile.has_memory else None,
        "cpu_sampling_interval_s": profile.options.cpu_sampling_interval_s,
        "memory_sampling_interval_bytes": (profile.memory.sampling_interval_bytes
                                           if profile.memory is not None else None),
        "lines": lines,
        "functions": functions,
        "phases": phases,
    }


def _usage(record) -> dict[str, Any]:
    return {"alloc_bytes": record.alloc_bytes, "live_at_peak_bytes": record.live_at_peak_bytes,
            "cpu_s": record.cpu_s, "time_s": record.total_s}
