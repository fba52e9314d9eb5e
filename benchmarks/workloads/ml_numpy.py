"""ML-flavoured: numpy array work plus scikit-learn fits (mostly native, multi-threaded BLAS).

Needs numpy and scikit-learn (the benchmark environment installs them).
Usage: python ml_numpy.py [SCALE]   (SCALE=1.0 is about 2-4 s on the reference machine)
"""

import sys

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge


def main(scale):
    rng = np.random.default_rng(0)
    rows = max(500, int(400_000 * scale))
    features = rng.standard_normal((rows, 40))
    weights = rng.standard_normal(40)
    target = features @ weights + 0.1 * rng.standard_normal(rows)
    gram = features.T @ features  # BLAS
    normalised = (features - features.mean(axis=0)) / features.std(axis=0)
    ridge = Ridge(alpha=1.0).fit(normalised, target)
    labels = (target > 0).astype(np.int64)
    logistic = LogisticRegression(max_iter=300).fit(normalised, labels)
    # A little Python-level post-processing, as real scripts have.
    top = sorted(range(40), key=lambda j: -abs(float(ridge.coef_[j])))[:5]
    print(f"ml_numpy: trace {np.trace(gram):.1f} ridge r2 {ridge.score(normalised, target):.3f} "
          f"logistic acc {logistic.score(normalised, labels):.3f} top {top}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
