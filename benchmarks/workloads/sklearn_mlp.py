"""scikit-learn MLPClassifier on a scaled-up synthetic problem (NUM_SAMPLES x NUM_FEATURES).

Adam updates in numpy (Python-driven loop over mini-batches, BLAS matmuls inside).
Usage: python sklearn_mlp.py [SCALE]   (SCALE=1.0 is about 2-4 s)
"""

import sys
import warnings

from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

NUM_FEATURES = 100


def main(scale):
    num_samples = max(500, int(30_000 * scale))
    X, y = make_classification(n_samples=num_samples, n_features=NUM_FEATURES,
                               n_informative=30, n_classes=3, random_state=0)
    model = MLPClassifier(hidden_layer_sizes=(128, 64), max_iter=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    print(f"sklearn_mlp: accuracy {model.score(X, y):.3f} after {model.n_iter_} epochs")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
