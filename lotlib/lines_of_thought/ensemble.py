"""Ensemble SVD: the per-layer, uncentered singular basis of the pilots' states; how many directions an
ensemble spans around its mean; and structureless Gaussian clouds shaped like an ensemble (the nulls of
those measures)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

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
    with threadpool_limits(
        limits=1
    ):  # threaded LAPACK SVDs of this size run several times slower on busy cores
        for t in range(T):
            _, s, vh = np.linalg.svd(X[:, t, :].astype(np.float64), full_matrices=False)
            U[t], S[t] = vh[:k].T, s[:k]
    return U, S


def project(X: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Coordinates of states `(..., D)` on the columns of `basis` `(D, k)`: `(..., k)`."""
    return X @ basis


def align_bases(
    U: np.ndarray, S: np.ndarray, reference: int = 0
) -> tuple[np.ndarray, np.ndarray]:
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
    steps = [(t - 1, t) for t in range(reference + 1, len(U))] + [
        (t + 1, t) for t in range(reference - 1, -1, -1)
    ]
    for done, t in steps:
        overlap = U[done].T @ U[t]  # (k, k)
        _, cols = linear_sum_assignment(-np.abs(overlap))
        U[t], S[t] = U[t][:, cols], S[t][cols]
        signs = np.sign(np.einsum("di,di->i", U[done], U[t]))
        U[t] *= np.where(signs == 0, 1.0, signs)
    return U, S


def centered_spectrum(x: np.ndarray) -> np.ndarray:
    """Variances of states `x` `(N, D)` along their principal directions around the ensemble's mean, sorted
    decreasing: `(min(N, D),)` (eigenvalues of the smaller Gram matrix of the centered rows, over N)."""
    xc = x.astype(np.float64) - x.mean(0, dtype=np.float64)
    gram = xc.T @ xc if len(xc) >= xc.shape[1] else xc @ xc.T
    return np.clip(np.linalg.eigvalsh(gram)[::-1], 0.0, None) / len(xc)


def directions_for(spectrum: np.ndarray, share: float = 0.9) -> int:
    """The smallest k whose k largest values of `spectrum` `(k_max,)` (variances or squared singular values,
    sorted decreasing) carry at least `share` of their sum."""
    cumulative = np.cumsum(spectrum) / np.sum(spectrum)
    return int(1 + np.argmax(cumulative >= share - 1e-12))


def gaussian_cloud(
    x: np.ndarray, n: int | None = None, seed: int = 0, correlated: bool = False
) -> np.ndarray:
    """A structureless cloud shaped like states `x` `(N, D)`: `n` (default N) Gaussian points with the same
    mean and, with `correlated=False`, the same per-coordinate variance and no correlation between
    coordinates; with `correlated=True`, the same full covariance (mean + z @ (x - mean) / sqrt(N), z
    standard normal `(n, N)`). `(n, D)` float64, deterministic for a given `seed`."""
    x = x.astype(np.float64)
    n = len(x) if n is None else n
    rng = np.random.default_rng(seed)
    mean = x.mean(0)
    if correlated:
        return mean + rng.standard_normal((n, len(x))) @ (x - mean) / np.sqrt(len(x))
    return mean + rng.standard_normal((n, x.shape[1])) * x.std(0)


def principal_directions(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean `(D,)` of states `x` `(N, D)` and their `k` leading principal directions around it, `(D, k)`
    orthonormal columns (at most min(N, D) of them)."""
    x = x.astype(np.float64)
    mean = x.mean(0)
    with threadpool_limits(limits=1):
        _, _, vh = np.linalg.svd(x - mean, full_matrices=False)
    return mean, vh[:k].T


def variance_captured(
    x: np.ndarray, mean: np.ndarray, directions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each state of `x` `(N, D)`: the squared norm of x - mean inside the span of `directions` `(D, k)`
    (orthonormal) and in total, both `(N,)`. Their sums' ratio is the share of the ensemble's variance
    around `mean` that the directions carry; with directions fit on other states, an out-of-sample share."""
    xc = x.astype(np.float64) - mean
    return ((xc @ directions) ** 2).sum(1), (xc**2).sum(1)


@dataclass
class Ensemble:
    """The pilots of a Lines of Thought chapter: the model, its pseudo-sentences and their trajectories
    `X` `(N_s, L+1, D)`, with the per-layer singular bases aligned across layers (computed on first use)."""

    lm: object
    corpus: object
    X: np.ndarray

    @property
    def n_s(self) -> int:
        return self.X.shape[0]

    @property
    def L(self) -> int:
        return self.X.shape[1] - 1

    @property
    def D(self) -> int:
        return self.X.shape[2]

    @cached_property
    def aligned(self) -> tuple[np.ndarray, np.ndarray]:
        """`align_bases(*ensemble_svd(X))` over every pilot: U `(L+1, D, k)`, S `(L+1, k)`."""
        return align_bases(*ensemble_svd(self.X))

    def __repr__(self) -> str:
        return f"{self.lm!r}\n{self.corpus!r}: trajectories {self.X.shape}"


def open_ensemble(
    model: str,
    n_k: int = 50,
    n_s: int | str | None = None,
    bos: bool | None = None,
    *,
    device: str = "auto",
    dtype: str = "float32",
    at_least_width: bool = False,
) -> Ensemble:
    """How every Lines of Thought chapter opens: `model` loaded on `device` in `dtype`, Walden cut into
    `n_s` pseudo-sentences of `n_k` tokens (a count, "kD" or None for all; `at_least_width` refuses fewer
    than D, even when all of Walden is fewer) and their trajectories from the cache."""
    from ..models.bounds import pilot_count
    from ..models.trajectories import walden_trajectories

    lm, corpus, X = walden_trajectories(
        model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype
    )
    if at_least_width:
        pilot_count(len(X), X.shape[2], "n_s", at_least_width=True, model=lm.name)
    return Ensemble(lm, corpus, X)
