"""Seeded draws of pilots: a subset, a split in two, a classifier's training rows."""

from __future__ import annotations

import numpy as np


def draw_pilots(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """At most `size` of `n` pilots drawn without replacement from `rng`, sorted: `(min(size, n),)`."""
    return np.sort(rng.choice(n, size=min(size, n), replace=False))


def split_pilots(
    n: int, n_first: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A random split of `n` pilots from `rng`: the first `n_first` of a permutation and the rest, both sorted."""
    order = rng.permutation(n)
    return np.sort(order[:n_first]), np.sort(order[n_first:])


def training_rows(
    pilots: np.ndarray, rng: np.random.Generator, train_fraction: float = 0.5
) -> np.ndarray:
    """Which rows of a draw `pilots` `(n,)` train a classifier, `(n,)` bool: a random `train_fraction` of the
    distinct pilots (at least one on each side), every copy of a pilot on its side."""
    ids = rng.permutation(np.unique(pilots))
    if len(ids) < 2:
        raise ValueError("a classifier's split needs at least 2 distinct pilots")
    n_train = min(max(round(train_fraction * len(ids)), 1), len(ids) - 1)
    return np.isin(pilots, ids[:n_train])
