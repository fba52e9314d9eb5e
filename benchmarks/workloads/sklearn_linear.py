"""scikit-learn linear models on a scaled-up synthetic problem (NUM_SAMPLES x NUM_FEATURES).

After the scikit-learn regression example the Scalene paper profiles, with the data scaled up
so fitting dominates: make_regression, then LinearRegression (LAPACK least squares) and Ridge,
plus make_classification and LogisticRegression (lbfgs). Mostly native, BLAS threads.
Usage: python sklearn_linear.py [SCALE]   (SCALE=1.0 is about 2-4 s)
"""

import sys

from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge

NUM_FEATURES = 200


def main(scale):
    num_samples = max(1_000, int(60_000 * scale))
    X, y = make_regression(n_samples=num_samples, n_features=NUM_FEATURES, noise=0.5,
                           random_state=0)
    ols = LinearRegression().fit(X, y)
    ridge = Ridge(alpha=1.0).fit(X, y)
    Xc, yc = make_classification(n_samples=num_samples, n_features=NUM_FEATURES,
                                 n_informative=40, random_state=0)
    logistic = LogisticRegression(max_iter=200).fit(Xc, yc)
    print(f"sklearn_linear: ols r2 {ols.score(X, y):.4f} ridge r2 {ridge.score(X, y):.4f} "
          f"logistic acc {logistic.score(Xc, yc):.3f}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
