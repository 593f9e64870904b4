"""UMAP's Euclidean distance in compiled all-pairs loops, and numba's on-disk cache for umap's compiled code."""

from __future__ import annotations

import sys
from pathlib import Path

import numba
import numpy as np
from numba.core.caching import NullCache
from numba.core.dispatcher import Dispatcher
from umap.distances import euclidean

# the packages whose compiled functions `cache_compilation` keeps on disk
CACHED_PACKAGES = ("umap", "pynndescent")


@numba.njit(parallel=True)
def pairwise_euclidean(X: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of X `(n, d)` (float32, C order): `(n, n)` float32, bit for bit what
    umap's fit computes below 4,096 rows (its compiled `euclidean` for each pair above the diagonal, mirrored,
    0 on the diagonal), without a Python call per pair."""
    n = X.shape[0]
    out = np.zeros((n, n), dtype=np.float32)
    for i in numba.prange(n):
        for j in range(i + 1, n):
            out[i, j] = euclidean(X[i], X[j])
    for i in numba.prange(n):
        for j in range(i):
            out[i, j] = out[j, i]
    return out


@numba.njit(parallel=True)
def cross_euclidean(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Euclidean distances from the rows of X `(m, d)` to those of Y `(n, d)` (both float32, C order): `(m, n)`
    float32, bit for bit what umap's `transform` computes between new points and the rows it was fitted on."""
    out = np.empty((X.shape[0], Y.shape[0]), dtype=np.float32)
    for i in numba.prange(X.shape[0]):
        for j in range(Y.shape[0]):
            out[i, j] = euclidean(X[i], Y[j])
    return out


def on_threads(n_jobs: int, kernel, *args):
    """`kernel(*args)` on `n_jobs` of numba's threads, as umap runs its own compiled code (-1: all of them)."""
    previous = numba.get_num_threads()
    if n_jobs > 0:
        numba.set_num_threads(min(n_jobs, numba.config.NUMBA_NUM_THREADS))
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(previous)


def cache_compilation(folder: Path) -> None:
    """Keep the machine code numba compiles for the loaded modules of `CACHED_PACKAGES` and of this module in
    `folder`, so that the next process (each chapter's kernel) loads it instead of compiling it again: numba's
    on-disk cache, what `cache=True` sets up, for each of their compiled functions that has none. The cache is keyed by the source files and numba's version; the code it loads is the code a fresh
    compilation gives."""
    previous, numba.config.CACHE_DIR = numba.config.CACHE_DIR, str(folder)
    try:
        for name, module in list(sys.modules.items()):
            if module is None or (
                name.split(".")[0] not in CACHED_PACKAGES and name != __name__
            ):
                continue
            for value in list(vars(module).values()):
                if isinstance(value, Dispatcher) and isinstance(
                    value._cache, NullCache
                ):
                    value.enable_caching()
    finally:
        numba.config.CACHE_DIR = previous
