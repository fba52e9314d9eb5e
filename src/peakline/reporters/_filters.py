"""Which lines, functions and files a report shows: ``ReportFilter``.

A line is *active* when its share of sampled time (CPU + wait) reaches
``cpu_percent_threshold`` percent, or it allocated at least ``malloc_threshold_bytes``
(Python + native, sampled estimate). In full mode every line is shown and the filter only
decides what the reduced view would keep; with ``reduced`` (``--reduced-profile``, implied by
giving either threshold on the command line) only active lines, functions and files are shown.
"""

from __future__ import annotations

from typing import NamedTuple

from peakline.model.profile import FileRecord, FunctionRecord, LineRecord
from peakline.reporters import DEFAULT_CPU_PERCENT_THRESHOLD, DEFAULT_MALLOC_THRESHOLD_BYTES


class ReportFilter(NamedTuple):
    reduced: bool = False
    cpu_percent_threshold: float = DEFAULT_CPU_PERCENT_THRESHOLD
    malloc_threshold_bytes: int = DEFAULT_MALLOC_THRESHOLD_BYTES
    sampled_s: float = 0.0  # the profile's denominator for percentages

    def share(self, seconds: float) -> float:
        return 0.0 if self.sampled_s <= 0 else 100.0 * seconds / self.sampled_s

    def _allocates(self, alloc_bytes: int) -> bool:
        return alloc_bytes > 0 and alloc_bytes >= self.malloc_threshold_bytes

    def line_active(self, line: LineRecord) -> bool:
        return (self.share(line.total_s) >= self.cpu_percent_threshold
                or self._allocates(line.alloc_bytes))

    def function_active(self, function: FunctionRecord) -> bool:
        alloc = (function.alloc_python_bytes or 0) + (function.alloc_native_bytes or 0)
        return (self.share(function.inclusive_s) >= self.cpu_percent_threshold
                or self._allocates(alloc))

    def file_active(self, record: FileRecord) -> bool:
        return any(map(self.line_active, record.lines)) or \
            any(map(self.function_active, record.functions))

    def describe(self) -> str:
        """``1% of time or 1.0 MiB allocated``: what "below threshold" means, for notes."""
        from peakline.reporters._format import human_bytes
        return (f"{self.cpu_percent_threshold:g}% of time or "
                f"{human_bytes(self.malloc_threshold_bytes)} allocated")
