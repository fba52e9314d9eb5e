"""Task windows (peakline.tasks) and the profile's task_keys (peakline.model.task_keys) on
synthetic clocks and timelines: CPU shared between overlapping tasks, heap figures read off
the timeline, and how merged profiles combine the prefixes."""

from __future__ import annotations

import pytest

from peakline import tasks as tasks_module
from peakline.model.task_keys import merge_task_keys, task_key_fields
from peakline.tasks import TaskWindows


class _Clocks:
    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 100.0

    def advance(self, wall_s: float, cpu_s: float) -> None:
        self.wall += wall_s
        self.cpu += cpu_s


@pytest.fixture
def clocks(monkeypatch):
    c = _Clocks()
    monkeypatch.setattr(tasks_module.time, "process_time", lambda: c.cpu)
    monkeypatch.setattr(tasks_module.time, "perf_counter", lambda: c.wall)
    return c


def test_overlapping_tasks_share_the_cpu_of_their_common_time(clocks):
    windows = TaskWindows(started_mono=100.0)
    clocks.advance(1.0, 0.5)            # before any task: nobody's
    windows.started("a-1", "a")
    clocks.advance(1.0, 1.0)            # a alone
    windows.started("b-1", "b")
    windows.started("b-1", "b")         # reported twice (two plugins): once
    clocks.advance(1.0, 2.0)            # a and b: 1.0 each
    windows.ended("a-1")
    clocks.advance(1.0, 0.25)           # b alone
    windows.ended("b-1")
    windows.ended("b-1")
    clocks.advance(1.0, 3.0)            # after: nobody's
    assert windows.totals == {"a": [1, 2.0, 2.0], "b": [1, 2.0, 1.25]}
    assert windows.windows == [("a", 1.0, 3.0), ("b", 2.0, 4.0)]


def test_task_running_at_stop_ends_with_the_session(clocks):
    windows = TaskWindows(started_mono=100.0)
    windows.started("a-1", "a")
    clocks.advance(2.0, 1.5)
    snapshot = windows.open_copies(2.0)
    assert snapshot.totals == {"a": [1, 2.0, 1.5]} and windows.totals == {}
    windows.close_all(2.0)
    assert windows.totals == {"a": [1, 2.0, 1.5]}


def test_heap_figures_come_from_the_timeline_with_its_clock_shift(clocks):
    windows = TaskWindows(started_mono=100.0)
    clocks.advance(1.1, 0.0)
    windows.started("hold-1", "hold")   # timeline time 1.0 (shift 0.1)
    clocks.advance(1.0, 0.3)
    windows.ended("hold-1")             # timeline time 2.0
    timeline = [[0.0, 10], [0.5, 50], [1.2, 150], [1.8, 120], [2.5, 400]]
    (row,) = task_key_fields(windows, timeline, shift_s=0.1)
    assert row == {"prefix": "hold", "tasks": 1, "wall_s": pytest.approx(1.0),
                   "cpu_s": pytest.approx(0.3), "processes": 1, "peak_bytes": 150,
                   "rise_bytes": 100}
    (cpu_only,) = task_key_fields(windows, None)
    assert "peak_bytes" not in cpu_only and "rise_bytes" not in cpu_only


def test_merged_prefixes_add_up_and_keep_the_largest_heap_figures():
    doc = {"task_keys": [{"prefix": "a", "tasks": 2, "wall_s": 1.0, "cpu_s": 0.5,
                          "processes": 1, "peak_bytes": 100, "rise_bytes": 40}]}
    merge_task_keys(doc, {})
    merge_task_keys(doc, {"task_keys": [
        {"prefix": "a", "tasks": 1, "wall_s": 2.0, "cpu_s": 0.25, "processes": 1,
         "peak_bytes": 80, "rise_bytes": 60},
        {"prefix": "b", "tasks": 3, "wall_s": 1.0, "cpu_s": 2.0, "processes": 1}]})
    assert doc["task_keys"] == [
        {"prefix": "b", "tasks": 3, "wall_s": 1.0, "cpu_s": 2.0, "processes": 1},
        {"prefix": "a", "tasks": 3, "wall_s": 3.0, "cpu_s": 0.75, "processes": 2,
         "peak_bytes": 100, "rise_bytes": 60}]
