"""Growth models: how a measured quantity grows with one varied size, fitted, chosen and
extrapolated, with the standard library only (numpy is not a dependency of peakline).

Every candidate model has the shape ``y = a + b * g(x)``, fitted by weighted least squares:

    constant   y = a                      exponent 0
    log        g(x) = ln x                exponent null
    linear     g(x) = x                   exponent 1
    nlogn      g(x) = x ln x              exponent null
    quadratic  g(x) = x^2                 exponent 2
    cubic      g(x) = x^3                 exponent 3
    power      g(x) = x^k, k fitted       exponent k (0.1 .. 4, to 0.01)

The intercept ``a`` is what does not grow (the interpreter, imports, a fixed buffer).

Errors are relative: each point weighs 1 / max(|y|, floor)^2, because run-to-run noise of
memory and time is a share of the value, not a fixed amount, and sizes span decades. ``floor``
is the quantity's resolution (a sampling interval), so values near zero do not dominate.

Choosing the model (the criterion, stated):

1. Fewer than ``MIN_SIZES`` (3) distinct sizes: "unclear", note "not enough points".
2. A model's residual spread is ``s = sqrt(SSE / (n - p))`` (relative; ``p`` parameters),
   never taken below ``NOISE_FLOOR`` (3%): differences smaller than that are run-to-run noise,
   not shape.
3. Growth is claimed only when the growth term of some two-parameter model is significant,
   ``|b| / se(b) >= t(0.975, n - 2)`` with se(b) from the floored spread; otherwise the
   quantity is "constant" (if the constant fits within ``UNCLEAR_ERROR``) or "unclear".
4. Among the significant two-parameter models the least SSE (floored at ``n * 3%^2``) wins,
   except that a model earlier in ``PREFERENCE`` (linear, quadratic, nlogn, log, cubic) is
   kept while its floored SSE is within ``CLEARLY_BETTER`` (3x) of the winner's: shapes the
   points cannot tell apart are reported as the simpler, commoner one (over one decade of
   sizes, n log n and log stay within 3-4% of a straight line with an intercept).
5. A full polynomial ``a + b x + c x^2`` (+ ``d x^3``; reported as "quadratic" / "cubic", its
   coefficients b, c, d) replaces it when its top term is significant at 99% (t(0.995, n - p), the
   spread floored at only ``POLYNOMIAL_FLOOR``, 1%: exact measurements such as the heap's
   peak show curvature well under 3%) and its floored spread^2 is 2x smaller: a program's
   peak is often a linear buffer plus a quadratic matrix.
6. The power law (3 parameters) replaces it with at least 5 sizes, when an F test at 99%
   says the exponent pays for itself (or, against a full polynomial, a 2x smaller spread^2)
   and the chosen class's own exponent lies outside the power law's 90% exponent interval.
7. A chosen model whose spread exceeds ``UNCLEAR_ERROR`` (15%) is reported as "unclear"
   ("no clear trend").

``quality`` is ``1 - s`` (1: the points lie on the curve; 0.85: 15% relative error), and
``r2_adj`` the adjusted R^2 of the same fit (null for constant). The prediction at a target
size is the model's value with a 90% interval from the fit's parameter covariance (Student's
t on n - p degrees of freedom, spread at least NOISE_FLOOR); for the power law the interval
also spans every exponent whose fit is not significantly worse (profile likelihood, 90%).
tests/python/test_sweep_fit.py checks all of this on points of known shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

MODELS = ("constant", "log", "linear", "nlogn", "quadratic", "cubic", "power", "unclear")
PREFERENCE = ("linear", "quadratic", "nlogn", "log", "cubic")
EXPONENTS = {"constant": 0.0, "linear": 1.0, "quadratic": 2.0, "cubic": 3.0}
MIN_SIZES = 3
NOISE_FLOOR = 0.03
POLYNOMIAL_FLOOR = 0.01  # a polynomial's top term is tested against the points' own spread
UNCLEAR_ERROR = 0.15
CLEARLY_BETTER = 3.0
POLYNOMIAL_BETTER = 2.0
POWER_MIN_SIZES = 5
POWER_BETTER = 2.0
POWER_GRID = tuple(round(0.1 + 0.01 * i, 2) for i in range(391))  # 0.10 .. 4.00

_BASIS: dict[str, Callable[[float], float]] = {
    "log": math.log,
    "linear": lambda x: x,
    "nlogn": lambda x: x * math.log(x),
    "quadratic": lambda x: x * x,
    "cubic": lambda x: x ** 3,
}

# Student's t quantiles 0.95 (a 90% two-sided interval), 0.975 (the slope test) and 0.995
# (its square: the F test of the power law's exponent), by degrees of freedom.
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
        1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086)


_T995 = (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
         3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845)


def _t(table: tuple[float, ...], dof: int, limit: float) -> float:
    if dof < 1:
        return math.inf
    return table[dof - 1] if dof <= len(table) else limit


@dataclass
class Prediction:
    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass
class Fit:
    """One quantity's growth over one varied name (the FIT object of docs/sweep.md)."""

    name: str
    model: str
    exponent: float | None = None
    quality: float | None = None
    r2_adj: float | None = None
    coefficients: dict[str, float] | None = None
    points: int = 0
    sizes: int = 0
    note: str | None = None
    prediction: Prediction | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def evaluate(self, x: float) -> float | None:
        """The fitted curve at x (None for "unclear")."""
        if self.coefficients is None or self.model == "unclear":
            return None
        return _curve(self.model, self.coefficients, x)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "model": self.model, "exponent": self.exponent,
                               "quality": self.quality, "r2_adj": self.r2_adj,
                               "coefficients": self.coefficients, "points": self.points,
                               "sizes": self.sizes, "note": self.note,
                               "prediction": None if self.prediction is None
                               else self.prediction.to_dict()}
        out.update(self.extra)
        return out


def _curve(model: str, c: dict[str, float], x: float) -> float:
    if model == "power":
        return c["a"] + c["b"] * x ** c["k"]
    if model in _POLYNOMIALS and "c" in c:  # the full polynomial
        return c["a"] + sum(c[n] * x ** (i + 1) for i, n in enumerate("bcd") if n in c)
    return c["a"] + c.get("b", 0.0) * (_BASIS[model](x) if model != "constant" else 0.0)


@dataclass
class _Candidate:
    model: str
    a: float
    b: list[float]          # one coefficient per term, in the unit of y per term(x)
    inv: list[list[float]]  # (X'WX)^-1 of the scaled columns: the covariance / sigma^2
    sse: float              # relative (weighted) sum of squared residuals
    p: int                  # parameters: the intercept, the coefficients, the exponent
    terms: Sequence[Callable[[float], float]] = ()
    scales: Sequence[float] = ()
    k: float | None = None

    def value(self, x: float) -> float:
        return self.a + sum(b * t(x) for b, t in zip(self.b, self.terms))

    def row(self, x: float) -> list[float]:
        """The scaled design row at x: [1, term_1(x) / scale_1, ...]."""
        return [1.0] + [t(x) / sc for t, sc in zip(self.terms, self.scales)]

    def lead_t(self, spread: float) -> float:
        """|growth coefficient| / its standard error: the fastest-growing term's significance."""
        if self.p < 2 or self.inv[-1][-1] <= 0:
            return 0.0
        return abs(self.b[-1] * self.scales[-1]) / (spread * math.sqrt(self.inv[-1][-1]))

    def coefficients(self) -> dict[str, float]:
        out = {"a": self.a}
        out.update(zip("bcd", self.b))
        if self.k is not None:
            out["k"] = self.k
        return out


def _solve(rows: list[list[float]], ys: Sequence[float], ws: Sequence[float]):
    """Weighted least squares y ~ rows . beta: (beta, (X'WX)^-1, SSE) or None if singular.
    Normal equations by Gauss-Jordan with partial pivoting: at most 4 columns, each scaled
    to a largest value of 1 by the caller, so this is well conditioned enough."""
    k = len(rows[0])
    xtx = [[sum(w * r[i] * r[j] for w, r in zip(ws, rows)) for j in range(k)] for i in range(k)]
    xty = [sum(w * r[i] * y for w, r, y in zip(ws, rows, ys)) for i in range(k)]
    aug = [xtx[i] + [1.0 if i == j else 0.0 for j in range(k)] for i in range(k)]
    tolerance = 1e-12 * max(abs(v) for row in xtx for v in row)
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(aug[r][col]))
        if not abs(aug[pivot][col]) > tolerance:
            return None
        aug[col], aug[pivot] = aug[pivot], aug[col]
        div = aug[col][col]
        aug[col] = [v / div for v in aug[col]]
        for r in range(k):
            if r != col and aug[r][col] != 0.0:
                f = aug[r][col]
                aug[r] = [a - f * b for a, b in zip(aug[r], aug[col])]
    inv = [row[k:] for row in aug]
    beta = [sum(inv[i][j] * xty[j] for j in range(k)) for i in range(k)]
    sse = sum(w * (y - sum(b * c for b, c in zip(beta, r))) ** 2
              for w, r, y in zip(ws, rows, ys))
    if not all(math.isfinite(b) for b in beta) or not math.isfinite(sse):
        return None
    return beta, inv, sse


def _fit_terms(model: str, terms: Sequence[Callable[[float], float]], xs, ys, ws,
               k: float | None = None) -> _Candidate | None:
    """y = a + sum b_i * term_i(x); the last term is the one that grows fastest."""
    raw = [[t(x) for t in terms] for x in xs]
    scales = [max(abs(r[i]) for r in raw) or 1.0 for i in range(len(terms))]
    rows = [[1.0] + [v / sc for v, sc in zip(r, scales)] for r in raw]
    solved = _solve(rows, ys, ws)
    if solved is None:
        return None
    beta, inv, sse = solved
    return _Candidate(model, beta[0], [b / sc for b, sc in zip(beta[1:], scales)], inv, sse,
                      len(beta) + (k is not None), tuple(terms), scales, k)


def _fit_basis(model: str, xs, ys, ws, k: float | None = None) -> _Candidate | None:
    if model == "power":
        return _fit_terms(model, (lambda x, k=k: x ** k,), xs, ys, ws, k)
    return _fit_terms(model, (_BASIS[model],), xs, ys, ws)


# Full polynomials: y = a + b x + c x^2 (+ d x^3), for sums of terms that grow differently
# (a program's peak: a linear buffer plus a quadratic matrix).
_POLYNOMIALS = {"quadratic": (_BASIS["linear"], _BASIS["quadratic"]),
                "cubic": (_BASIS["linear"], _BASIS["quadratic"], _BASIS["cubic"])}


def _fit_constant(ys, ws) -> _Candidate:
    sw = sum(ws)
    a = sum(w * y for w, y in zip(ws, ys)) / sw
    sse = sum(w * (y - a) ** 2 for w, y in zip(ws, ys))
    return _Candidate("constant", a, [], [[1.0 / sw]], sse, 1)


def _spread(c: _Candidate, n: int) -> float:
    """Relative residual standard deviation, floored at NOISE_FLOOR."""
    dof = n - c.p
    raw = math.sqrt(c.sse / dof) if dof > 0 else 0.0
    return max(raw, NOISE_FLOOR)


def _floored_sse(c: _Candidate, n: int) -> float:
    """Compares models with as many parameters: residuals under NOISE_FLOOR at every point
    are all alike."""
    return max(c.sse, n * NOISE_FLOOR ** 2)


def _score(c: _Candidate, n: int) -> float:
    """What the models are compared by: the residual variance per degree of freedom, never
    below NOISE_FLOOR^2 (so models with more parameters pay for them)."""
    return _spread(c, n) ** 2


def _r2_adj(c: _Candidate, ys, ws) -> float | None:
    n = len(ys)
    if c.model == "constant" or n - c.p <= 0:
        return None
    sw = sum(ws)
    mean = sum(w * y for w, y in zip(ws, ys)) / sw
    sst = sum(w * (y - mean) ** 2 for w, y in zip(ws, ys))
    if sst <= 0:
        return None
    return 1.0 - (c.sse / (n - c.p)) / (sst / (n - 1))


def _significant(c: _Candidate, n: int, floor: float = NOISE_FLOOR,
                 table: tuple[float, ...] = _T975) -> bool:
    dof = n - c.p
    if dof < 1:
        return False
    spread = max(math.sqrt(c.sse / dof), floor)
    return c.lead_t(spread) >= _t(table, dof, 1.960 if table is _T975 else 2.576)


def fit_growth(name: str, xs: Sequence[float], ys: Sequence[float], *,
               floor: float = 0.0, target: float | None = None) -> Fit:
    """Fit ``ys`` measured at sizes ``xs`` (repeats allowed) and choose the model (module doc).
    ``floor``: the quantity's resolution in its own unit; ``target``: predict there."""
    points = [(float(x), float(y)) for x, y in zip(xs, ys)
              if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
    sizes = len({x for x, _ in points})
    if any(x <= 0 for x, _ in points):
        return Fit(name, "unclear", points=len(points), sizes=sizes,
                   note="sizes must be positive to fit a growth model")
    if sizes < MIN_SIZES:
        return Fit(name, "unclear", points=len(points), sizes=sizes,
                   note=f"not enough points ({sizes} size{'s' if sizes != 1 else ''}; "
                        f"a fit needs at least {MIN_SIZES})")
    xs_ = [x for x, _ in points]
    ys_ = [y for _, y in points]
    top = max(abs(y) for y in ys_)
    tiny = max(floor, 1e-12 * top, 1e-300)
    ws = [1.0 / max(abs(y), tiny) ** 2 for y in ys_]
    n = len(points)
    constant = _fit_constant(ys_, ws)
    if top <= floor:  # everything under the resolution: nothing grows measurably
        return _finish(name, constant, ys_, ws, sizes, target,
                       note="below the measurement resolution")

    growth = [c for c in (_fit_basis(m, xs_, ys_, ws) for m in PREFERENCE) if c is not None]
    significant = [c for c in growth if _significant(c, n)]
    if not significant:
        if _spread(constant, n) <= UNCLEAR_ERROR:
            return _finish(name, constant, ys_, ws, sizes, target)
        return _unclear(name, constant, n, sizes)
    best = min(significant, key=lambda c: _floored_sse(c, n))
    for c in sorted(significant, key=lambda c: PREFERENCE.index(c.model)):
        if _floored_sse(c, n) <= CLEARLY_BETTER * _floored_sse(best, n):
            best = c
            break
    # A full polynomial (a sum of growths) when its top term is significant and it is
    # clearly better than any single term.
    for model, terms in _POLYNOMIALS.items():
        if sizes < len(terms) + 2:
            continue
        poly = _fit_terms(model, terms, xs_, ys_, ws)
        if poly is not None and _significant(poly, n, POLYNOMIAL_FLOOR, _T995) and \
                _score(poly, n) * POLYNOMIAL_BETTER < _score(best, n):
            best = poly
    if sizes >= POWER_MIN_SIZES:
        power = _best_power(xs_, ys_, ws)
        if power is not None and _power_wins(power, best, n) and \
                not _exponent_plausible(EXPONENTS.get(best.model), power, n, xs_, ys_, ws):
            best = power
    if _spread(best, n) > UNCLEAR_ERROR:
        return _unclear(name, best, n, sizes)
    return _finish(name, best, ys_, ws, sizes, target, xs=xs_)


def _power_wins(power: _Candidate, best: _Candidate, n: int) -> bool:
    """Against a model with fewer parameters, the extra exponent must pay for itself: an F
    test at 99% on the floored residuals; against a full polynomial (as many parameters),
    the power law must be POWER_BETTER times better."""
    if best.p >= power.p:
        return _score(power, n) * POWER_BETTER < _score(best, n)
    dof = n - power.p
    if dof < 1:
        return False
    sse_power = max(power.sse, dof * NOISE_FLOOR ** 2)
    f = (best.sse - sse_power) / (sse_power / dof)
    return f > _t(_T995, dof, 2.576) ** 2


def _exponent_range(power: _Candidate, n: int, xs, ys, ws) -> list[_Candidate]:
    """The power fits whose exponent is within the 90% profile-likelihood interval."""
    limit = power.sse + 2.706 * _spread(power, n) ** 2
    return [c for c in (_fit_basis("power", xs, ys, ws, k) for k in POWER_GRID[::5])
            if c is not None and c.sse <= limit] + [power]


def _exponent_plausible(exponent: float | None, power: _Candidate, n: int, xs, ys,
                        ws) -> bool:
    """True when the chosen class's own exponent is inside the power law's interval: the
    power law is then no better an explanation, only a noisier one."""
    if exponent is None:
        return False
    ks = [c.k for c in _exponent_range(power, n, xs, ys, ws)]
    return bool(ks) and min(ks) - 0.05 <= exponent <= max(ks) + 0.05  # the grid step


def _best_power(xs, ys, ws) -> _Candidate | None:
    """The least-SSE exponent: the 0.1 grid, then 0.01 steps around its best."""
    coarse = [c for c in (_fit_basis("power", xs, ys, ws, k) for k in POWER_GRID[::10])
              if c is not None]
    if not coarse:
        return None
    centre = min(coarse, key=lambda c: c.sse).k
    fine = [c for c in (_fit_basis("power", xs, ys, ws, k) for k in POWER_GRID
                        if abs(k - centre) <= 0.1 + 1e-9) if c is not None]
    return min(fine + coarse, key=lambda c: c.sse)


def _unclear(name: str, c: _Candidate, n: int, sizes: int) -> Fit:
    error = math.sqrt(c.sse / max(1, n - c.p))
    return Fit(name, "unclear", points=n, sizes=sizes,
               note=f"no clear trend (closest: {c.model}, {100 * error:.0f}% error)")


def _finish(name: str, c: _Candidate, ys, ws, sizes: int, target: float | None,
            note: str | None = None, xs=None) -> Fit:
    n = len(ys)
    spread = _spread(c, n)
    fit = Fit(name, c.model, exponent=c.k if c.model == "power" else EXPONENTS.get(c.model),
              quality=max(0.0, 1.0 - spread) if n > c.p else None,
              r2_adj=_r2_adj(c, ys, ws), coefficients=c.coefficients(), points=n,
              sizes=sizes, note=note)
    if target is not None and target > 0:
        fit.prediction = _predict(c, target, spread, n, xs, ys, ws)
    return fit


def _predict(c: _Candidate, x: float, spread: float, n: int, xs, ys, ws) -> Prediction:
    value = c.value(x)
    t = _t(_T95, n - c.p, 1.645)
    if not math.isfinite(t):
        t = _T95[0]
    row = c.row(x)
    var = sum(row[i] * c.inv[i][j] * row[j] for i in range(len(row)) for j in range(len(row)))
    half = t * spread * math.sqrt(max(0.0, var))
    low, high = value - half, value + half
    if c.model == "power" and xs is not None:
        # every exponent whose fit is within the 90% profile-likelihood bound of the best
        for other in _exponent_range(c, n, xs, ys, ws):
            v = other.value(x)
            low, high = min(low, v), max(high, v)
    return Prediction(value, low, high)


def fit_from_dict(data: dict[str, Any]) -> Fit:
    """A Fit read back from a sweep file (validated by sweep_file.py)."""
    known = ("name", "model", "exponent", "quality", "r2_adj", "coefficients", "points",
             "sizes", "note", "prediction")
    pred = data.get("prediction")
    return Fit(data["name"], data["model"], data.get("exponent"), data.get("quality"),
               data.get("r2_adj"), data.get("coefficients"), data.get("points", 0),
               data.get("sizes", 0), data.get("note"),
               None if pred is None else Prediction(pred["value"], pred["low"], pred["high"]),
               {k: v for k, v in data.items() if k not in known})


def describe(fit: Fit) -> str:
    """``linear``, ``power n^1.52``, ``unclear (not enough points ...)``: for tables."""
    if fit.model == "power" and fit.exponent is not None:
        return f"power ^{fit.exponent:.2f}"
    if fit.model == "unclear":
        return "unclear"
    return {"nlogn": "n log n"}.get(fit.model, fit.model)
