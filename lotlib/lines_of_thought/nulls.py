"""Null clouds and shuffles: ensembles with the trajectories' statistics and no lines of thought."""

from __future__ import annotations

import numpy as np


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


def structureless_cloud(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """Gaussian points with the trajectories' per-layer mean and per-coordinate variance, independent across
    layers and pilots: the same norm growth and nothing else. X `(N, T, D)` -> `(N, T, D)` float32, seeded."""
    return np.stack(
        [gaussian_cloud(X[:, t], seed=seed + t) for t in range(X.shape[1])], axis=1
    ).astype(np.float32)


def shuffled_pilots(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """A null with every layer's ensemble exactly as it is and no lines of thought: the pilots permuted
    independently at each layer, so that x(t) and x(t + 1) of one row belong to different pseudo-sentences.
    X `(N, T, D)` -> `(N, T, D)`, seeded."""
    rng = np.random.default_rng(seed)
    return np.stack([X[rng.permutation(len(X)), t] for t in range(X.shape[1])], axis=1)
