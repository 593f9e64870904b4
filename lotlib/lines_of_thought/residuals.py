"""Residuals of the linear extrapolation (Lines of Thought, Eq. 2, Fig. B4): are they i.i.d. Gaussian
coordinates with variance alpha exp(lambda (t + tau)), a function of the arrival layer only?

In the aligned singular basis U(t+tau) the residual of Eq. 1 has the coordinates

    U(t+tau)^T w = y(t+tau) - Lambda y(t),    y(t) = U(t)^T x(t),    Lambda = Sigma(t+tau) Sigma(t)^-1,

so with the coordinates y of every layer computed once, each (t, t+tau) pair costs O(N k) instead of
two (N, D) x (D, D) products (`lotlib.extrapolation.residuals` is the direct form; the tests check that
both agree). Raw coordinates are w = U(t+tau) (y(t+tau) - Lambda y(t)).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm


def singular_coordinates(X: np.ndarray, U: np.ndarray) -> np.ndarray:
    """y(t) = U(t)^T x(t) for every pilot and layer: X `(N, T, D)`, U `(T, D, k)` -> `(N, T, k)` float32."""
    Y = np.matmul(X.astype(np.float32).transpose(1, 0, 2), U.astype(np.float32))  # (T, N, k), batched BLAS
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
    return mean / np.sqrt(var), var, m4 / var ** 2 - 3.0


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


def pair_statistics(Y: np.ndarray, S: np.ndarray, layers, U: np.ndarray | None = None,
                    progress: bool = True) -> PairStatistics:
    """Residual statistics for every pair t < t + tau of `layers` (consecutive integers), vectorized over
    the ensemble and over t for each tau. Y `(N, T, k)` from `singular_coordinates`, S `(T, k)` aligned.
    Without U: statistics of the coordinates in the aligned basis U(t+tau) (`basis='singular'`); with
    U `(T, D, k)`: of the raw residual-stream coordinates w = U(t+tau) (...) (`basis='raw'`, one
    `(N, k) x (k, D)` product per pair)."""
    layers = np.asarray(layers)
    T = Y.shape[1]
    k = Y.shape[2] if U is None else U.shape[1]
    out = {name: np.full((T, T, k), np.nan) for name in ("z", "var", "kurtosis")}
    for tau in tqdm(range(1, len(layers)), desc="residual statistics", unit="tau", disable=not progress):
        t = layers[:-tau]
        W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
        if U is not None:
            W = np.matmul(W.transpose(1, 0, 2), U[t + tau].transpose(0, 2, 1).astype(np.float32)).transpose(1, 0, 2)
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
    t, arrival = np.nonzero(mask)
    y = log_var[t, arrival]
    slope, intercept = np.polyfit(arrival, y, 1)
    total = np.sum((y - y.mean()) ** 2)
    r2 = 1.0 - np.sum((y - (intercept + slope * arrival)) ** 2) / total
    group_mean = np.bincount(arrival, weights=y) / np.maximum(np.bincount(arrival), 1)
    arrival_r2 = 1.0 - np.sum((y - group_mean[arrival]) ** 2) / total
    return {"alpha": float(np.exp(intercept)), "lambda": float(slope), "r2": float(r2),
            "arrival_r2": float(arrival_r2), "n_pairs": int(len(y))}


def mean_abs_offdiagonal(W: np.ndarray) -> float:
    """Mean |correlation| between distinct coordinates of W `(N, k)` over the ensemble (independent
    Gaussian coordinates give about sqrt(2 / (pi N)))."""
    C = np.corrcoef(W, rowvar=False)
    return float(np.abs(C[~np.eye(len(C), dtype=bool)]).mean())
