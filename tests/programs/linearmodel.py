"""The seed example: fit a linear regression on a small generated data set.

A short script that spends much of its run importing; its first BLAS call (inside
``lm.fit``) makes OpenBLAS map its per-thread buffer. Used by test_memory_headlines.
"""
import numpy as np  # LINE import_numpy
from sklearn.datasets import make_regression  # LINE import_datasets
from sklearn.linear_model import LinearRegression  # LINE import_linear_model

NUM_SAMPLES = 1000
NUM_FEATURES = 10

X, y = make_regression(n_samples=NUM_SAMPLES, n_features=NUM_FEATURES)  # LINE make_data
lm = LinearRegression()
lm.fit(X, y)  # LINE fit
print("coef", np.round(lm.coef_[:3], 3).tolist())
