"""The shape `peakline sweep` exists to show: a scikit-learn script whose imports dominate
at small NUM_SAMPLES and whose data and fitting dominate at large ones."""

import os

import numpy as np  # IMPORT
from sklearn.linear_model import LogisticRegression  # IMPORT

NUM_SAMPLES = int(os.environ.get("NUM_SAMPLES", "1000"))
rng = np.random.default_rng(0)
X = rng.standard_normal((NUM_SAMPLES, 40))  # DATA
y = (X[:, 0] + 0.5 * rng.standard_normal(NUM_SAMPLES) > 0).astype(int)  # LABELS
X2 = np.hstack([X, X ** 2])  # DATA
model = LogisticRegression(max_iter=300).fit(X2, y)  # FIT
print(f"{NUM_SAMPLES} samples, accuracy {model.score(X2, y):.3f}")
