"""Ensemble SVD: the per-layer, uncentered singular basis of the pilots' states."""
from __future__ import annotations

import numpy as np


def ensemble_svd(X: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Thin SVD of the `(D, N)` matrix of states at every layer, **uncentered**: x = U S V^T.

    X: `(N, L+1, D)`. Returns U `(L+1, D, k)` (columns are singular vectors) and S `(L+1, k)`,
    with k = min(N, D) unless given. Signs are as numpy returns them; align before comparing layers.
    """
    N, T, D = X.shape
    k = k or min(N, D)
    U = np.empty((T, D, k), dtype=np.float64)
    S = np.empty((T, k), dtype=np.float64)
    for t in range(T):
        _, s, vh = np.linalg.svd(X[:, t, :].astype(np.float64), full_matrices=False)
        U[t], S[t] = vh[:k].T, s[:k]
    return U, S


def project(X: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Coordinates of states `(..., D)` on the columns of `basis` `(D, k)`: `(..., k)`."""
    return X @ basis
