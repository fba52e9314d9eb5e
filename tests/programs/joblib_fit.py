"""scikit-learn with joblib n_jobs=2 on loky worker processes (cross-validated fits)."""
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

X, y = make_classification(n_samples=3000, n_features=30, random_state=0)
model = LogisticRegression(max_iter=500)
scores = cross_val_score(model, X, y, cv=4, n_jobs=2)  # LINE fit
print("scores", [round(s, 3) for s in scores], flush=True)
