"""Residuals of the linear extrapolation (Lines of Thought, Eq. 2, Fig. B4): are they i.i.d. Gaussian
coordinates with variance alpha exp(lambda (t + tau)), a function of the arrival layer only?

In the aligned singular basis U(t+tau) the residual of Eq. 1 has the coordinates

    U(t+tau)^T w = y(t+tau) - Lambda y(t),    y(t) = U(t)^T x(t),    Lambda = Sigma(t+tau) Sigma(t)^-1,

so with the coordinates y of every layer computed once, each (t, t+tau) pair costs O(N k) instead of
two (N, D) x (D, D) products (`lotlib.lines_of_thought.extrapolation.residuals` is the direct form; the tests
check that both agree). Raw coordinates are w = U(t+tau) (y(t+tau) - Lambda y(t)).

Intervals without recomputing the residuals: `resampled_pairs` evaluates the law's ingredients on the whole
sample and on every bootstrap resample of the pilots at once (weighted moments; the bases are held fixed).
Its summaries are chosen so that a resample estimates the same thing as the sample (an offset estimated
from pairs of distinct pilots, a signed kurtosis): mean abs(mu / sigma) and mean abs(kurtosis) grow under
resampling (duplicated pilots add sampling noise) and are kept for the figures only.
The norm growth of the ensemble alone makes any residual variance grow with the arrival layer (a cloud of
independent points whose spread grows gives a perfect "law"): `log_relative_var` divides it out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from ..intervals import LEVEL, Estimate


def singular_coordinates(X: np.ndarray, U: np.ndarray) -> np.ndarray:
    """y(t) = U(t)^T x(t) for every pilot and layer: X `(N, T, D)`, U `(T, D, k)` -> `(N, T, k)` float32."""
    Y = np.matmul(
        X.astype(np.float32).transpose(1, 0, 2), U.astype(np.float32)
    )  # (T, N, k), batched BLAS
    return Y.transpose(1, 0, 2)


def residual_coordinates(Y: np.ndarray, S: np.ndarray, t, tau: int) -> np.ndarray:
    """Coordinates of w(t, tau) in the aligned basis U(t+tau): `(N, k)` for one t, `(N, len(t), k)` for
    an array of t. Y `(N, T, k)` from `singular_coordinates`, S `(T, k)` aligned singular values."""
    t = np.asarray(t)
    return Y[:, t + tau] - Y[:, t] * (S[t + tau] / S[t]).astype(Y.dtype)


def coordinate_moments(W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per coordinate over the ensemble (axis 0) of W `(N, ...)`: mean/std, variance, excess kurtosis
    (float64 results of float32 sums: the centered moments need no more precision)."""
    mean = W.mean(axis=0)
    squares = (W - mean) ** 2
    var = squares.mean(axis=0).astype(np.float64)
    m4 = np.einsum("n...,n...->...", squares, squares).astype(np.float64) / len(W)
    return mean / np.sqrt(var), var, m4 / var**2 - 3.0


@dataclass
class PairStatistics:
    """Per-coordinate residual statistics for every pair, indexed `[t, t + tau, i]` `(T, T, k)`; NaN where
    no pair was computed. `z` = mean/std, `var` = variance, `kurtosis` = excess kurtosis."""

    z: np.ndarray
    var: np.ndarray
    kurtosis: np.ndarray
    basis: str

    def mean_abs_z(self) -> np.ndarray:
        return np.mean(np.abs(self.z), axis=-1)

    def log_mean_var(self) -> np.ndarray:
        return np.log(np.mean(self.var, axis=-1))

    def mean_log_var(self) -> np.ndarray:
        return np.mean(np.log(self.var), axis=-1)

    def mean_abs_kurtosis(self) -> np.ndarray:
        return np.mean(np.abs(self.kurtosis), axis=-1)


def pair_statistics(
    Y: np.ndarray,
    S: np.ndarray,
    layers,
    U: np.ndarray | None = None,
    progress: bool = True,
) -> PairStatistics:
    """Residual statistics for every pair t < t + tau of `layers` (consecutive integers), vectorized over
    the ensemble and over t for each tau. Y `(N, T, k)` from `singular_coordinates`, S `(T, k)` aligned.
    Without U: statistics of the coordinates in the aligned basis U(t+tau) (`basis='singular'`); with
    U `(T, D, k)`: of the raw residual-stream coordinates w = U(t+tau) (...) (`basis='raw'`, one
    `(N, k) x (k, D)` product per pair)."""
    layers = np.asarray(layers)
    T = Y.shape[1]
    k = Y.shape[2] if U is None else U.shape[1]
    out = {name: np.full((T, T, k), np.nan) for name in ("z", "var", "kurtosis")}
    for tau in tqdm(
        range(1, len(layers)),
        desc="residual statistics",
        unit="tau",
        disable=not progress,
    ):
        t = layers[:-tau]
        W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
        if U is not None:
            W = np.matmul(
                W.transpose(1, 0, 2), U[t + tau].transpose(0, 2, 1).astype(np.float32)
            ).transpose(1, 0, 2)
        for name, value in zip(("z", "var", "kurtosis"), coordinate_moments(W)):
            out[name][t, t + tau] = value
    return PairStatistics(**out, basis="singular" if U is None else "raw")


def pair_mask(T: int, first: int, last: int) -> np.ndarray:
    """`(T, T)` boolean: pairs with first <= t < t + tau <= last."""
    t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    return (t >= first) & (s > t) & (s <= last)


def fit_variance(log_var: np.ndarray, mask: np.ndarray) -> dict:
    """Least-squares fit of log variance = ln(alpha) + lambda (t + tau) over the pairs in `mask`.

    log_var `(T, T)` indexed `[t, t + tau]` (natural log, either convention). Returns alpha, lambda, r2
    of the fit, `arrival_r2` (share of the variance of log_var explained by the arrival layer alone,
    any function of it: 1 means "depends on t + tau only") and the number of pairs.
    """
    fits = fit_laws(log_var, mask)
    return {
        **{name: float(value) for name, value in fits.items()},
        "n_pairs": int(mask.sum()),
    }


def fit_laws(log_var: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """`fit_variance` for a stack of log variances `(..., T, T)` (e.g. one per bootstrap resample) at once:
    alpha, lambda, r2 and arrival_r2, each `(...)`."""
    t, arrival = np.nonzero(mask)
    y = log_var[..., t, arrival]  # (..., P)
    x = arrival - arrival.mean()
    slope = (y @ x) / (x @ x)
    intercept = y.mean(-1) - slope * arrival.mean()
    centered = y - y.mean(-1, keepdims=True)
    total = np.sum(centered**2, -1)
    r2 = 1.0 - np.sum((centered - slope[..., None] * x) ** 2, -1) / total
    groups = (arrival[:, None] == np.unique(arrival)[None]).astype(
        np.float64
    )  # (P, G) one-hot
    group_mean = (y @ groups) / groups.sum(0)
    arrival_r2 = 1.0 - np.sum((y - group_mean @ groups.T) ** 2, -1) / total
    return {
        "alpha": np.exp(intercept),
        "lambda": slope,
        "r2": r2,
        "arrival_r2": arrival_r2,
    }


def fit_accumulated(log_var: np.ndarray, mask: np.ndarray) -> dict:
    """The law that the noise rate alpha lambda e^(lambda t), injected from the departure layer on, gives the
    residual of a map restarted at t: ln var = ln alpha + lambda (t + tau) + ln(1 - e^(-lambda tau)) (the noise
    accumulated over [t, t + tau] only), least squares over the pairs in `mask` of log_var `(T, T)`: alpha,
    lambda and r2, to set against `fit_variance` (Eq. 2, accumulated since the input)."""
    from scipy.optimize import least_squares

    t, arrival = np.nonzero(mask)
    y, tau = log_var[t, arrival], arrival - t
    start = fit_variance(log_var, mask)
    misfit = lambda p: p[0] + p[1] * arrival + np.log(-np.expm1(-p[1] * tau)) - y
    p = least_squares(
        misfit,
        [np.log(start["alpha"]), max(start["lambda"], 1e-3)],
        bounds=([-np.inf, 1e-6], [np.inf, np.inf]),
    ).x
    r2 = 1.0 - np.sum(misfit(p) ** 2) / np.sum((y - y.mean()) ** 2)
    return {"alpha": float(np.exp(p[0])), "lambda": float(p[1]), "r2": float(r2)}


@dataclass
class ResampledPairs:
    """Summaries of the Eq. 1 residual w(t, s) of every pair s = t + tau, on the whole sample of pilots and on
    each bootstrap resample: axis 0 is the row of the resampling weights (row 0: the sample itself), the last
    two `[t, s]` `(T, T)`, NaN outside the pairs computed.

    `trace`: tr Cov w, the total residual variance (the same in every orthonormal basis). `mean_log_var`:
    the mean over the k coordinates (aligned singular basis of s) of ln var w_i. `offset`: ``|E w|^2 / tr Cov w``,
    the squared mean estimated from pairs of distinct pilots (about 0 for a residual of zero mean at any sample
    size).
    `kurtosis`: the coordinates' excess kurtosis weighted by their variance, sum_i var_i kappa_i / tr Cov w
    (0 for a Gaussian residual, isotropic or not; large when the coordinates that carry the variance have
    heavy tails). `spread` `(B, T)`: tr Cov x(t), the total variance of the ensemble at each layer.
    """

    trace: np.ndarray
    mean_log_var: np.ndarray
    offset: np.ndarray
    kurtosis: np.ndarray
    spread: np.ndarray
    k: int

    def log_mean_var(self) -> np.ndarray:
        """ln(mean variance over the k coordinates), B4's first convention: `(B, T, T)`."""
        return np.log(self.trace / self.k)

    def log_relative_var(self) -> np.ndarray:
        """ln(tr Cov w(t, s) / tr Cov x(s)): the residual variance relative to the spread of the ensemble it
        should predict (ln 2 for a map that knows nothing, adding its own spread to the target's): `(B, T, T)`."""
        return np.log(self.trace / self.spread[:, None, :])


def resampled_pairs(
    Y: np.ndarray, S: np.ndarray, layers, weights: np.ndarray, progress: bool = True
) -> ResampledPairs:
    """`ResampledPairs` for every pair t < t + tau of `layers` (consecutive integers) from Y `(N, T, k)`
    (`singular_coordinates`) and aligned S `(T, k)`, for each row of `weights` `(B, N)` (how many times each
    pilot is drawn; row 0 all ones for the sample itself). The bases are held fixed; each resample's moments
    are weighted sums over pilots, one `(B, N) x (N, len(t) k)` product per power and tau, of coordinates
    centered on the whole sample's mean (numerically stable in float32)."""
    layers = np.asarray(layers)
    N, T, k = Y.shape
    rows = weights.astype(np.float32)
    n = weights.sum(1)  # (B,)
    distinct = n**2 - np.sum(weights**2, 1)  # ordered pairs of distinct draws
    out = {
        name: np.full((len(rows), T, T), np.nan)
        for name in ("trace", "mean_log_var", "offset", "kurtosis")
    }
    for tau in tqdm(
        range(1, len(layers)),
        desc="resampled residuals",
        unit="tau",
        disable=not progress,
    ):
        t = layers[:-tau]
        W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
        center = W.mean(0)
        Wc = (W - center).reshape(N, -1)
        s1, s2, s3, s4 = (
            (rows @ Wc**p).astype(np.float64) / n[:, None] for p in (1, 2, 3, 4)
        )
        var = s2 - s1**2
        m4 = s4 - 4 * s1 * s3 + 6 * s1**2 * s2 - 3 * s1**4
        var, m4, s1 = (a.reshape(len(rows), len(t), k) for a in (var, m4, s1))
        trace = var.sum(-1)
        mean = center.astype(np.float64)[None] + s1  # (B, len(t), k)
        self_pairs = (rows**2) @ np.einsum(
            "ntk,ntk->nt", W, W
        )  # sum of c_n^2 |w_n|^2, (B, len(t))
        mean_sq = (n[:, None] ** 2 * np.sum(mean**2, -1) - self_pairs) / distinct[
            :, None
        ]
        out["trace"][:, t, t + tau] = trace
        out["mean_log_var"][:, t, t + tau] = np.log(var).mean(-1)
        out["offset"][:, t, t + tau] = mean_sq / trace
        out["kurtosis"][:, t, t + tau] = np.sum(m4 / var, -1) / trace - 3.0
    Yc = Y - Y.mean(0)
    s1 = (rows @ Yc.reshape(N, -1)).astype(np.float64).reshape(len(rows), T, k) / n[
        :, None, None
    ]
    s2 = (rows @ np.einsum("ntk,ntk->nt", Yc, Yc)).astype(np.float64) / n[:, None]
    return ResampledPairs(**out, spread=s2 - np.sum(s1**2, -1), k=k)


def percentile_estimate(
    values: np.ndarray, n: int, *, unit: str, level: float = LEVEL
) -> Estimate:
    """The `Estimate` of a statistic evaluated on the whole sample (`values[0]`) and on bootstrap resamples
    (`values[1:]`, e.g. the rows after the first of `ResampledPairs`): percentile interval of the resamples, as
    `lotlib.intervals.bootstrap` gives (non-finite resamples dropped), over `n` units of `unit`."""
    values = np.asarray(values, dtype=np.float64)
    draws = values[1:][np.isfinite(values[1:])]
    if len(draws) == 0:
        return Estimate(float(values[0]), np.nan, np.nan, n, unit, "bootstrap", level)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(float(values[0]), float(lo), float(hi), n, unit, "bootstrap", level)


def shuffled_pilots(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """A null with every layer's ensemble exactly as it is and no lines of thought: the pilots permuted
    independently at each layer, so that x(t) and x(t + 1) of one row belong to different pseudo-sentences.
    X `(N, T, D)` -> `(N, T, D)`, seeded."""
    rng = np.random.default_rng(seed)
    return np.stack([X[rng.permutation(len(X)), t] for t in range(X.shape[1])], axis=1)


def offdiagonal_correlation(W: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Root mean square correlation between distinct coordinates of W `(N, d)` for each row of `weights`
    `(B, N)`: `(B,)`. The mean square is estimated from pairs of distinct pilots (n != m: (z_n . z_m)^2 minus
    its diagonal terms estimates sum_{i != j} rho_ij^2), so independent coordinates give about 0 at any sample
    size (a negative estimate reads as 0). Coordinates are standardized by the whole sample (held fixed)."""
    Z = (W - W.mean(0)) / W.std(0)
    squares = Z**2
    A = (Z @ Z.T) ** 2 - squares @ squares.T  # (N, N)
    pairs = np.einsum("bn,nm,bm->b", weights, A, weights) - (weights**2) @ np.diagonal(
        A
    )
    count = weights.sum(1) ** 2 - np.sum(weights**2, 1)
    d = W.shape[1]
    return np.sqrt(np.clip(pairs / count / (d * (d - 1)), 0.0, None))


def mean_abs_offdiagonal(W: np.ndarray) -> float:
    """Mean abs(correlation) between distinct coordinates of W `(N, k)` over the ensemble (independent
    Gaussian coordinates give about sqrt(2 / (pi N)))."""
    C = np.corrcoef(W, rowvar=False)
    return float(np.abs(C[~np.eye(len(C), dtype=bool)]).mean())
