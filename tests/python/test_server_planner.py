"""The co-location planner (peakline.server.planner) and the timeline summary it reads
(peakline.server.summary), against footprints whose answer is known exactly.

Stochastic checks state their false-failure odds: with 2000 trials an estimated probability
p has a standard deviation of at most sqrt(0.25 / 2000) = 0.011; the tolerances below are
0.05 (4.5 standard deviations: odds below 1e-5 per check). The generator is seeded, so in
practice each check gives the same answer every time.
"""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")

from peakline.server.planner import GRID_STEPS, Footprint, plan  # noqa: E402
from peakline.server.summary import resample  # noqa: E402

GiB = 1 << 30


def pulse_model(name: str, *, base: int, top: int, share: float, wall_s: float = 10.0,
                rss_extra: int = 0) -> Footprint:
    """A footprint at ``top`` for the first ``share`` of its cycle, ``base`` otherwise."""
    bins = [top if i < share * 256 else base for i in range(256)]
    return Footprint(name=name, version="1", run_id=1, duration_s=wall_s, heap_peak_bytes=top,
                     rss_peak_bytes=top + rss_extra if rss_extra else None,
                     gpu_peak_bytes=None, bin_s=wall_s / 256, heap_bins=bins)


def test_two_quarter_cycle_peaks_collide_half_the_time():
    # each is at 1 GiB for a quarter of its cycle; together they exceed 1.5 GiB exactly when
    # the two quarters overlap: offsets closer than a quarter cycle, probability 2 x 1/4
    # (on the grid: 255 of 512 offsets)
    a = pulse_model("a", base=0, top=GiB, share=0.25)
    b = pulse_model("b", base=0, top=GiB, share=0.25)
    result = plan([a, b], int(1.5 * GiB))
    assert result["worst_case_bytes"] == 2 * GiB and not result["worst_case_fits"]
    assert result["estimate"]["exceed_probability"] == pytest.approx(255 / GRID_STEPS, abs=0.05)
    assert result["estimate"]["max_bytes"] == 2 * GiB
    assert result["estimate"]["p50_bytes"] in (GiB, 2 * GiB)
    assert result["verdict"] == "may_exceed"
    # in every trial that exceeds, both are at their peaks
    assert result["collisions"] == [{"models": ["a", "b"], "share": 1.0}]


def test_a_model_always_at_its_peak_adds_its_peak_in_every_trial():
    steady = pulse_model("steady", base=GiB, top=GiB, share=1.0)
    spiky = pulse_model("spiky", base=0, top=GiB, share=0.1)
    result = plan([steady, spiky], int(1.5 * GiB), trials=300)
    # over one cycle the spike is always reached, and steady is there to meet it
    assert result["estimate"]["exceed_probability"] == 1.0
    assert result["estimate"]["p50_bytes"] == 2 * GiB
    assert result["verdict"] == "does_not_fit"


def test_worst_case_counts_the_non_heap_memory_and_fits_when_it_fits():
    a = pulse_model("a", base=0, top=GiB, share=0.5, rss_extra=256 << 20)
    b = pulse_model("b", base=0, top=GiB, share=0.5)
    result = plan([a, b], 4 * GiB, gpu_memory_bytes=GiB)
    assert result["worst_case_bytes"] == 2 * GiB + (256 << 20)
    assert result["verdict"] == "fits" and result["estimate"]["exceed_probability"] == 0.0
    # the non-heap part (RSS - heap peak) is always there: the lowest total is a's overhead
    # plus whatever parts of the two pulses meet
    assert result["estimate"]["max_bytes"] <= result["worst_case_bytes"]
    assert result["gpu"] == {"memory_bytes": GiB, "worst_case_bytes": 0,
                             "worst_case_fits": True, "unmeasured": ["a", "b"]}


def test_the_same_seed_gives_the_same_plan_and_models_without_a_timeline_count_their_peak():
    models = [pulse_model(str(i), base=GiB // 8, top=GiB // 2, share=0.2 + 0.1 * i)
              for i in range(4)]
    assert plan(models, GiB, seed=7) == plan(models, GiB, seed=7)
    flat = Footprint(name="cpu-only", version="1", run_id=9, duration_s=3.0,
                     heap_peak_bytes=None, rss_peak_bytes=GiB, gpu_peak_bytes=None, bin_s=0.0,
                     heap_bins=[])
    result = plan([flat], 2 * GiB, trials=50)
    assert result["estimate"]["p50_bytes"] == result["worst_case_bytes"] == GiB


def test_resampling_keeps_every_spike_and_the_level_between_points():
    points = [[0.0, 0], [1.0, 100], [1.001, 5000], [1.002, 100], [9.0, 0], [10.0, 0]]
    bins = resample(points, 10.0, bins=10)
    assert bins["bin_s"] == 1.0
    # bin 1 holds the 5000-byte spike; bins 2-8 the 100 bytes held until t = 9
    assert bins["bytes"] == [0, 5000, 100, 100, 100, 100, 100, 100, 100, 100]
    assert resample([], 1.0) == {"bin_s": 0.0, "bytes": []}
