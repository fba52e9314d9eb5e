"""Task windows: when each task of a task engine (Dask) ran in this process, for the profile's
per-key-prefix breakdown (``task_keys``, built by peakline.model.task_keys).

The engine says when a task starts and ends (Dask: a worker plugin's ``transition`` hook,
peakline.dask); :func:`task_started` / :func:`task_ended` record the window on the running
session's clock (``time.perf_counter`` since the session's start, as phases). CPU: the
process's CPU time (``time.process_time``) is read at every start and end, and the CPU
between two such events is divided equally among the tasks running then, so tasks that
overlap (a worker with several threads) share it and the windows never count a second twice.
The heap figures come later, from the run's exact timeline (peakline.model.task_keys).

Bounded: per prefix the totals (tasks, wall, CPU) are kept for every task; the windows that
the heap figures are read from, for the first ``MAX_WINDOWS`` tasks only.

Called on the engine's own thread (Dask: the worker's event loop) with the GIL held; guarded
by the GIL. A task that starts twice (two plugins reporting it) is recorded once.
"""

from __future__ import annotations

import time

MAX_WINDOWS = 100_000


class TaskWindows:
    """The task windows of one session (its ``tasks`` attribute)."""

    def __init__(self, started_mono: float) -> None:
        self._zero = started_mono
        self._open: dict[object, list] = {}      # key -> [prefix, start_s, cpu_s]
        self._last_cpu_s = 0.0
        self.totals: dict[str, list] = {}        # prefix -> [tasks, wall_s, cpu_s]
        self.windows: list[tuple[str, float, float]] = []  # (prefix, start_s, end_s)

    def _charge(self) -> None:
        """The CPU since the last event, shared by the tasks running since then."""
        now = time.process_time()
        if self._open:
            share = max(0.0, now - self._last_cpu_s) / len(self._open)
            for window in self._open.values():
                window[2] += share
        self._last_cpu_s = now

    def started(self, key: object, prefix: str) -> None:
        if key in self._open:
            return
        self._charge()
        self._open[key] = [prefix, time.perf_counter() - self._zero, 0.0]

    def ended(self, key: object) -> None:
        window = self._open.get(key)
        if window is None:
            return
        self._charge()
        del self._open[key]
        self._close(window, time.perf_counter() - self._zero)

    def close_all(self, at_s: float) -> None:
        """Tasks still running when the session stops end with it (at ``at_s``)."""
        if self._open:
            self._charge()
        for window in self._open.values():
            self._close(window, at_s)
        self._open.clear()

    def open_copies(self, at_s: float) -> TaskWindows:
        """A copy in which the tasks running now end at ``at_s`` (for a snapshot)."""
        copy = TaskWindows(self._zero)
        copy.totals = {k: list(v) for k, v in self.totals.items()}
        copy.windows = list(self.windows)
        copy._open = {k: list(v) for k, v in self._open.items()}
        copy._last_cpu_s = self._last_cpu_s
        copy.close_all(at_s)
        return copy

    def _close(self, window: list, end_s: float) -> None:
        prefix, start_s, cpu_s = window
        end_s = max(start_s, end_s)
        total = self.totals.setdefault(prefix, [0, 0.0, 0.0])
        total[0] += 1
        total[1] += end_s - start_s
        total[2] += cpu_s
        if len(self.windows) < MAX_WINDOWS:
            self.windows.append((prefix, start_s, end_s))

    def __bool__(self) -> bool:
        return bool(self.totals or self._open)


def _windows() -> TaskWindows | None:
    from peakline.session import current_session

    session = current_session()
    return session.task_windows() if session is not None else None


def task_started(key: object, prefix: str) -> None:
    """Task ``key`` (of ``prefix``) starts running in this process now."""
    windows = _windows()
    if windows is not None:
        windows.started(key, prefix)


def task_ended(key: object) -> None:
    """Task ``key`` stopped running in this process now (done, failed or cancelled)."""
    windows = _windows()
    if windows is not None:
        windows.ended(key)
