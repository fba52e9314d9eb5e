"""pandas CSV round trips: build a mixed-type frame, to_csv, read_csv, group, repeat.

Usage: python pandas_csv.py [SCALE]   (SCALE=1.0 is about 2-4 s; writes to a temp directory)
"""

import os
import sys
import tempfile

import numpy as np
import pandas as pd

ROWS = 200_000


def main(scale):
    rounds = max(1, round(6 * scale))
    rows = ROWS if scale >= 0.25 else max(1_000, int(ROWS * scale * 4))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "id": np.arange(rows),
        "value": rng.standard_normal(rows),
        "count": rng.integers(0, 1_000, rows),
        "category": rng.choice(["alpha", "beta", "gamma", "delta"], rows),
        "label": [f"item-{i % 997}" for i in range(rows)],
    })
    total = 0.0
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "frame.csv")
        for _ in range(rounds):
            frame.to_csv(path, index=False)
            frame = pd.read_csv(path)
            summary = frame.groupby("category")["value"].agg(["mean", "sum", "count"])
            total += float(summary["sum"].sum())
    print(f"pandas_csv: {rounds} round trips of {rows} rows, checksum {total:.3f}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
