"""Which models fit on one machine together (``GET /api/plan``, the planner page).

Each model is represented by its newest passing run: its *footprint* over time is the heap
timeline of that run (summary.py: equal bins, each the highest live heap within it) plus the
run's non-heap memory, taken as constant: ``max(0, peak RSS - heap peak)`` (interpreter,
code, libraries). Its peak footprint is therefore ``max(heap peak, peak RSS)``.

* Worst case: the sum of the peak footprints, as if every peak happened at the same moment.
* Realistic estimate: models sharing a machine run their workloads over and over, unaware of
  each other, so in steady state each one is at a random point of its own cycle. Each trial
  draws, for every model, a uniformly random offset into its footprint timeline (repeated
  cyclically), adds the footprints over one cycle of the longest model on a grid of
  GRID_STEPS steps, and keeps the highest total. The trials give the distribution of the
  combined peak (percentiles, a histogram) and the probability that it exceeds the machine.
  A model's timeline is resampled onto the grid by taking the highest value in each step,
  so the estimate never misses a short spike (it errs high for models much shorter than a
  grid step). The random generator is seeded (``seed``): one request always gives one answer.
* Collisions: at the moment of each trial's highest total, the models at or above
  COLLIDE_SHARE of their own peak footprint are "at their peak"; a pair of models collides in
  the share of the worst trials (those that exceed the machine, or the worst 5 % when none
  does) in which both are at their peak at that moment.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

GRID_STEPS = 512
DEFAULT_TRIALS = 2000
DEFAULT_SEED = 0
COLLIDE_SHARE = 0.9
WORST_SHARE = 0.05
MAX_TRIALS = 20_000


@dataclass
class Footprint:
    name: str
    version: str
    run_id: int
    duration_s: float
    heap_peak_bytes: int | None
    rss_peak_bytes: int | None
    gpu_peak_bytes: int | None
    bin_s: float
    heap_bins: list[int]

    @property
    def overhead_bytes(self) -> int:
        if self.rss_peak_bytes is None or self.heap_peak_bytes is None:
            return 0
        return max(0, self.rss_peak_bytes - self.heap_peak_bytes)

    @property
    def peak_bytes(self) -> int:
        return max(self.heap_peak_bytes or 0, self.rss_peak_bytes or 0)

    def on_grid(self, step_s: float) -> np.ndarray:
        """The footprint over one cycle in steps of ``step_s``, each the highest value within
        the step (at least one step)."""
        if not self.heap_bins or self.bin_s <= 0 or step_s <= 0:
            return np.array([float(self.peak_bytes)])
        values = np.asarray(self.heap_bins, dtype=float) + self.overhead_bytes
        steps = max(1, int(round(self.duration_s / step_s)))
        # bin i covers [i*bin_s, (i+1)*bin_s): the step(s) it overlaps take its value
        first = np.minimum(steps - 1, (np.arange(len(values)) * self.bin_s / step_s)
                           .astype(int))
        last = np.minimum(steps - 1, (((np.arange(len(values)) + 1) * self.bin_s / step_s)
                                      - 1e-9).astype(int))
        out = np.zeros(steps)
        for lo, hi, value in zip(first, last, values):
            out[lo:hi + 1] = np.maximum(out[lo:hi + 1], value)
        return out


def footprint_of(run: Mapping[str, Any]) -> Footprint:
    timeline = run.get("timeline") or {}
    return Footprint(name=run["model"], version=run["version"], run_id=run["id"],
                     duration_s=float(run["wall_s"]), heap_peak_bytes=run["peak_bytes"],
                     rss_peak_bytes=run["peak_rss_bytes"], gpu_peak_bytes=run["gpu_peak_bytes"],
                     bin_s=float(timeline.get("bin_s") or 0.0),
                     heap_bins=list(timeline.get("bytes") or []))


def plan(footprints: list[Footprint], memory_bytes: int, *, gpu_memory_bytes: int | None = None,
         trials: int = DEFAULT_TRIALS, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    if not footprints:
        raise ValueError("no models to plan")
    worst = sum(f.peak_bytes for f in footprints)
    horizon_s = max(f.duration_s for f in footprints)
    step_s = horizon_s / GRID_STEPS if horizon_s > 0 else 0.0
    grids = [f.on_grid(step_s) for f in footprints]
    rng = np.random.default_rng(seed)
    t = np.arange(GRID_STEPS if step_s > 0 else 1)
    # one (trials x steps) total; each model's part is added and dropped, so memory does not
    # grow with the number of models
    total = np.zeros((trials, len(t)))
    offsets = []
    for grid in grids:
        offset = rng.integers(0, len(grid), size=trials)
        # row k of the windows is the cycle read from step k on (np.resize repeats it)
        windows = sliding_window_view(np.resize(grid, len(grid) + len(t) - 1), len(t))
        total += windows[offset]
        offsets.append(offset)
    at = np.argmax(total, axis=1)
    combined = total[np.arange(trials), at]
    del total
    exceed = combined > memory_bytes
    worst_trials = np.nonzero(exceed)[0]
    if len(worst_trials) == 0:
        cut = np.quantile(combined, 1.0 - WORST_SHARE)
        worst_trials = np.nonzero(combined >= cut)[0]
    at_peak = np.stack([grid[(at + offset) % len(grid)] >= COLLIDE_SHARE * max(1, f.peak_bytes)
                        for grid, offset, f in zip(grids, offsets, footprints)])  # models x trials
    collisions = []
    for i, j in itertools.combinations(range(len(footprints)), 2):
        both = at_peak[i, worst_trials] & at_peak[j, worst_trials]
        share = float(both.mean()) if len(worst_trials) else 0.0
        if share > 0:
            collisions.append({"models": [footprints[i].name, footprints[j].name],
                               "share": share})
    collisions.sort(key=lambda c: (-c["share"], c["models"]))
    counts, edges = np.histogram(combined, bins=20)
    out: dict[str, Any] = {
        "memory_bytes": memory_bytes,
        "models": [{"name": f.name, "version": f.version, "run_id": f.run_id,
                    "peak_bytes": f.peak_bytes, "heap_peak_bytes": f.heap_peak_bytes,
                    "rss_peak_bytes": f.rss_peak_bytes, "duration_s": f.duration_s}
                   for f in footprints],
        "worst_case_bytes": worst,
        "worst_case_fits": worst <= memory_bytes,
        "estimate": {
            "trials": trials, "seed": seed, "grid_steps": len(t),
            "p50_bytes": float(np.quantile(combined, 0.5)),
            "p95_bytes": float(np.quantile(combined, 0.95)),
            "p99_bytes": float(np.quantile(combined, 0.99)),
            "max_bytes": float(combined.max()),
            "exceed_probability": float(exceed.mean()),
            "histogram": {"counts": counts.tolist(), "edges_bytes": edges.tolist()},
        },
        "collisions": collisions,
        "verdict": ("fits" if worst <= memory_bytes else
                    "may_exceed" if not exceed.all() else "does_not_fit"),
    }
    if gpu_memory_bytes is not None:
        gpu_worst = sum(f.gpu_peak_bytes or 0 for f in footprints)
        out["gpu"] = {"memory_bytes": gpu_memory_bytes, "worst_case_bytes": gpu_worst,
                      "worst_case_fits": gpu_worst <= gpu_memory_bytes,
                      "unmeasured": [f.name for f in footprints if f.gpu_peak_bytes is None]}
    return out
