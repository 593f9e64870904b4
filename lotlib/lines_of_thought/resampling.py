"""Resampled pilots with refitting: the statistic on the sample, then on draws with replacement, and their intervals."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

import numpy as np
from tqdm.auto import tqdm

from ..stats import Estimate, centered_percentile
from ..storage.checkpoints import resumable

T = TypeVar("T")


def resample_rows(
    statistic: Callable[[np.ndarray, np.random.Generator], T],
    n: int,
    *,
    n_rep: int,
    seed: int = 0,
    desc: str | None = None,
) -> list[T]:
    """`statistic(pilots, rng)` on the sample (`arange(n)`, `default_rng(seed)`), then on each of `n_rep` draws
    of n pilots with replacement with fresh randomness (`default_rng([seed, r + 1])`): `1 + n_rep` rows, the
    sample's first. Each row is kept for a resumed run of the chapter (`lotlib.storage.checkpoints`). A tqdm
    bar when `desc` is given."""
    steps = resumable(desc or "resamples")
    rows = [steps(0, lambda: statistic(np.arange(n), np.random.default_rng(seed)))]

    def draw(r: int) -> T:
        rng = np.random.default_rng([seed, r + 1])
        return statistic(rng.integers(0, n, size=n), rng)

    for r in tqdm(range(n_rep), desc=desc, disable=desc is None):
        rows.append(steps(r + 1, partial(draw, r)))
    return rows


def centered_estimates(
    rows: list[dict[str, float]],
    n: int,
    *,
    unit: str,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> dict[str, Estimate]:
    """`centered_percentile` of each statistic of `rows` (`resample_rows`: the sample's values first)."""
    return {
        key: centered_percentile(
            [row[key] for row in rows], n, unit=unit, bounds=bounds
        )
        for key in rows[0]
    }


def refit_bootstrap(
    statistic: Callable[[np.ndarray, np.random.Generator], dict[str, float]],
    n: int,
    *,
    n_rep: int,
    seed: int = 0,
    unit: str = "pilots",
    desc: str | None = None,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> dict[str, Estimate]:
    """Percentile intervals of statistics that fit something on the pilots (bases, a classifier).

    `statistic(pilots, rng)` computes every value from the pilots `pilots` `(n,)` (indices 0..n-1, repeats
    allowed), refitting each fitted step on them, with the method's randomness (splits, clouds) from `rng`.
    The values: `statistic(arange(n), default_rng(seed))`. Each of the `n_rep` repetitions draws n pilots
    with replacement and fresh randomness (`resample_rows`); the interval is the percentile interval of the
    repetitions re-centered on the value and clipped to the statistics' `bounds` (`centered_percentile`).
    A tqdm bar when `desc` is given.
    """
    rows = resample_rows(statistic, n, n_rep=n_rep, seed=seed, desc=desc)
    return centered_estimates(rows, n, unit=unit, bounds=bounds)
