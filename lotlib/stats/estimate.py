"""Values that carry their uncertainty: a 95% interval and the sample it came from."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import numpy as np

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A measured value with its `level` interval [lo, hi] over `n` units of `unit` (`method` says how).

    Every verdict-bearing number of the book is an `Estimate`: the value measured on the whole sample, an
    interval, the size `n` of the sample and its `unit` (what was resampled: pseudo-sentences, pilots, heads,
    nouns, seeds...). Four ways to get one:

    - `bootstrap(statistic, n)`: the unit of sampling is resampled with replacement (seeded); the statistic
      receives the indices of one resample. Percentile interval.
    - `over_seeds(values)`: the randomness is in the method (Langevin noise, UMAP, a re-initialisation, a
      classifier's split); the value is the mean over seeds, the interval a t-interval of that mean.
    - `jackknife_estimate(value, jackknife, n)`: the statistic with each unit (or group of units) left out; a
      t-interval of the jackknife's standard error, for smooth statistics of a few dozen units.
    - `exact(value)`: nothing was sampled (a property of the weights, checked on all of them); lo = hi = value.

    `Estimate.to_json()` is what a chapter's summary stores: `{"value", "lo", "hi", "n", "unit", "method"}`.
    """

    value: float
    lo: float
    hi: float
    n: int
    unit: str
    method: str = "bootstrap"
    level: float = LEVEL

    def to_json(self) -> dict:
        return {
            k: (_finite(v) if isinstance(v, float) else v)
            for k, v in asdict(self).items()
        }

    @classmethod
    def from_json(cls, data: dict) -> Estimate:
        return cls(
            **{
                k: (
                    math.nan
                    if data.get(k) is None and k in ("value", "lo", "hi")
                    else data[k]
                )
                for k in cls.__dataclass_fields__
                if k in data
            }
        )

    def __format__(self, spec: str) -> str:
        spec = spec or ".3g"
        if self.lo == self.hi:
            return format(self.value, spec)
        return f"{self.value:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"

    def __str__(self) -> str:
        return format(self)


NOT_APPLICABLE = "not_applicable"


def not_applicable(reason: str) -> dict:
    """The value of a claim that does not apply to this model, with the reason the report shows."""
    return {NOT_APPLICABLE: reason}


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def is_estimate(value) -> bool:
    """True for an `Estimate` or its JSON form (a dict with value, lo and hi)."""
    return isinstance(value, Estimate) or (
        isinstance(value, dict) and {"value", "lo", "hi"} <= set(value)
    )


def as_estimate(value) -> Estimate | None:
    """An `Estimate` from an Estimate, its JSON form, or a plain number (exact); None for anything else."""
    if isinstance(value, Estimate):
        return value
    if is_estimate(value):
        return Estimate.from_json(value)
    if isinstance(value, (bool, np.bool_)):
        return exact(float(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return exact(float(value))
    return None


def exact(value: float, n: int = 1, unit: str = "exact") -> Estimate:
    """A value with no sampling uncertainty (a property checked on every item): lo = hi = value."""
    value = float(value)
    return Estimate(value, value, value, int(n), unit, "exact")


def bootstrap(
    statistic: Callable[[np.ndarray], float],
    n: int,
    *,
    unit: str,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = LEVEL,
) -> Estimate:
    """Percentile bootstrap of `statistic` over `n` units resampled with replacement.

    `statistic(indices)` computes the value from the units `indices` `(n,)` (repeats allowed); the value is
    `statistic(arange(n))`. Resamples where the statistic is not finite are dropped (a degenerate resample,
    e.g. all of one class); the interval uses the rest. Deterministic for a given `seed`.
    """
    if n < 2:
        raise ValueError(f"bootstrap needs at least 2 {unit}, got {n}")
    value = float(statistic(np.arange(n)))
    rng = np.random.default_rng(seed)
    draws = np.array(
        [statistic(rng.integers(0, n, size=n)) for _ in range(n_boot)], dtype=np.float64
    )
    draws = draws[np.isfinite(draws)]
    if len(draws) == 0:
        return Estimate(value, math.nan, math.nan, n, unit)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(value, float(lo), float(hi), n, unit, "bootstrap", level)


def zero_band(low: float, high: float) -> tuple[float, float]:
    """The values that read as "about zero" for a statistic whose values on Gaussian samples of the same size
    (its sampling floor) run from `low` to `high`: from 0 to `high`, or from `low` where that is below 0 (a
    signed statistic such as an excess kurtosis)."""
    return min(0.0, float(low)), float(high)


def resampling_weights(n: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """`(1 + n_boot, n)`: row 0 all ones (the sample itself), then how many times each of the `n` units is
    drawn in each bootstrap resample (the same resamples as `bootstrap` for `seed`). A
    statistic written with weighted means over units is evaluated on every row at once."""
    rng = np.random.default_rng(seed)
    draws = [
        np.bincount(rng.integers(0, n, size=n), minlength=n) for _ in range(n_boot)
    ]
    return np.vstack([np.ones(n), *draws]).astype(np.float64)


def percentile_estimate(
    values: np.ndarray, n: int, *, unit: str, level: float = LEVEL
) -> Estimate:
    """The `Estimate` of a statistic evaluated on the whole sample (`values[0]`) and on bootstrap resamples
    (`values[1:]`, e.g. statistics of the rows of `resampling_weights` after the first): percentile interval of the
    resamples, as `bootstrap` gives (non-finite resamples dropped), over `n` units of `unit`."""
    values = np.asarray(values, dtype=np.float64)
    draws = values[1:][np.isfinite(values[1:])]
    if len(draws) == 0:
        return Estimate(float(values[0]), np.nan, np.nan, n, unit, "bootstrap", level)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(float(values[0]), float(lo), float(hi), n, unit, "bootstrap", level)


def jackknife_weights(n: int, groups: int = 50) -> np.ndarray:
    """`(g, n)` with g = min(n, `groups`): row i leaves the i-th of g contiguous groups of units out (weight 0)
    and keeps the others once. Up to `groups` units this is the leave-one-out jackknife; beyond, the
    delete-a-group jackknife (Efron & Tibshirani 1993, 11.5), at a bounded cost."""
    g = min(n, groups)
    weights = np.ones((g, n))
    for i, block in enumerate(np.array_split(np.arange(n), g)):
        weights[i, block] = 0.0
    return weights


def bootstrap_and_jackknife_weights(n: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """`(1 + n_boot + g, n)`: the rows of `resampling_weights` (the sample, then `n_boot` bootstrap resamples,
    seeded) followed by the g-group jackknife (`jackknife_weights`), for statistics of which some take a
    percentile interval of rows `1..n_boot` and the others `jackknife_estimate` of the rows after them."""
    return np.vstack([resampling_weights(n, n_boot, seed), jackknife_weights(n)])


def jackknife_estimate(
    value: float,
    jackknife: np.ndarray,
    n: int,
    *,
    unit: str,
    log: bool = False,
    level: float = LEVEL,
) -> Estimate:
    """The interval of a smooth statistic from its jackknife: the statistic with each unit or group left out
    (`jackknife` `(g,)`, the rows of `jackknife_weights`), value -+ t_(g-1) x the jackknife's standard error,
    over `n` units of `unit`. The jackknife's variance errs large (Efron-Stein), which keeps the interval's
    coverage where a percentile bootstrap of a few dozen heavy-tailed units falls short
    (`benchmarks/coverage.py`). `log`: for a non-negative statistic (a ratio of spreads, a distance), on the
    log scale, which keeps the interval positive and takes the ratio's skew; where the statistic or a
    jackknife value is 0 (a distance that reads 0), on the raw scale from 0 up, and no interval for a
    negative one. Not for a statistic at the edge of its range (a norm whose population value is 0): the
    jackknife assumes it moves smoothly with the data."""
    from scipy.stats import t

    found = np.append(np.asarray(jackknife, dtype=np.float64), value)
    g = len(found) - 1
    if g < 2 or not np.all(np.isfinite(found)) or (log and np.any(found < 0)):
        return Estimate(float(value), np.nan, np.nan, n, unit, "jackknife", level)
    on_log = log and bool(np.all(found > 0))
    scale = np.log(found) if on_log else found
    se = np.sqrt((g - 1) / g * np.sum((scale[:-1] - scale[:-1].mean()) ** 2))
    lo, hi = scale[-1] + np.array([-1, 1]) * t.ppf((1 + level) / 2, g - 1) * se
    if on_log:
        lo, hi = np.exp(lo), np.exp(hi)
    elif log:
        lo = max(lo, 0.0)
    return Estimate(float(value), float(lo), float(hi), n, unit, "jackknife", level)


def bootstrap_mean(
    samples: np.ndarray,
    *,
    unit: str,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = LEVEL,
) -> Estimate:
    """Bootstrap interval of the mean of `samples` `(n,)` (NaNs ignored), vectorized over resamples."""
    samples = np.asarray(samples, dtype=np.float64)
    samples = samples[np.isfinite(samples)]
    n = len(samples)
    if n < 2:
        raise ValueError(f"bootstrap_mean needs at least 2 finite {unit}, got {n}")
    rng = np.random.default_rng(seed)
    means = samples[rng.integers(0, n, size=(n_boot, n))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return Estimate(
        float(samples.mean()), float(lo), float(hi), n, unit, "bootstrap", level
    )


def over_seeds(
    values: Iterable[float], *, unit: str = "seeds", level: float = LEVEL
) -> Estimate:
    """Mean over independent repetitions (seeds) with a Student-t interval of the mean."""
    from scipy.stats import t as student

    values = np.asarray(list(values), dtype=np.float64)
    n = len(values)
    mean = float(values.mean())
    if n < 2:
        return Estimate(mean, math.nan, math.nan, n, unit, "seeds", level)
    half = float(
        student.ppf((1 + level) / 2, n - 1) * values.std(ddof=1) / math.sqrt(n)
    )
    return Estimate(mean, mean - half, mean + half, n, unit, "seeds", level)


def proportion(successes: int, n: int, *, unit: str, level: float = LEVEL) -> Estimate:
    """A share with its Wilson score interval (binomial sampling of `n` independent units)."""
    from scipy.stats import norm

    if n < 1:
        raise ValueError(f"proportion needs at least one {unit}")
    z = float(norm.ppf((1 + level) / 2))
    p = successes / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Estimate(
        p, max(0.0, center - half), min(1.0, center + half), n, unit, "wilson", level
    )


BELOW_ACROSS_ABOVE = ("below", "across", "above")
LIES = ("lies below", "overlaps", "lies above")  # one interval against another
STRADDLES = ("lies below", "straddles", "lies above")  # an interval against a number


def side_word(
    estimate: Estimate,
    words: tuple[str, str, str] = BELOW_ACROSS_ABOVE,
    than: float | Estimate = 0.0,
) -> str:
    """A word for the prose computed from the run: words[0] when the whole interval of `estimate` lies below
    `than` (a number, or the whole interval of another Estimate), words[2] when it lies above, words[1] when
    the two meet (or either has no interval)."""
    low, high = (than.lo, than.hi) if isinstance(than, Estimate) else (than, than)
    if estimate.hi < low:
        return words[0]
    return words[2] if estimate.lo > high else words[1]


def centered_percentile(
    values,
    n: int,
    *,
    unit: str,
    level: float = LEVEL,
    bounds: tuple[float, float] = (-np.inf, np.inf),
    with_raw: bool = False,
) -> Estimate:
    """The `Estimate` of a statistic on the sample (`values[0]`) from its repetitions (`values[1:]`, non-finite
    ones dropped): the repetitions' `level` percentile interval moved by the value minus their mean, clipped
    to the values the statistic can take (`bounds`: an accuracy 0..1, K0 / D up to 1). `with_raw`: the
    smallest interval holding both the moved one and the unmoved one, for a statistic whose repetitions move
    for reasons the sample cannot tell apart (see `lotlib.chapters.b4_authors_protocol.authors_summary`).

    Why moved: a draw with replacement holds about 63% distinct pilots, and a statistic fit and scored on
    the same pilots (the paper's bases, a classifier's training set) moves with the number of distinct
    pilots, so the repetitions are shifted as a whole. Their spread is kept, their shift is not."""
    values = np.asarray(values, dtype=np.float64)
    value, draws = float(values[0]), values[1:][np.isfinite(values[1:])]
    method = "bootstrap (centered and raw)" if with_raw else "bootstrap (centered)"
    if len(draws) == 0:
        return Estimate(value, np.nan, np.nan, n, unit, method, level)
    quantiles = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    moved = quantiles + value - draws.mean()
    if with_raw:
        moved = np.array([min(moved[0], quantiles[0]), max(moved[1], quantiles[1])])
    lo, hi = np.clip(moved, *bounds)
    return Estimate(value, float(lo), float(hi), n, unit, method, level)


def resampled_estimate(
    values: np.ndarray, n: int, *, unit: str, level: float = LEVEL
) -> Estimate:
    """The `Estimate` of a statistic evaluated on the rows of `resampling_weights`: `values` `(1 + n_boot,)`,
    the sample's value first. Interval: the value plus or minus z times the standard deviation of the
    resamples (non-finite ones dropped), over `n` units."""
    from scipy.stats import norm

    values = np.asarray(values, dtype=np.float64)
    draws = values[1:][np.isfinite(values[1:])]
    value = float(values[0])
    if len(draws) < 2:
        return Estimate(value, np.nan, np.nan, n, unit, "bootstrap-se", level)
    half = float(norm.ppf((1 + level) / 2) * draws.std(ddof=1))
    return Estimate(value, value - half, value + half, n, unit, "bootstrap-se", level)
