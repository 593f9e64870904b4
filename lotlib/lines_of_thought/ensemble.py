"""Ensemble SVD: the per-layer, uncentered singular basis of the pilots' states."""
from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits


def ensemble_svd(X: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Thin SVD of the `(D, N)` matrix of states at every layer, **uncentered**: x = U S V^T.

    X: `(N, L+1, D)`. Returns U `(L+1, D, k)` (columns are singular vectors) and S `(L+1, k)`,
    with k = min(N, D) unless given. Signs are as numpy returns them; align before comparing layers.
    """
    N, T, D = X.shape
    k = k or min(N, D)
    U = np.empty((T, D, k), dtype=np.float64)
    S = np.empty((T, k), dtype=np.float64)
    with threadpool_limits(limits=1):  # threaded LAPACK SVDs of this size run several times slower on busy cores
        for t in range(T):
            _, s, vh = np.linalg.svd(X[:, t, :].astype(np.float64), full_matrices=False)
            U[t], S[t] = vh[:k].T, s[:k]
    return U, S


def project(X: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Coordinates of states `(..., D)` on the columns of `basis` `(D, k)`: `(..., k)`."""
    return X @ basis


def align_bases(U: np.ndarray, S: np.ndarray, reference: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Re-order and re-sign singular vectors so that column i means the same direction at every layer.

    U `(T, D, k)`, S `(T, k)` from `ensemble_svd`. Starting from layer `reference` (kept as it is, so its
    order by decreasing sigma names the columns; -1 for the last layer), each neighbouring layer is
    matched to the already aligned one by an optimal assignment on abs(U(t)^T U(t±1)) (Hungarian
    algorithm; the authors match greedily), then each matched column's sign is chosen so that its inner
    product with its partner is positive. Returns aligned copies; singular values follow their vectors
    (sorted only at the reference layer).
    """
    from scipy.optimize import linear_sum_assignment

    U, S = U.copy(), S.copy()
    reference %= len(U)
    steps = [(t - 1, t) for t in range(reference + 1, len(U))] + [(t + 1, t) for t in range(reference - 1, -1, -1)]
    for done, t in steps:
        overlap = U[done].T @ U[t]  # (k, k)
        _, cols = linear_sum_assignment(-np.abs(overlap))
        U[t], S[t] = U[t][:, cols], S[t][cols]
        signs = np.sign(np.einsum("di,di->i", U[done], U[t]))
        U[t] *= np.where(signs == 0, 1.0, signs)
    return U, S
