"""A small, realistic ML pipeline to profile with peakline.

It does what a typical training script does, one stage per function so the
line-level report reads like the pipeline:

    generate data (numpy) -> DataFrame + feature engineering (pandas)
    -> CSV round trip (write + read in a temporary directory)
    -> fit a linear model and a small random forest and MLP (scikit-learn)
    -> predict / score -> pickle save + load -> summary

Sizes are free variables read from the environment so the same script can be
profiled small or large:

    NUM_SAMPLES   rows of synthetic data     (default 200000)
    NUM_FEATURES  numeric feature columns    (default 20)
    SEED          random seed                (default 0)

Run it:  peakline run examples/ml_pipeline.py
         NUM_SAMPLES=2000000 peakline run examples/ml_pipeline.py
"""

import os
import pickle
import sys
import tempfile
import time

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

NUM_SAMPLES = int(os.environ.get("NUM_SAMPLES", "200000"))
NUM_FEATURES = int(os.environ.get("NUM_FEATURES", "20"))
SEED = int(os.environ.get("SEED", "0"))

# The forest and the MLP are the slow learners; they see at most this many rows
# so the script's run time grows roughly linearly with NUM_SAMPLES.
TREE_ROWS = 20000
MLP_ROWS = 20000


def generate_data(num_samples, num_features, seed):
    """Synthetic binary classification: a noisy linear rule plus an interaction."""
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((num_samples, num_features))
    weights = rng.standard_normal(num_features)
    logits = features @ weights + 0.5 * features[:, 0] * features[:, 1]
    noise = rng.logistic(size=num_samples)
    labels = (logits + noise > 0).astype(np.int64)
    return features, labels


def build_frame(features, labels):
    """Wrap the arrays in a DataFrame and derive a few features with pandas."""
    columns = [f"f{i}" for i in range(features.shape[1])]
    frame = pd.DataFrame(features, columns=columns)
    frame["ratio"] = frame["f0"] / (frame["f1"].abs() + 1.0)
    frame["bucket"] = pd.cut(frame["f2"], bins=8, labels=False)
    frame["bucket_mean"] = frame.groupby("bucket")["f3"].transform("mean")
    frame["label"] = labels
    return frame


def csv_round_trip(frame, directory):
    """Write the frame to CSV and read it back, as a data-loading stage would."""
    path = os.path.join(directory, "data.csv")
    frame.to_csv(path, index=False)
    loaded = pd.read_csv(path)
    size_mb = os.path.getsize(path) / 1e6
    return loaded, size_mb


def split_and_scale(frame, seed):
    features = frame.drop(columns=["label"]).to_numpy(dtype=np.float64)
    labels = frame["label"].to_numpy()
    x_train, x_test, y_train, y_test = train_test_split(
        features, labels, test_size=0.2, random_state=seed
    )
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_test), y_train, y_test


def fit_models(x_train, y_train, seed):
    """Fit three models of increasing cost; return them keyed by name."""
    linear = LogisticRegression(max_iter=200)
    linear.fit(x_train, y_train)
    forest = RandomForestClassifier(n_estimators=30, max_depth=10, random_state=seed)
    forest.fit(x_train[:TREE_ROWS], y_train[:TREE_ROWS])
    mlp = MLPClassifier(hidden_layer_sizes=(64, 32), max_iter=15, random_state=seed)
    mlp.fit(x_train[:MLP_ROWS], y_train[:MLP_ROWS])
    return {"logistic": linear, "forest": forest, "mlp": mlp}


def score_models(models, x_test, y_test):
    return {name: float(model.score(x_test, y_test)) for name, model in models.items()}


def pickle_round_trip(models, directory):
    """Save the fitted models with pickle and load them back."""
    path = os.path.join(directory, "models.pkl")
    with open(path, "wb") as handle:
        pickle.dump(models, handle, protocol=pickle.HIGHEST_PROTOCOL)
    with open(path, "rb") as handle:
        restored = pickle.load(handle)
    return restored, os.path.getsize(path) / 1e6


def main():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    # A short MLP training run is the point here, not a converged one.
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    started = time.perf_counter()
    features, labels = generate_data(NUM_SAMPLES, NUM_FEATURES, SEED)
    frame = build_frame(features, labels)
    with tempfile.TemporaryDirectory(prefix="peakline-example-") as directory:
        frame, csv_mb = csv_round_trip(frame, directory)
        x_train, x_test, y_train, y_test = split_and_scale(frame, SEED)
        models = fit_models(x_train, y_train, SEED)
        models, pickle_mb = pickle_round_trip(models, directory)
    scores = score_models(models, x_test, y_test)
    elapsed = time.perf_counter() - started

    print(f"ml_pipeline: {NUM_SAMPLES} samples x {NUM_FEATURES} features")
    print(f"  csv {csv_mb:.1f} MB, pickled models {pickle_mb:.1f} MB")
    for name, accuracy in scores.items():
        print(f"  {name:<9} accuracy {accuracy:.3f}")
    print(f"  elapsed {elapsed:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
