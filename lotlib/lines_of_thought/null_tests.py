"""Null-test building blocks: separability of two ensembles and its resampled split, the gibberish ensemble
beside language, path shapes (steps, cosines, straightness, coherence) and chapter B4's noise law on
resamples that refit the bases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..models.bounds import pilot_count
from ..models.corpus import gibberish, walden
from ..stats import (
    Estimate,
    centered_percentile,
    resampled_estimate,
    training_rows,
)
from ..stats.backend import Device
from ..storage.checkpoints import Steps, resumable
from ..storage.results import cached_result
from .authors_protocol import weighted_bases
from .ensemble import align_bases, ensemble_svd
from .residuals import (
    fit_laws,
    fit_variance,
    pair_mask,
    pair_statistics,
    singular_coordinates,
    unbiased_excess_kurtosis,
)

CLASSIFIERS = ("perceptron", "logistic")

# the summary key of the separability's minimum over the block outputs t = 1..L: C4's claim, on C5's rows
SEPARABILITY_MIN = "separability_min"


# ----------------------------------------------------------------------------------------------
# language vs gibberish


def split_rows(
    n_a: int,
    n_b: int,
    train_fraction: float = 0.7,
    seed: int = 0,
    resample: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Training and test rows of the stacked classes [A; B] (A's rows 0..n_a-1, then B's): `(n_train,)`,
    `(n_test,)`.

    Without `resample`, the sample's own seeded, stratified split (sklearn's `train_test_split`). With it, one
    repetition of the bootstrap: each class's pseudo-sentences are drawn with replacement (n_a of A, n_b of
    B), and a seeded `train_fraction` of each class's distinct drawn ones trains, the rest tests. Every copy
    of a pseudo-sentence lands on one side, so none is scored by a classifier that was fitted on it. The
    draw depends only on (n_a, n_b, seed): ensembles of the same sizes get the same rows."""
    from sklearn.model_selection import train_test_split

    labels = np.repeat([0, 1], [n_a, n_b])
    if not resample:
        return train_test_split(
            np.arange(n_a + n_b),
            train_size=train_fraction,
            stratify=labels,
            random_state=seed,
        )
    rng, train, test = np.random.default_rng(seed), [], []
    for offset, n in ((0, n_a), (n_a, n_b)):
        drawn = rng.integers(0, n, size=n)
        fitted = training_rows(drawn, rng, train_fraction)
        train.append(offset + drawn[fitted])
        test.append(offset + drawn[~fitted])
    return np.concatenate(train), np.concatenate(test)


def layer_separability(
    XA: np.ndarray,
    XB: np.ndarray,
    train_fraction: float = 0.7,
    seed: int = 0,
    classifier: str = "perceptron",
    progress: bool = True,
    resample: bool = False,
) -> np.ndarray:
    """Test accuracy of a linear classifier telling the ensembles XA `(n_a, T, f)` from XB `(n_b, T, f)` at
    every layer: `(T,)`.

    The rows of `split_rows` (the sample's split, or with `resample` a bootstrap draw of each class and its
    split), the same at every layer; features standardized on the training part; `classifier` is
    "perceptron" (the paper's, seeded with `seed`) or "logistic" (logistic regression, C = 1), refitted at
    every layer. 0.5 on balanced classes means inseparable, 1.0 linearly separable on unseen samples."""
    from sklearn.linear_model import LogisticRegression, Perceptron

    if classifier not in CLASSIFIERS:
        raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {classifier!r}")
    train, test = split_rows(len(XA), len(XB), train_fraction, seed, resample)
    labels = np.repeat([0, 1], [len(XA), len(XB)])
    T = XA.shape[1]
    accuracy = np.empty(T)
    # layers standardized at once, at most about STANDARDIZED_AT_ONCE float64 features
    step = max(1, STANDARDIZED_AT_ONCE // ((len(XA) + len(XB)) * XA.shape[2]))
    bar = tqdm(total=T, desc="separability", unit="layer", disable=not progress)
    for first in range(0, T, step):
        layers = slice(first, first + step)
        both = np.concatenate([XA[:, layers], XB[:, layers]]).astype(np.float64)
        features = standardized(both, train)  # (n_a + n_b, layers, f)
        for j in range(features.shape[1]):
            model = (
                Perceptron(random_state=seed)
                if classifier == "perceptron"
                else LogisticRegression(C=1.0, max_iter=2000)
            )
            model.fit(features[train, j], labels[train])
            accuracy[first + j] = model.score(features[test, j], labels[test])
            bar.update()
    bar.close()
    return accuracy


STANDARDIZED_AT_ONCE = 2**22


def standardized(features: np.ndarray, train: np.ndarray) -> np.ndarray:
    """`features` `(n, ..., f)` (float64) standardized in place, every slice of the middle axes at once, by the
    mean and standard deviation over its rows `train` (indices into the first axis): what sklearn's
    `StandardScaler` fitted on `features[train]` of each slice computes (the corrected two-pass variance,
    divided by the count; a column it finds constant is scaled by 1) and applies. Returns `features`."""
    rows = features[train]
    n = len(rows)
    mean = rows.sum(0) / n
    rows -= mean
    correction = rows.sum(0)
    rows **= 2
    var = (rows.sum(0) - correction**2 / n) / n
    eps = np.finfo(np.float64).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    features -= mean
    features /= np.where(constant, 1.0, np.sqrt(var))
    return features


@dataclass
class Separability:
    """Test accuracy of the classifier at every layer per pair of ensembles, by name: on the sample's own
    splits (`accuracy`, `(n_splits, T)`) and on the bootstrap repetitions (`resampled`, `(n_boot, T)`: each
    draws the pseudo-sentences of each class with replacement, splits them and refits, `split_rows`; pairs of
    the same sizes share the draw of each repetition), with the number of pseudo-sentences of each pair
    (`n`)."""

    accuracy: dict[str, np.ndarray]
    resampled: dict[str, np.ndarray]
    n: dict[str, int]

    def table(self) -> pd.DataFrame:
        """One row per pair, split of the sample and layer."""
        return pd.DataFrame(
            [
                {"layer t": t, "test accuracy": a, "pilots": name, "split": i}
                for name, acc in self.accuracy.items()
                for i, row in enumerate(acc)
                for t, a in enumerate(row)
            ]
        )

    def estimate(self, statistic: Callable[..., np.ndarray], *names: str) -> Estimate:
        """`statistic` of the accuracies of the pairs `names` (each `(rows, T)` -> `(rows,)`): the mean of its
        values on the sample's splits, and the percentile interval of its values on the bootstrap repetitions,
        computed repetition by repetition (the same rows for pairs of the same sizes, independent draws
        otherwise), re-centered on the value (`extrapolation.centered_percentile`): a repetition tests on about
        63% distinct pseudo-sentences, each layer's accuracy is noisier and its minimum over layers lower, so
        the repetitions are shifted as a whole; their spread is kept, their shift is not."""

        value = statistic(*(self.accuracy[name] for name in names)).mean()
        draws = statistic(*(self.resampled[name] for name in names))
        n = min(self.n[name] for name in names)
        return centered_percentile(np.r_[value, draws], n, unit="pseudo-sentences")

    def min_over_blocks(self) -> dict[str, Estimate]:
        """The minimum over the block outputs t = 1..L per pair (`estimate`)."""
        return {name: self.estimate(_lowest_block, name) for name in self.accuracy}

    def gap(self, first: str, second: str) -> Estimate:
        """The minimum over blocks t = 1..L of pair `first` minus that of pair `second`, split by split and
        repetition by repetition (`estimate`)."""
        return self.estimate(
            lambda a, b: _lowest_block(a) - _lowest_block(b), first, second
        )

    def at_embedding(self, name: str) -> Estimate:
        """The accuracy at t = 0 (the input embedding) (`estimate`)."""
        return self.estimate(lambda a: a[:, 0], name)


def _lowest_block(accuracy: np.ndarray) -> np.ndarray:
    """The minimum over the block outputs t = 1..L of accuracies `(rows, T)`: `(rows,)`."""
    return accuracy[:, 1:].min(1)


def separability_by_split(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]],
    splits,
    train_fraction: float = 0.7,
    classifier: str = "perceptron",
    n_boot: int = 0,
    seed: int = 0,
    progress: bool = True,
) -> Separability:
    """`layer_separability` of each pair of ensembles `(n_a, T, D)`, `(n_b, T, D)` for each split seed in
    `splits` (the sample's own splits) and on `n_boot` bootstrap repetitions (repetition r: seed + r, each
    class resampled, split and refitted; pairs of the same sizes get the same rows). A pair's fits are kept
    by the pair's contents (`cached_result`): a pair seen before, in this call or an earlier one (the
    untrained model's in a model book and its null book), is read back."""
    jobs = [(s, False) for s in splits] + [(seed + r, True) for r in range(n_boot)]
    bar = tqdm(
        total=len(pairs) * len(jobs),
        desc="separability (splits, then bootstrap repetitions)",
        unit="fit",
        disable=not progress,
    )
    steps = resumable("separability")  # fits kept for a resumed run
    rows = {}
    for p, (name, (A, B)) in enumerate(pairs.items()):
        step = _counted(steps, p * len(jobs), bar)
        rows[name] = cached_result(
            "separability",
            {
                "A": A,
                "B": B,
                "jobs": jobs,
                "train_fraction": train_fraction,
                "classifier": classifier,
            },
            partial(_pair_fits, A, B, jobs, train_fraction, classifier, step),
        )
        bar.update((p + 1) * len(jobs) - bar.n)  # a pair read back counts whole
    bar.close()
    return Separability(
        {name: acc[: len(splits)] for name, acc in rows.items()},
        {name: acc[len(splits) :] for name, acc in rows.items()},
        {name: len(A) + len(B) for name, (A, B) in pairs.items()},
    )


# one classifier fit: a `layer_separability` call, `(T,)`
Fit = Callable[[], np.ndarray]


def _pair_fits(
    A: np.ndarray,
    B: np.ndarray,
    jobs: list[tuple[int, bool]],
    train_fraction: float,
    classifier: str,
    step: Callable[[int, Fit], np.ndarray],
) -> np.ndarray:
    """`layer_separability` of A `(n_a, T, D)` against B `(n_b, T, D)` for each job (split seed, resample),
    job i run as `step(i, fit)`: `(len(jobs), T)`."""
    out = np.empty((len(jobs), A.shape[1]))
    for i, (s, resample) in enumerate(jobs):
        fit = partial(
            layer_separability, A, B, train_fraction, s, classifier, False, resample
        )
        out[i] = step(i, fit)
    return out


def _counted(steps: Steps, first: int, bar) -> Callable[[int, Fit], np.ndarray]:
    """`steps` from step `first` on (a pair's place in its loop, whether or not the pairs before it were read
    back), each finished step counted on `bar`."""

    def step(i: int, compute: Fit) -> np.ndarray:
        value = steps(first + i, compute)
        bar.update()
        return value

    return step


def language_and_gibberish(lm, n_k: int, n_s, seed: int = 0):
    """Walden's first `n_s` pseudo-sentences of `n_k` tokens (`pilot_count` rules, parameter "n_s_gibberish") and
    as many pseudo-sentences of tokens drawn uniformly from the model's vocabulary (seeded, the same prefix):
    two `Corpus`."""

    language = walden(
        lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, lm.view.d_model, "n_s_gibberish")
    )
    vocab = min(len(lm.tokenizer), lm.view.vocab_size)
    noise = gibberish(
        vocab, n_s=language.n_s, n_k=n_k, seed=seed, prefix=language.prefix_ids
    )
    return language, noise


# ----------------------------------------------------------------------------------------------
# the shape of paths


def relative_steps(X: np.ndarray) -> np.ndarray:
    """Step length relative to the state, `||x(t+1) - x(t)||` / `||x(t)||`, `(N, T-1)` (index t: step t -> t+1)."""
    X = X.astype(np.float64)
    return np.linalg.norm(np.diff(X, axis=1), axis=-1) / np.linalg.norm(
        X[:, :-1], axis=-1
    )


def step_cosines(X: np.ndarray) -> np.ndarray:
    """Cosine between consecutive steps, cos(x(t+1) - x(t), x(t) - x(t-1)), `(N, T-2)` (index t-1 for layer t).
    1 for a straight path, about 0 for a random walk in high dimension."""
    steps = np.diff(X.astype(np.float64), axis=1)
    unit = steps / np.linalg.norm(steps, axis=-1, keepdims=True)
    return np.einsum("ntd,ntd->nt", unit[:, 1:], unit[:, :-1])


def straightness(X: np.ndarray) -> np.ndarray:
    """End-to-end distance over path length, `||x(T-1) - x(0)||` / sum_t `||x(t+1) - x(t)||`, per path `(N,)`:
    1 for a straight path, about 1/sqrt(T-1) for a random walk of T-1 independent steps."""
    X = X.astype(np.float64)
    return np.linalg.norm(X[:, -1] - X[:, 0], axis=-1) / np.linalg.norm(
        np.diff(X, axis=1), axis=-1
    ).sum(1)


def step_coherence(
    X: np.ndarray, weights: np.ndarray | None = None, chunk: int = 128
) -> np.ndarray:
    """How parallel the pilots' steps are at each layer: norm of the mean unit step over pilots, `(T-1,)`.
    1 when every pilot steps in the same direction, about 1/sqrt(N) for independent random directions.

    With `weights` `(B, N)` (rows of `resampling_weights`), the weighted mean for each row: `(B, T-1)`.
    """
    steps = np.diff(X.astype(np.float32), axis=1)
    unit = (steps / np.linalg.norm(steps, axis=-1, keepdims=True)).reshape(len(X), -1)
    rows = np.ones((1, len(X))) if weights is None else weights
    means = np.concatenate(
        [
            (rows[i : i + chunk].astype(np.float32) @ unit) / len(X)
            for i in range(0, len(rows), chunk)
        ]
    )
    coherence = np.linalg.norm(
        means.reshape(len(rows), X.shape[1] - 1, -1), axis=-1
    ).astype(np.float64)
    return coherence[0] if weights is None else coherence


@dataclass
class PathShapes:
    """Straightness of every path over t = 1..L in the full space (`straight`, `(N,)` per model), the drawn
    pilots on u1..u3 of the last layer (`views`, `(n_pilots, L, 3)`) and their straightness there
    (`straight_3d`, `(n_pilots,)`), and the coherence of the steps 1 -> 2, ..., L-1 -> L on every row of the
    bootstrap weights (`coherence`, `(1 + n_boot, L-1)`), with their `Estimate` values over pilots."""

    straight: dict[str, np.ndarray]
    views: dict[str, np.ndarray]
    straight_3d: dict[str, np.ndarray]
    coherence: dict[str, np.ndarray]
    straightness: dict[str, Estimate]
    step_coherence: dict[str, Estimate]


def step_table(models: dict[str, np.ndarray]) -> pd.DataFrame:
    """Every pilot's relative step t -> t+1 (t >= 1) and cosine of consecutive steps at t (t >= 2), per model:
    long rows (`t`, `relative step` or `cos`, `model`)."""
    frames = []
    for name, X in models.items():
        steps, cosines = relative_steps(X)[:, 1:], step_cosines(X)[:, 1:]
        L, N = X.shape[1] - 1, len(X)
        frames.append(
            pd.DataFrame(
                {
                    "t": np.tile(np.arange(1, L), N),
                    "relative step": steps.ravel(),
                    "model": name,
                }
            )
        )
        frames.append(
            pd.DataFrame(
                {
                    "t": np.tile(np.arange(2, L), N),
                    "cos": cosines.ravel(),
                    "model": name,
                }
            )
        )
    return pd.concat(frames)


def last_layer_view(X: np.ndarray, pilots: np.ndarray) -> np.ndarray:
    """The states t = 1..L of the `pilots` (indices) on u1..u3 of the ensemble's last layer (uncentered SVD of
    all pilots): X `(N, L+1, D)` -> `(n_pilots, L, 3)`."""
    U, _ = ensemble_svd(X[:, -1:, :])
    return X[pilots][:, 1:].astype(np.float64) @ U[0][:, :3]


def path_shapes(
    models: dict[str, np.ndarray], pilots: np.ndarray, weights: np.ndarray
) -> PathShapes:
    """`PathShapes` of each model's trajectories `(N, L+1, D)` with the `pilots` drawn (indices), bootstrapped
    with `weights` `(1 + n_boot, N)`; each model's once per content (`_shape_once`)."""
    N = len(weights[0])
    measured = {name: _shape_once(X, pilots, weights) for name, X in models.items()}

    def each(measure: str) -> dict[str, np.ndarray]:
        return {name: m[measure] for name, m in measured.items()}

    straight, coherence = each("straight"), each("coherence")
    return PathShapes(
        straight,
        each("view"),
        each("straight_3d"),
        coherence,
        {
            name: resampled_estimate(weights @ s / N, N, unit="pilots")
            for name, s in straight.items()
        },
        {
            name: resampled_estimate(c.mean(1), N, unit="pilots")
            for name, c in coherence.items()
        },
    )


def _shape_once(
    X: np.ndarray, pilots: np.ndarray, weights: np.ndarray
) -> dict[str, np.ndarray]:
    """Of trajectories X `(N, L+1, D)`: the straightness over t = 1..L (`straight`, `(N,)`), the `pilots` on
    u1..u3 of the last layer (`view`, `(n_pilots, L, 3)`) and their straightness (`straight_3d`), and the
    coherence of the steps 1 -> 2.. on every row of `weights` (`coherence`, `(B, L-1)`); read back when
    computed before from the same contents (one model in both columns of a null book)."""

    def compute() -> dict[str, np.ndarray]:
        view = last_layer_view(X, pilots)
        return {
            "straight": straightness(X[:, 1:]),
            "view": view,
            "straight_3d": straightness(view),
            "coherence": step_coherence(X, weights)[:, 1:],
        }

    return cached_result(
        "path-shapes", {"X": X, "pilots": pilots, "weights": weights}, compute
    )


# ----------------------------------------------------------------------------------------------
# B4's noise law on every resample, its bases refitted (C4)

REFITTED = "residuals (bases refitted per resample)"


def refitted_pairs(
    X: np.ndarray,
    weights: np.ndarray,
    progress: bool = True,
    device: Device = "cpu",
    steps: Steps | None = None,
) -> dict[str, np.ndarray]:
    """Chapter B4's residual moments of trajectories X `(N, L+1, D)` for every pair 1 <= t < t + tau <= L on each
    row of `weights` `(B, N)` (how many times each pilot is drawn; row 0 all ones: the sample), each row
    refitting every fitted step on its own draw: the uncentered SVD per layer of the drawn pilots with their
    repeats (`authors_protocol.weighted_bases`, k = min(distinct pilots, D)) and their alignment, on the
    block outputs x(1)..x(L) (the pairs' layers: the same pairs of columns as aligned from layer 0), then Eq. 1
    and the moments over the drawn pilots, each distinct one weighted by its count (`pair_statistics`). Returns `trace` (tr Cov w) and `kurtosis`
    (the coordinates' bias-corrected excess kurtosis weighted by their variance, as `residuals.resampled_pairs`) `(B, T, T)`
    indexed [t, t + tau], `spread` (tr Cov x(t)) `(B, T)` and `k` `(B,)`. Bases and moments run on `device`;
    each resample is a step of `steps` (default: this process's next resumable loop)."""

    blocks = X[:, 1:]  # the pairs' layers; x(0) repeats tokens (a rank-deficient layer)

    def moments(w: np.ndarray) -> dict[str, np.ndarray | int]:
        drawn = np.flatnonzero(w)
        counts = w[drawn].astype(int)
        layers_first = np.ascontiguousarray(
            blocks[drawn].transpose(1, 0, 2), np.float32
        )
        U, S = align_bases(*weighted_bases(layers_first, counts, device))
        Y = singular_coordinates(blocks[drawn], U, device)
        share = counts / counts.sum()  # each drawn pilot's weight in the draw
        centered = X[drawn].astype(np.float64)
        centered -= np.einsum("n,ntd->td", share, centered)
        stats = pair_statistics(Y, S, np.arange(len(U)), counts=counts, device=device)
        var = np.pad(stats.var, ((1, 0), (1, 0), (0, 0)), constant_values=np.nan)
        kurtosis = np.pad(
            unbiased_excess_kurtosis(stats.kurtosis, counts.sum()),
            ((1, 0), (1, 0), (0, 0)),
            constant_values=np.nan,
        )
        return {
            "trace": var.sum(-1),
            "kurtosis": (var * kurtosis).sum(-1) / var.sum(-1),
            "spread": np.einsum("n,ntd,ntd->t", share, centered, centered),
            "k": U.shape[-1],
        }

    steps = resumable(REFITTED) if steps is None else steps  # kept for a resumed run
    rows = [
        steps(i, partial(moments, w))
        for i, w in enumerate(
            tqdm(weights, desc=REFITTED, unit="resample", disable=not progress)
        )
    ]
    return {name: np.array([row[name] for row in rows]) for name in rows[0]}


def residual_law(
    X: np.ndarray, weights: np.ndarray, n_boot_refit: int = 0, device: Device = "cpu"
) -> dict:
    """Chapter B4's residual statistics of trajectories X `(N, L+1, D)` over all pairs 1 <= t < t + tau <= L on
    the sample and the first `n_boot_refit` resamples of `weights` `(1 + n_boot, N)`, each refitting the bases
    (`refitted_pairs`): ln(mean variance) and ln(relative variance) of the sample `(T, T)`, the fit of Eq. 2 to
    the first (`fit_variance`, a point value), the arrival R^2 of the relative variance on every row
    `(1 + n_boot_refit,)` and as an `Estimate`, and the variance-weighted excess kurtosis (median over pairs).
    The refits run on `device`, once per content of X, weights and device (`_refitted_once`)."""

    N, T = weights.shape[1], X.shape[1]
    all_pairs = pair_mask(T, 1, T - 1)
    rows = _refitted_once(X, weights[: 1 + n_boot_refit], device)
    log_var = np.log(rows["trace"][0] / rows["k"][0])
    log_rel = np.log(rows["trace"] / rows["spread"][:, None, :])
    arrival = fit_laws(log_rel, all_pairs)["arrival_r2"]
    return {
        "log_var": log_var,
        "log_rel": log_rel[0],
        "fit": fit_variance(log_var, all_pairs),
        "arrival_r2_rows": arrival,
        "kurtosis": resampled_estimate(
            np.median(rows["kurtosis"][:, all_pairs], axis=1), N, unit="pilots"
        ),
        "relative_arrival_r2": resampled_estimate(arrival, N, unit="pilots"),
    }


def _refitted_once(
    X: np.ndarray, weights: np.ndarray, device: Device
) -> dict[str, np.ndarray]:
    """`refitted_pairs` of X `(N, L+1, D)` on `weights` `(B, N)`, read back when computed before from the same
    contents on the same device (the untrained model's in a model book and its null book). Its resumable loop
    is taken whether or not the result is read back, so that every later loop keeps its rank."""
    steps = resumable(REFITTED)
    return cached_result(
        "refitted-pairs",
        {"X": X, "weights": weights, "device": str(device)},
        partial(refitted_pairs, X, weights, device=device, steps=steps),
    )


def arrival_r2_gap(first: dict, second: dict) -> Estimate:
    """The relative variance's arrival R^2 of `residual_law` `first` minus `second`'s, row by row of their
    bootstrap weights (the same resamples when both were given the same weights; independent ones otherwise)."""
    n = min(first["relative_arrival_r2"].n, second["relative_arrival_r2"].n)
    return resampled_estimate(
        first["arrival_r2_rows"] - second["arrival_r2_rows"], n, unit="pilots"
    )


def compare_noise_laws(
    models: dict[str, np.ndarray],
    weights: np.ndarray,
    n_boot_refit: int,
    device: Device = "cpu",
) -> tuple[dict[str, dict], Estimate]:
    """`residual_law` of each model's trajectories `(N, L+1, D)` on the same `weights` and the same first
    `n_boot_refit` resamples. Returns the dict per model and the arrival R^2 of the first model minus the
    second's (`arrival_r2_gap`: the same resamples, so the difference is paired when the models read the same
    pilots). The refits run on `device`."""
    law = {
        name: residual_law(X, weights, n_boot_refit, device)
        for name, X in models.items()
    }
    first, second = (law[name] for name in list(models)[:2])
    return law, arrival_r2_gap(first, second)
