"""Linear extrapolation of an ensemble between layers (Lines of Thought, Eq. 1) and how to tell it apart.

    x~(t, tau) = U(t+tau) Lambda U(t)^T x(t),    Lambda = Sigma(t+tau) Sigma(t)^-1,    w = x(t+tau) - x~

U `(T, D, k)` and S `(T, k)` are per-layer ensemble bases **aligned** across layers
(`lotlib.lines_of_thought.ensemble.ensemble_svd` then `align_bases`), so column i is the same direction at every t.
"""

from __future__ import annotations

import numpy as np


def extrapolate(
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    t: int,
    tau: int,
    rank: int | None = None,
) -> np.ndarray:
    """Eq. 1: the states at layer t carried to layer t + tau, `(N, D)` (float64).

    X: trajectories `(N, T, D)`; U `(T, D, k)`, S `(T, k)` aligned. `rank=None` uses all k columns
    (k = min(N, D) from `ensemble_svd`); `rank=r` uses the r columns with the largest sigma at layer t.
    Directions whose sigma(t) is numerically zero are dropped (a pseudo-inverse of Sigma(t)).
    """
    cols = _columns(S[t], rank)
    source, target = U[t][:, cols], U[t + tau][:, cols]
    coords = X[:, t, :].astype(np.float64) @ source  # (N, r)
    return (coords * _ratio(S[t + tau][cols], S[t][cols])) @ target.T


def residuals(
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    t: int,
    tau: int,
    rank: int | None = None,
) -> np.ndarray:
    """w = x(t+tau) - x~(t, tau), `(N, D)` (float64): what the linear extrapolation misses."""
    return X[:, t + tau, :].astype(np.float64) - extrapolate(X, U, S, t, tau, rank)


def basis_angles(U: np.ndarray, i: int) -> np.ndarray:
    """Angle in degrees between singular vector i at every pair of layers, arccos|u_i(t1).u_i(t2)|: `(T, T)`.

    U `(T, D, k)` aligned; 0 on the diagonal, 90 for orthogonal directions.
    """
    u = U[:, :, i]
    return np.degrees(np.arccos(np.clip(np.abs(u @ u.T), 0.0, 1.0)))


def svm_accuracy(
    A: np.ndarray, B: np.ndarray, folds: int = 5, seed: int = 0, C: float = 1.0
) -> float:
    """Cross-validated accuracy of a linear SVM telling ensemble A from ensemble B, both `(n, f)`.

    Rows are paired (row j of A and of B come from the same pilot): a pair is always in the same fold,
    so the test pilots are never seen in training. Features are standardized on each training split;
    LinearSVC is solved in the primal (the dual solver fails to converge on ensembles this alike).
    0.5 means indistinguishable, 1.0 linearly separable.
    """
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    if A.shape != B.shape:
        raise ValueError(
            f"svm_accuracy needs paired ensembles of one shape, got {A.shape} and {B.shape}"
        )
    n = len(A)
    fold_of_pilot = np.random.default_rng(seed).permutation(n) % folds
    fold = np.concatenate([fold_of_pilot, fold_of_pilot])
    splits = [
        (np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(folds)
    ]
    features = np.concatenate([A, B]).astype(np.float64)
    labels = np.repeat([0, 1], n)
    classifier = make_pipeline(
        StandardScaler(), LinearSVC(C=C, dual=False, max_iter=5000)
    )
    return float(cross_val_score(classifier, features, labels, cv=splits).mean())


def _columns(sigma: np.ndarray, rank: int | None) -> np.ndarray:
    order = np.argsort(sigma)[::-1]
    return np.sort(order[:rank]) if rank is not None else np.arange(len(sigma))


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    keep = (
        denominator
        > denominator.max() * max(denominator.shape) * np.finfo(np.float64).eps
    )
    return np.where(keep, numerator / np.where(keep, denominator, 1.0), 0.0)
