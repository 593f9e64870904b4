"""Null tests and cross-model diagnostics of Lines of Thought (appendix): is language separable from
gibberish, do paths of an untrained model run straight, do paths stall in re-initialised blocks, does the
last layer break the noise law?

Trajectories are `(N, L+1, D)` as everywhere in lotlib: x(0) the input of block 0, x(t) block t's
output, the final norm never applied. The noise law follows chapter B4's conventions: uncentered
per-layer SVD (`lotlib.lines_of_thought.ensemble.ensemble_svd`), bases aligned from layer 0
(`align_bases`), residual coordinates of Eq. 1 in the aligned arrival basis (`lotlib.lines_of_thought.residuals`),
natural log of the mean variance over coordinates.

Intervals. The pilots are the unit of sampling. Statistics that are means over pilots (or smooth
functions of such means) are evaluated on every bootstrap resample at once: `resampling_weights` gives
how often each pilot is drawn in each resample (row 0: the sample itself), a weighted mean per row is
one matrix product, and `resampled_estimate` turns the values of all rows into an `Estimate` with a
normal interval from the bootstrap standard error. Several of these statistics sit on a noise floor that
a resample raises (the norm of a mean, a mean absolute kurtosis, a maximum), which shifts a percentile
interval away from the value; the spread of the resamples is unaffected. Statistics read in singular bases
fitted on the pilots refit them on every resample (`refitted_pairs`, chapter C4's untrained-model residuals);
chapter C5's `noise_law` (`pilot_residuals`) still holds the bases of all pilots fixed.

The separability of two ensembles (language vs gibberish) is a classifier fitted on a split of the sample:
each bootstrap repetition draws the pseudo-sentences of each class with replacement, splits the distinct
ones into training and test, and refits (`split_rows`, `separability_by_split`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..intervals import LEVEL, Estimate, resampling_weights, side_word
from ..models.view import ModelView
from ..storage.checkpoints import resumable
from .ensemble import align_bases, ensemble_svd, gaussian_cloud
from .residuals import (
    fit_laws,
    pair_mask,
    residual_coordinates,
    singular_coordinates,
)

CLASSIFIERS = ("perceptron", "logistic")


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
        ids = rng.permutation(np.unique(drawn))
        n_train = min(max(round(train_fraction * len(ids)), 1), len(ids) - 1)
        fitted = np.isin(drawn, ids[:n_train])
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
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if classifier not in CLASSIFIERS:
        raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {classifier!r}")
    train, test = split_rows(len(XA), len(XB), train_fraction, seed, resample)
    labels = np.repeat([0, 1], [len(XA), len(XB)])
    accuracy = np.empty(XA.shape[1])
    for t in tqdm(
        range(XA.shape[1]), desc="separability", unit="layer", disable=not progress
    ):
        features = np.concatenate([XA[:, t], XB[:, t]]).astype(np.float64)
        model = (
            Perceptron(random_state=seed)
            if classifier == "perceptron"
            else LogisticRegression(C=1.0, max_iter=2000)
        )
        accuracy[t] = (
            make_pipeline(StandardScaler(), model)
            .fit(features[train], labels[train])
            .score(features[test], labels[test])
        )
    return accuracy


def separability(
    A: np.ndarray,
    B: np.ndarray,
    train_fraction: float = 0.7,
    seed: int = 0,
    classifier: str = "perceptron",
    resample: bool = False,
) -> float:
    """`layer_separability` of two samples A `(n_a, f)` and B `(n_b, f)`: the test accuracy of one split."""
    return float(
        layer_separability(
            A[:, None], B[:, None], train_fraction, seed, classifier, False, resample
        )[0]
    )


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


def stalling(X: np.ndarray, split: int, first: int = 1) -> dict:
    """Do paths stall after layer `split`? Steps x(t) -> x(t+1) with first <= t < split are "before", with
    t >= split "after" (cosines: both steps on the same side). Returns the median relative step length before
    and after and their ratio (`step_ratio`, 1 = no change, near 0 = stalled), and the mean cosine between
    consecutive steps before and after (NaN for a side with a single step)."""
    steps, cosines = (
        relative_steps(X),
        step_cosines(X),
    )  # cosines[:, t - 1] pairs steps t-1 and t
    before, after = np.median(steps[:, first:split]), np.median(steps[:, split:])
    cos_before, cos_after = (
        cosines[:, first : split - 1],
        cosines[:, split:],
    )  # empty when a side has one step
    return {
        "step_before": float(before),
        "step_after": float(after),
        "step_ratio": float(after / before),
        "cos_before": float(cos_before.mean()) if cos_before.size else np.nan,
        "cos_after": float(cos_after.mean()) if cos_after.size else np.nan,
    }


# ----------------------------------------------------------------------------------------------
# bootstrap over pilots, all resamples at once


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


# ----------------------------------------------------------------------------------------------
# the noise law, pilot by pilot


@dataclass(frozen=True)
class PilotResiduals:
    """The noise law's total variances pilot by pilot, so that a resample of the pilots costs one weighted mean.

    `energy` `(N, T, T)`: `||w_n(t, s) - mean w(t, s)||`^2, each pilot's squared distance from the mean residual
    of Eq. 1 for the pair (t, s = t + tau), NaN outside first <= t < s <= L; `spread` `(N, T)`:
    `||x_n(t) - mean x(t)||`^2; `k`: the number of residual coordinates. The means over pilots are tr Cov w and
    tr Cov x(t) of `lotlib.lines_of_thought.residuals.resampled_pairs`, which also resamples every coordinate's
    moments (kurtosis, offsets) at about k times the cost.
    """

    energy: np.ndarray
    spread: np.ndarray
    k: int

    def means(self, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Weighted means over pilots of `energy` and `spread`: `(B, T, T)` and `(B, T)` for `weights` `(B, N)`
        (`resampling_weights`), `(T, T)` and `(T,)` without. Deviations are taken from the whole sample's
        means: exact for the sample; on a resample they leave out its own shift of the mean, which lowers
        every variance by a factor of about 1 - 1/N alike."""
        N, T = self.spread.shape
        rows = np.ones((1, N)) if weights is None else weights
        energy = (rows @ np.nan_to_num(self.energy.reshape(N, -1))) / N
        energy[:, np.isnan(self.energy[0].ravel())] = np.nan
        spread = rows @ self.spread / N
        energy = energy.reshape(len(rows), T, T)
        return (energy[0], spread[0]) if weights is None else (energy, spread)

    def log_mean_var(self, weights: np.ndarray | None = None) -> np.ndarray:
        """ln(mean variance over coordinates) of every pair, indexed `[..., t, s]`: chapter B4's quantity."""
        energy, _ = self.means(weights)
        return np.log(energy / self.k)

    def log_relative_var(self, weights: np.ndarray | None = None) -> np.ndarray:
        """ln(tr Cov w(t, s) / tr Cov x(s)), `[..., t, s]`: the residual variance relative to the spread of the
        states it should predict, the norm growth of the ensemble divided out (ln 2 for a map that knows
        nothing)."""
        energy, spread = self.means(weights)
        return np.log(energy / spread[..., None, :])


def pilot_residuals(
    X: np.ndarray, U: np.ndarray, S: np.ndarray, first: int = 1, progress: bool = True
) -> PilotResiduals:
    """`PilotResiduals` of trajectories X `(N, L+1, D)` for every pair first <= t < t + tau <= L, with U
    `(L+1, D, k)`, S `(L+1, k)` from `ensemble_svd` (sorted, not aligned: aligned here from layer 0, as in
    B4)."""
    U, S = align_bases(U, S)
    Y = singular_coordinates(X, U)
    N, T, k = Y.shape
    energy = np.full((N, T, T), np.nan)
    for tau in tqdm(
        range(1, T - first), desc="pilot residuals", unit="tau", disable=not progress
    ):
        t = np.arange(first, T - tau)
        W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
        energy[:, t, t + tau] = ((W - W.mean(0)) ** 2).sum(-1)
    Xc = X.astype(np.float64) - X.mean(0, dtype=np.float64)
    return PilotResiduals(energy, np.einsum("ntd,ntd->nt", Xc, Xc), k)


def loo_log_ratios(log_var: np.ndarray, first: int = 1) -> np.ndarray:
    """Leave-one-layer-out check of the noise law ln var = ln alpha + lambda (t + tau), for every arrival layer.

    For each s = first+1..L the law is refitted (`residuals.fit_laws`) on the pairs first <= t < t + tau <= L
    that do not touch layer s (neither as departure nor as arrival), and r(s) is the mean over departures t of
    ln var(t, s) minus the refitted law's prediction at s: how far layer s is off a law that never saw it
    (0 = on the law). log_var `(..., T, T)` indexed `[t, t + tau]` -> `(..., T)`, NaN for s <= first.
    """
    T = log_var.shape[-1]
    pairs = pair_mask(T, first, T - 1)
    out = np.full(log_var.shape[:-2] + (T,), np.nan)
    for s in range(first + 1, T):
        without = pairs.copy()
        without[s, :] = without[:, s] = False
        law = fit_laws(log_var, without)
        out[..., s] = (
            np.nanmean(log_var[..., first:s, s], axis=-1)
            - np.log(law["alpha"])
            - law["lambda"] * s
        )
    return out


def last_layer_excess(log_ratios: np.ndarray, compared_from: int) -> np.ndarray:
    """abs(r(L)) - max abs(r(s)) over compared_from <= s < L, from `loo_log_ratios` `(..., T)`: `(...)`, in ln units.
    Positive when the last layer is further off the law than every compared layer."""
    others = np.abs(log_ratios[..., compared_from:-1])
    return np.abs(log_ratios[..., -1]) - np.nanmax(others, axis=-1)


def structureless_cloud(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """Gaussian points with the trajectories' per-layer mean and per-coordinate variance, independent across
    layers and pilots: the same norm growth and nothing else. X `(N, T, D)` -> `(N, T, D)` float32, seeded."""
    return np.stack(
        [gaussian_cloud(X[:, t], seed=seed + t) for t in range(X.shape[1])], axis=1
    ).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# the last layer as Hugging Face reports it, and how well it predicts


@torch.inference_mode()
def last_layer_normalized(
    view: ModelView,
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    batch_size: int = 4096,
    fitted: np.ndarray | None = None,
):
    """X, U, S with the last layer's states replaced by final_norm(x(L)) and its basis recomputed (on the
    pilots `fitted`, default all): the trajectory as `output_hidden_states` reports it in Hugging Face models
    (the last one after the final norm). X `(N, L+1, D)`, U `(L+1, D, k)`, S `(L+1, k)` from `ensemble_svd`;
    returns copies."""
    X, U, S = X.copy(), U.copy(), S.copy()
    for start in range(0, len(X), batch_size):
        rows = torch.as_tensor(X[start : start + batch_size, -1], device=view.device)
        X[start : start + batch_size, -1] = view.final_norm(rows).cpu().numpy()
    last = X[:, -1:] if fitted is None else X[fitted, -1:]
    U[-1:], S[-1:] = ensemble_svd(last)
    return X, U, S


@torch.inference_mode()
def next_token_nll(
    view: ModelView, x: np.ndarray, next_ids: np.ndarray, batch_size: int = 64
) -> np.ndarray:
    """-log p(next_ids) from last-layer states before the final norm, `(n, D)` -> `(n,)` nats. Batched: the
    logits of a 262k-token vocabulary are `batch_size` x V floats at a time."""
    from .truncation import next_token_logprobs

    out = np.empty(len(x))
    for start in range(0, len(x), batch_size):
        rows = torch.as_tensor(
            x[start : start + batch_size], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        ids = torch.as_tensor(
            np.asarray(next_ids[start : start + batch_size], dtype=np.int64),
            device=logp.device,
        )
        out[start : start + len(logp)] = (
            -logp.gather(1, ids[:, None])[:, 0].cpu().numpy()
        )
    return out


# ----------------------------------------------------------------------------------------------
# the chapter's null tests (C4): language vs gibberish, an untrained model, re-initialised blocks


def language_and_gibberish(lm, n_k: int, n_s, seed: int = 0):
    """Walden's first `n_s` pseudo-sentences of `n_k` tokens (`pilot_count` rules, parameter "n_s_gibberish") and
    as many pseudo-sentences of tokens drawn uniformly from the model's vocabulary (seeded, the same prefix):
    two `Corpus`."""
    from ..models.bounds import pilot_count
    from ..models.corpus import gibberish, walden

    language = walden(
        lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, lm.view.d_model, "n_s_gibberish")
    )
    vocab = min(len(lm.tokenizer), lm.view.vocab_size)
    noise = gibberish(
        vocab, n_s=language.n_s, n_k=n_k, seed=seed, prefix=language.prefix_ids
    )
    return language, noise


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
        from .extrapolation import centered_percentile

        value = statistic(*(self.accuracy[name] for name in names)).mean()
        draws = statistic(*(self.resampled[name] for name in names))
        n = min(self.n[name] for name in names)
        return centered_percentile(np.r_[value, draws], n, unit="pseudo-sentences")

    def min_over_blocks(self) -> dict[str, Estimate]:
        """The minimum over the block outputs t = 1..L per pair (`estimate`)."""
        return {name: self.estimate(_lowest_block, name) for name in self.accuracy}

    def summary(self) -> dict:
        """Under the chapter's summary keys, for the pairs in the order finding, control, untrained model: the
        minimum over blocks of each, the untrained model's minus the finding's (`gap`), the finding's accuracy at
        the embedding and its mean accuracy by layer over the sample's splits."""
        finding, _, untrained = self.accuracy
        keys = (
            "separability_min",
            "separability_control_min",
            "untrained_separability_min",
        )
        return {
            **dict(zip(keys, self.min_over_blocks().values())),
            "untrained_separability_gap": self.gap(untrained, finding),
            "separability_embedding": self.at_embedding(finding),
            "separability_by_layer": self.accuracy[finding].mean(0),
        }

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


def gibberish_pairs(
    lm, untrained, language, noise, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The ensembles `(n, L+1, D)` of the separability test, by name: Walden vs gibberish through `lm`, two seeded
    random halves of Walden (the control) and Walden vs gibberish through the `untrained` model."""
    from ..models.trajectories import trajectories

    X_lang = trajectories(lm, language)
    order, half = (
        np.random.default_rng(seed).permutation(language.n_s),
        language.n_s // 2,
    )
    return {
        "Walden vs gibberish": (X_lang, trajectories(lm, noise)),
        "Walden vs Walden (two halves)": (
            X_lang[order[:half]],
            X_lang[order[half : 2 * half]],
        ),
        "untrained model: Walden vs gibberish": (
            trajectories(untrained, language),
            trajectories(untrained, noise),
        ),
    }


def drawn_pilots(n: int, n_pilots: int, seed: int = 0) -> np.ndarray:
    """At most `n_pilots` of `n` pilots drawn without replacement (seeded), sorted."""
    return np.sort(
        np.random.default_rng(seed).choice(n, size=min(n_pilots, n), replace=False)
    )


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
    class resampled, split and refitted; pairs of the same sizes get the same rows)."""
    jobs = [(s, False) for s in splits] + [(seed + r, True) for r in range(n_boot)]
    bar = tqdm(
        total=len(pairs) * len(jobs),
        desc="separability (splits, then bootstrap repetitions)",
        unit="fit",
        disable=not progress,
    )
    rows, steps, step = (
        {},
        resumable("separability"),
        itertools.count(),
    )  # fits kept for a resumed run
    for name, (A, B) in pairs.items():
        rows[name] = np.empty((len(jobs), A.shape[1]))
        for i, (s, resample) in enumerate(jobs):
            rows[name][i] = steps(
                next(step),
                partial(
                    layer_separability,
                    A,
                    B,
                    train_fraction,
                    s,
                    classifier,
                    False,
                    resample,
                ),
            )
            bar.update()
    bar.close()
    return Separability(
        {name: acc[: len(splits)] for name, acc in rows.items()},
        {name: acc[len(splits) :] for name, acc in rows.items()},
        {name: len(A) + len(B) for name, (A, B) in pairs.items()},
    )


def last_layer_view(X: np.ndarray, pilots: np.ndarray) -> np.ndarray:
    """The states t = 1..L of the `pilots` (indices) on u1..u3 of the ensemble's last layer (uncentered SVD of
    all pilots): X `(N, L+1, D)` -> `(n_pilots, L, 3)`."""
    U, _ = ensemble_svd(X[:, -1:, :])
    return X[pilots][:, 1:].astype(np.float64) @ U[0][:, :3]


@dataclass
class PathShapes:
    """Straightness of every path over t = 1..L in the full space (`straight`, `(N,)` per model) and on u1..u3 of
    the last layer (`straight_3d`, `(n_pilots,)`), and the coherence of the steps 1 -> 2, ..., L-1 -> L on every
    row of the bootstrap weights (`coherence`, `(1 + n_boot, L-1)`), with their `Estimate` values over pilots."""

    straight: dict[str, np.ndarray]
    straight_3d: dict[str, np.ndarray]
    coherence: dict[str, np.ndarray]
    straightness: dict[str, Estimate]
    step_coherence: dict[str, Estimate]

    def summary(self) -> dict:
        """Under the chapter's summary keys: per model its straightness (full space, and mean on u1..u3) and step
        coherence, and the levels of a random walk and of independent directions."""
        from ..intervals import exact

        N, steps = (
            len(next(iter(self.straight.values()))),
            next(iter(self.coherence.values())).shape[1],
        )
        return {
            **{f"{name}_straightness": v for name, v in self.straightness.items()},
            **{
                f"{name}_straightness_3d": float(np.mean(v))
                for name, v in self.straight_3d.items()
            },
            **{f"{name}_step_coherence": v for name, v in self.step_coherence.items()},
            "straightness_random_walk": exact(1 / np.sqrt(steps)),
            "coherence_independent": exact(1 / np.sqrt(N)),
        }


def path_shapes(
    models: dict[str, np.ndarray], pilots: np.ndarray, weights: np.ndarray
) -> PathShapes:
    """`PathShapes` of each model's trajectories `(N, L+1, D)`, bootstrapped with `weights` `(1 + n_boot, N)`."""
    N = len(weights[0])
    straight = {name: straightness(X[:, 1:]) for name, X in models.items()}
    coherence = {name: step_coherence(X, weights)[:, 1:] for name, X in models.items()}
    return PathShapes(
        straight,
        {name: straightness(last_layer_view(X, pilots)) for name, X in models.items()},
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


def refitted_pairs(
    X: np.ndarray, weights: np.ndarray, progress: bool = True
) -> dict[str, np.ndarray]:
    """Chapter B4's residual moments of trajectories X `(N, L+1, D)` for every pair 1 <= t < t + tau <= L on each
    row of `weights` `(B, N)` (how many times each pilot is drawn; row 0 all ones: the sample), each row
    refitting every fitted step on its own draw: the uncentered SVD per layer of the drawn pilots with their
    repeats (`authors_protocol.weighted_bases`, k = min(distinct pilots, D)) and their alignment, on the
    block outputs x(1)..x(L) (the pairs' layers: the same pairs of columns as aligned from layer 0), then Eq. 1
    and the moments over the drawn pilots, each distinct one weighted by its count (`pair_statistics`). Returns `trace` (tr Cov w) and `kurtosis`
    (the coordinates' bias-corrected excess kurtosis weighted by their variance, as `residuals.resampled_pairs`) `(B, T, T)`
    indexed [t, t + tau], `spread` (tr Cov x(t)) `(B, T)` and `k` `(B,)`."""
    from .authors_protocol import weighted_bases
    from .residuals import pair_statistics, unbiased_excess_kurtosis

    blocks = X[:, 1:]  # the pairs' layers; x(0) repeats tokens (a rank-deficient layer)

    def moments(w: np.ndarray) -> dict[str, np.ndarray | int]:
        drawn = np.flatnonzero(w)
        counts = w[drawn].astype(int)
        layers_first = np.ascontiguousarray(
            blocks[drawn].transpose(1, 0, 2), np.float32
        )
        U, S = align_bases(
            *weighted_bases(torch.from_numpy(layers_first), torch.from_numpy(counts))
        )
        Y = singular_coordinates(blocks[drawn], U)
        share = counts / counts.sum()  # each drawn pilot's weight in the draw
        centered = X[drawn].astype(np.float64)
        centered -= np.einsum("n,ntd->td", share, centered)
        stats = pair_statistics(Y, S, np.arange(len(U)), counts=counts)
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

    desc = "residuals (bases refitted per resample)"
    steps = resumable(desc)  # each resample kept for a resumed run
    rows = [
        steps(i, partial(moments, w))
        for i, w in enumerate(
            tqdm(weights, desc=desc, unit="resample", disable=not progress)
        )
    ]
    return {name: np.array([row[name] for row in rows]) for name in rows[0]}


def residual_law(X: np.ndarray, weights: np.ndarray, n_boot_refit: int = 0) -> dict:
    """Chapter B4's residual statistics of trajectories X `(N, L+1, D)` over all pairs 1 <= t < t + tau <= L on
    the sample and the first `n_boot_refit` resamples of `weights` `(1 + n_boot, N)`, each refitting the bases
    (`refitted_pairs`): ln(mean variance) and ln(relative variance) of the sample `(T, T)`, the fit of Eq. 2 to
    the first (`fit_variance`, a point value), the arrival R^2 of the relative variance on every row
    `(1 + n_boot_refit,)` and as an `Estimate`, and the variance-weighted excess kurtosis (median over pairs)."""
    from .residuals import fit_variance

    N, T = weights.shape[1], X.shape[1]
    all_pairs = pair_mask(T, 1, T - 1)
    rows = refitted_pairs(X, weights[: 1 + n_boot_refit])
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


def arrival_r2_gap(first: dict, second: dict) -> Estimate:
    """The relative variance's arrival R^2 of `residual_law` `first` minus `second`'s, row by row of their
    bootstrap weights (the same resamples when both were given the same weights; independent ones otherwise)."""
    n = min(first["relative_arrival_r2"].n, second["relative_arrival_r2"].n)
    return resampled_estimate(
        first["arrival_r2_rows"] - second["arrival_r2_rows"], n, unit="pilots"
    )


def compare_noise_laws(
    models: dict[str, np.ndarray], weights: np.ndarray, n_boot_refit: int
) -> tuple[dict[str, dict], Estimate]:
    """`residual_law` of each model's trajectories `(N, L+1, D)` on the same `weights` and the same first
    `n_boot_refit` resamples. Returns the dict per model and the arrival R^2 of the first model minus the
    second's (`arrival_r2_gap`: the same resamples, so the difference is paired when the models read the same
    pilots)."""
    law = {name: residual_law(X, weights, n_boot_refit) for name, X in models.items()}
    first, second = (law[name] for name in list(models)[:2])
    return law, arrival_r2_gap(first, second)


def noise_law_summary(law: dict[str, dict]) -> dict:
    """`compare_noise_laws`'s per-model dict under the chapter's summary keys: kurtosis, the fit's alpha, lambda and
    arrival R^2, and the relative variance's arrival R^2, each prefixed by the model's name."""
    return {
        **{f"{name}_kurtosis": entry["kurtosis"] for name, entry in law.items()},
        **{
            f"{name}_{key}": entry["fit"][key]
            for name, entry in law.items()
            for key in ("alpha", "lambda", "arrival_r2")
        },
        **{
            f"{name}_relative_arrival_r2": entry["relative_arrival_r2"]
            for name, entry in law.items()
        },
    }


def range_word(estimate: Estimate, lo: float, hi: float) -> str:
    """ "below", "within" or "above" [lo, hi] when the whole interval of `estimate` is, "straddling" otherwise."""
    if estimate.hi < lo:
        return "below"
    if estimate.lo > hi:
        return "above"
    return "within" if lo <= estimate.lo and estimate.hi <= hi else "straddling"


# the suffix of the summary keys measured on the paper's architecture, and the paper's excess kurtosis of an
# untrained GPT-2 medium's residuals ("about 1-1.5")
PAPER_ARCH = "_paper_arch"
PAPER_KURTOSIS = (1.0, 1.5)


@dataclass
class ArchitectureNull:
    """The untrained-model null controls measured on the untrained model of another architecture (the paper's
    GPT-2 medium) on Walden cut by its own tokenizer: its `name`, shape and number of pilots `n_s`, the drawn
    pilots on u1..u3 of its last layer (`view`, `(n_pilots, L, 3)`), `PathShapes`, `residual_law` and the book's
    trained model's relative arrival R^2 minus this model's (`arrival_r2_gap`). Fields are None when skipped."""

    name: str
    n_layers: int | None = None
    d_model: int | None = None
    n_s: int | None = None
    view: np.ndarray | None = None
    shapes: PathShapes | None = None
    law: dict | None = None
    arrival_r2_gap: Estimate | None = None

    KEYS = (
        "n_layers",
        "d_model",
        "n_s",
        "untrained_straightness",
        "untrained_straightness_3d",
        "untrained_step_coherence",
        "straightness_random_walk",
        "coherence_independent",
        "untrained_kurtosis",
        "untrained_alpha",
        "untrained_lambda",
        "untrained_arrival_r2",
        "untrained_relative_arrival_r2",
        "untrained_arrival_r2_gap",
    )

    def summary(self, skipped: object = None) -> dict:
        """The values under the chapter's keys of the book's untrained model plus `PAPER_ARCH`; `skipped` for
        each when skipped."""
        if self.law is None:
            return {f"{key}{PAPER_ARCH}": skipped for key in self.KEYS}
        values = {
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_s": self.n_s,
            **self.shapes.summary(),
            **noise_law_summary({"untrained": self.law}),
            "untrained_arrival_r2_gap": self.arrival_r2_gap,
        }
        return {f"{key}{PAPER_ARCH}": values[key] for key in self.KEYS}

    def words(self, skipped: str = "not measured") -> dict[str, str]:
        """Words for the prose, from the run: the straightness against a random walk's, the step coherence against
        independent directions', the kurtosis against the paper's `PAPER_KURTOSIS`, and whether the arrival layer
        explains "less", "about as much" or "more" of the relative variance than in the book's trained model;
        `skipped` for each when skipped."""
        keys = ("straight", "parallel", "kurtosis", "arrival")
        if self.law is None:
            return {f"paper_{key}_word": skipped for key in keys}
        s = {key.removesuffix(PAPER_ARCH): v for key, v in self.summary().items()}
        words = (
            side_word(
                s["untrained_straightness"], than=s["straightness_random_walk"].value
            ),
            side_word(
                s["untrained_step_coherence"], than=s["coherence_independent"].value
            ),
            range_word(s["untrained_kurtosis"], *PAPER_KURTOSIS),
            side_word(s["untrained_arrival_r2_gap"], ("more", "about as much", "less")),
        )
        return {f"paper_{key}_word": word for key, word in zip(keys, words)}

    def views(self, seed: int) -> dict[str, np.ndarray]:
        """{title: view} for `figures`-style side-by-side paths; empty when skipped."""
        if self.view is None:
            return {}
        title = f"untrained {self.name} (seed {seed}), L = {self.n_layers}, D = {self.d_model}"
        return {title: self.view}


def architecture_null(
    architecture: str,
    trained_law: dict,
    n_k: int,
    n_s,
    n_pilots: int,
    n_boot: int,
    seed: int = 0,
    device: str = "auto",
    dtype: str = "float32",
) -> ArchitectureNull:
    """The untrained-model null controls on `untrained:<architecture>` (seeded with `seed`; "" skips): the first
    `n_s` pseudo-sentences of `n_k` tokens of Walden in its own tokenizer (`pilot_count` rules on its width),
    `n_pilots` drawn pilots, path shapes bootstrapped over its pilots (`n_boot` resamples, seeded `seed`) and
    `residual_law` on as many of those resamples as `trained_law` has (the book's trained model's, its resamples
    seeded `seed`), each refitting the bases, and the arrival R^2 gap of `trained_law` minus this model's: the
    same resamples when both have as many pilots, independent ones otherwise."""
    from ..models.bounds import pilot_count
    from ..models.corpus import walden
    from ..models.loading import load_model
    from ..models.trajectories import trajectories

    if not architecture:
        return ArchitectureNull(name="")
    lm = load_model(architecture, untrained=True, seed=seed, device=device, dtype=dtype)
    L, D = lm.view.n_layers, lm.view.d_model
    corpus = walden(lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, D, "n_s_paper"))
    X = trajectories(lm, corpus)  # (N, L+1, D)
    del lm
    n_refit = len(trained_law["arrival_r2_rows"]) - 1
    pilots = drawn_pilots(len(X), n_pilots, seed)
    weights = resampling_weights(len(X), max(n_boot, n_refit), seed)
    law = residual_law(X, weights, n_refit)
    return ArchitectureNull(
        name=architecture,
        n_layers=L,
        d_model=D,
        n_s=len(X),
        view=last_layer_view(X, pilots),
        shapes=path_shapes({"untrained": X}, pilots, weights[: 1 + n_boot]),
        law=law,
        arrival_r2_gap=arrival_r2_gap(trained_law, law),
    )


def reinitialised_trajectories(
    model: str,
    corpus,
    first_block: int,
    seeds,
    device: str = "auto",
    dtype: str = "float32",
) -> dict[int, np.ndarray]:
    """Trajectories `(N, L+1, D)` of `corpus` through `model` with blocks `first_block`.. drawn afresh, per seed."""
    from ..models.loading import load_model
    from ..models.trajectories import trajectories

    out = {}
    for s in seeds:
        reinit = load_model(
            model, reinit_from=first_block, seed=s, device=device, dtype=dtype
        )
        out[s] = trajectories(reinit, corpus)
        del reinit
    return out


def stalling_table(models: dict[str, np.ndarray], split: int) -> pd.DataFrame:
    """`stalling` of each model's trajectories after layer `split`, one row per model."""
    return pd.DataFrame({name: stalling(X, split) for name, X in models.items()}).T


def reinit_stalling(
    stall: pd.DataFrame,
    reference: str = "trained",
    reinit_from_row: int = 2,
    skipped: object = None,
) -> dict[str, Estimate | object]:
    """From `stalling_table` whose rows `reinit_from_row`.. are re-initialisation seeds: their median relative step
    after the split over the `reference` model's (`reinit_step_ratio`) and their mean cosine of consecutive steps
    after it (`reinit_cos_after`), mean and t-interval over seeds. Without such rows (an untrained model has
    nothing to re-initialise) both are `skipped`."""
    from ..intervals import over_seeds

    reinit, unit = stall.iloc[reinit_from_row:], "re-initialisation seeds"
    if reinit.empty:
        return dict.fromkeys(("reinit_step_ratio", "reinit_cos_after"), skipped)
    return {
        "reinit_step_ratio": over_seeds(
            reinit["step_after"] / stall.loc[reference, "step_after"], unit=unit
        ),
        "reinit_cos_after": over_seeds(reinit["cos_after"], unit=unit),
    }


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


# ----------------------------------------------------------------------------------------------
# other models and the last-layer anomaly (C5): every model measured the same way


def noise_law(
    X: np.ndarray, U: np.ndarray, S: np.ndarray, weights: np.ndarray
) -> dict[str, np.ndarray]:
    """The noise law of trajectories X `(N, L+1, D)` (U, S from `ensemble_svd`) on every row of `weights`
    `(1 + n_boot, N)`: ln(mean variance) and ln(relative variance) of the sample `(T, T)`, the leave-one-out ratios
    of both `(1 + n_boot, T)` (`loo_log_ratios`), lambda of the law on all pairs and the mean ln relative variance
    over pairs `(1 + n_boot,)`."""
    residuals = pilot_residuals(X, U, S, progress=False)
    log_var, log_rel = (
        residuals.log_mean_var(weights),
        residuals.log_relative_var(weights),
    )
    all_pairs = pair_mask(X.shape[1], 1, X.shape[1] - 1)
    return {
        "log_var": log_var[0],
        "log_rel": log_rel[0],
        "loo": loo_log_ratios(log_var),
        "loo_relative": loo_log_ratios(log_rel),
        "lambda": fit_laws(log_var, all_pairs)["lambda"],
        "log_alpha_relative": np.nanmean(log_rel, axis=(1, 2)),
    }


def spectrum_decay(sigma: np.ndarray) -> dict:
    """sigma_1 / sigma_2 and the least-squares slope of ln sigma_i against ln i for i = 10..k/2 (None with fewer
    than two such i) of the singular values `(k,)` of one layer, sorted."""
    k = len(sigma)
    index = np.arange(1, k + 1)
    fitted = (index >= 10) & (index <= k // 2)
    slope = (
        np.polyfit(np.log(index[fitted]), np.log(sigma[fitted]), 1)[0]
        if fitted.sum() >= 2
        else None
    )
    return {"sigma1_over_sigma2": sigma[0] / sigma[1], "spectrum_slope": slope}


def truncation_summary(
    view: ModelView,
    x: np.ndarray,
    basis: np.ndarray,
    ks,
    top: int,
    n_boot: int,
    seed: int = 0,
) -> tuple[dict, pd.DataFrame]:
    """The truncated next-token distribution at the last layer (`truncation.truncation_scores`) of the states x
    `(n, D)` on the basis `(D, k)`, over K in `ks` (None: powers of two below D) plus 1, D/4 and min(D, k): the mean
    KL at K = 1 and D/4 with bootstrap intervals over pilots, their ratio and the top-`top` overlap at D/4 (None
    where D/4 >= k: nothing is truncated), and the curve of the mean KL against K/D."""
    from .truncation import truncation_scores

    D, k = basis.shape
    grid = sorted(
        {K for K in (ks or [2**j for j in range(int(np.log2(D)) + 1)]) if K <= k}
        | {1, D // 4, min(D, k)}
    )
    batch = max(1, 2**24 // view.vocab_size)  # about 16 million logits at a time
    scores = truncation_scores(
        view, x, basis, grid, top=top, batch_size=batch, progress=False
    )
    n = scores.kl.shape[1]
    kl_weights = resampling_weights(n, n_boot, seed)
    kl_1, kl_quarter = (kl_weights @ scores.kl[grid.index(K)] / n for K in (1, D // 4))
    usable = D // 4 < k
    quarter = lambda values: (
        resampled_estimate(values, n, unit="pilots") if usable else None
    )
    row = {
        "kl_at_1": resampled_estimate(kl_1, n, unit="pilots"),
        "kl_at_quarter": quarter(kl_quarter),
        "kl_ratio_quarter": quarter(kl_quarter / kl_1),
        f"top{top}_overlap_quarter": float(scores.overlap[grid.index(D // 4)].mean())
        if usable
        else None,
    }
    curve = pd.DataFrame(
        {"K / D": np.array(grid) / D, "mean KL (nats)": scores.kl.mean(1)}
    )
    return row, curve


def last_layer_summary(law: dict, normalized: dict, L: int, N: int) -> dict:
    """From `noise_law` of the trajectories (`law`) and of the same with the final norm on x(L) (`normalized`):
    lambda and lambda L, alpha relative to the arrival spread, the arrival R^2, r(L) and the last layer's excess
    over the layers L/2..L-1 (`last_layer_excess`) on the three readings, with normal bootstrap intervals over the
    `N` pilots, and the mean `|r|` of the early (s < max(3, L/4)) and late (L/2 <= s < L) layers."""
    from .residuals import fit_variance

    compared = L // 2
    estimate = lambda values: resampled_estimate(values, N, unit="pilots")
    return {
        "lambda": estimate(law["lambda"]),
        "lambda_L": estimate(law["lambda"] * L),
        "alpha_relative": estimate(np.exp(law["log_alpha_relative"])),
        "arrival_r2": fit_variance(law["log_var"], pair_mask(L + 1, 1, L))[
            "arrival_r2"
        ],
        "last_layer_log_ratio": estimate(law["loo"][:, L]),
        "last_layer_excess": estimate(last_layer_excess(law["loo"], compared)),
        "last_layer_excess_relative": estimate(
            last_layer_excess(law["loo_relative"], compared)
        ),
        "last_layer_excess_final_norm": estimate(
            last_layer_excess(normalized["loo"], compared)
        ),
        "early_layers_mean_abs_log_ratio": float(
            np.nanmean(np.abs(law["loo"][0, : max(3, L // 4)]))
        ),
        "late_layers_mean_abs_log_ratio": float(
            np.nanmean(np.abs(law["loo"][0, compared:L]))
        ),
    }


def cloud_summary(cloud: dict, L: int, N: int) -> dict:
    """The structureless cloud's lambda L and last-layer excesses (on ln(mean variance) and relative), from its
    `noise_law`, with normal bootstrap intervals over the `N` pilots."""
    estimate = lambda values: resampled_estimate(values, N, unit="pilots")
    return {
        "lambda_L_cloud": estimate(cloud["lambda"] * L),
        "last_layer_excess_cloud": estimate(last_layer_excess(cloud["loo"], L // 2)),
        "last_layer_excess_relative_cloud": estimate(
            last_layer_excess(cloud["loo_relative"], L // 2)
        ),
    }


def bos_check(lm, n_k: int, n_bos: int) -> dict:
    """Mean next-token NLL of the true next token (the first of the next pseudo-sentence) from x(L) of the first
    `n_bos` pseudo-sentences, without and with the tokenizer's BOS token; {} when it names none or n_bos is 0."""
    from ..models.corpus import walden
    from ..models.trajectories import trajectories

    if not n_bos or lm.tokenizer.bos_token_id is None:
        return {}
    following = walden(lm.tokenizer, n_k=n_k, n_s=n_bos + 1, bos=False).ids[1:, 0]
    last = lambda bos: trajectories(
        lm, walden(lm.tokenizer, n_k=n_k, n_s=n_bos, bos=bos), progress=False
    )[:, -1]
    return {
        "bos_token": lm.tokenizer.bos_token,
        "nll_no_bos": next_token_nll(lm.view, last(False), following).mean(),
        "nll_bos": next_token_nll(lm.view, last(True), following).mean(),
    }


@dataclass
class ModelMeasures:
    """One model measured as chapter C5 does: `row` (the summary numbers, by key), the noise laws (`law`, with the
    final norm `normalized`, and the structureless `cloud` or None), the last layer's singular values over the
    first `spectrum` `(k,)`, the truncation `curve` and the separability by layer `separable` `(T,)`."""

    row: dict
    law: dict
    normalized: dict
    cloud: dict | None
    spectrum: np.ndarray
    curve: pd.DataFrame
    separable: np.ndarray

    @property
    def L(self) -> int:
        return self.row["n_layers"]


def measure_model(
    name: str,
    *,
    n_k: int = 50,
    n_s=None,
    n_kl: int = 300,
    ks=None,
    top: int = 5,
    n_k_gibberish: int = 10,
    n_s_gibberish=2000,
    classifier: str = "perceptron",
    train_fraction: float = 0.7,
    n_bos: int = 200,
    n_boot: int = 1000,
    seed: int = 0,
    cloud: bool = False,
    device: str = "auto",
    dtype: str = "float32",
) -> ModelMeasures:
    """Load `name` and measure it: trajectories of Walden (`n_s` pseudo-sentences of `n_k` tokens), the last layer's
    spectrum (`spectrum_decay`), the truncation on `n_kl` pilots (`truncation_summary`), the noise law with its
    bootstrap and with the final norm (`last_layer_summary`), the structureless cloud if `cloud`, the
    separability of Walden and gibberish (one split, `layer_separability`) and the BOS check (`bos_check`).
    Out of sample: every basis is fitted on a seeded half of the pilots (`residuals.split_for_bases`, at least
    D of them), and the truncation and the noise laws are scored and bootstrapped on the other half."""
    from ..models.bounds import pilot_count
    from ..models.corpus import walden
    from ..models.loading import load_model
    from ..models.trajectories import trajectories
    from .residuals import split_for_bases

    lm = load_model(name, device=device, dtype=dtype)
    view = lm.view
    L, D = view.n_layers, view.d_model
    corpus = walden(lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, D, "n_s", model=name))
    # checked before any forward pass
    held, fitted = split_for_bases(len(corpus.ids), D, 0.5, seed, name)
    X = trajectories(lm, corpus)
    N = len(held)
    U, S = ensemble_svd(X[fitted])  # U (L+1, D, k), S (L+1, k), by decreasing sigma
    weights = resampling_weights(N, n_boot, seed)
    row = {
        "n_layers": L,
        "d_model": D,
        "n_s": len(X),
        "n_scored": N,
        "vocabulary": view.vocab_size,
        **spectrum_decay(S[L]),
    }
    truncated, curve = truncation_summary(
        view, X[held[:n_kl], L], U[L], ks, top, n_boot, seed
    )
    Xn, Un, Sn = last_layer_normalized(view, X, U, S, fitted=fitted)
    law, normalized = (
        noise_law(X[held], U, S, weights),
        noise_law(Xn[held], Un, Sn, weights),
    )
    row |= truncated | last_layer_summary(law, normalized, L, N)
    structureless = None
    if cloud:
        cloud_X = structureless_cloud(X, seed)
        structureless = noise_law(
            cloud_X[held], *ensemble_svd(cloud_X[fitted]), weights
        )
        row |= cloud_summary(structureless, L, N)
    language, noise = language_and_gibberish(lm, n_k_gibberish, n_s_gibberish, seed)
    separable = layer_separability(
        trajectories(lm, language),
        trajectories(lm, noise),
        train_fraction,
        seed,
        classifier,
        progress=False,
    )
    row |= {"separability_min": separable[1:].min(), **bos_check(lm, n_k, n_bos)}
    return ModelMeasures(
        row, law, normalized, structureless, S[L] / S[L, 0], curve, separable
    )


MEASURE_LABELS = {
    "n_layers": "layers L",
    "d_model": "width D",
    "n_s": "pilots N_s",
    "n_scored": "pilots scored (the others fit the bases)",
    "vocabulary": "vocabulary",
    "sigma1_over_sigma2": "σ1/σ2 at L",
    "spectrum_slope": "log-log slope of σ_i at L",
    "kl_at_1": "mean KL at K = 1 (nats)",
    "kl_at_quarter": "mean KL at K = D/4 (nats)",
    "kl_ratio_quarter": "KL(D/4) / KL(1)",
    "top{top}_overlap_quarter": "top-{top} overlap at D/4",
    "lambda": "λ (per layer)",
    "lambda_L": "λL, total growth (claim)",
    "lambda_L_cloud": "λL, cloud (null)",
    "alpha_relative": "α relative to the arrival spread",
    "arrival_r2": "arrival R² of ln(mean variance)",
    "last_layer_log_ratio": "r(L), last layer off its law (ln)",
    "last_layer_excess": "last-layer excess (claim)",
    "last_layer_excess_relative": "last-layer excess, relative (claim)",
    "last_layer_excess_final_norm": "last-layer excess, final norm (claim)",
    "last_layer_excess_cloud": "last-layer excess, cloud (null)",
    "last_layer_excess_relative_cloud": "last-layer excess, relative, cloud (null)",
    "early_layers_mean_abs_log_ratio": "mean |r| of the early layers",
    "late_layers_mean_abs_log_ratio": "mean |r| of the late layers",
    "separability_min": "separability, min over t ≥ 1",
    "bos_token": "BOS token",
    "nll_no_bos": "next-token NLL without BOS",
    "nll_bos": "next-token NLL with BOS",
}


def measures_table(rows: dict[str, dict], top: int = 5) -> pd.DataFrame:
    """Every model's `row` side by side, labelled (`MEASURE_LABELS`): an Estimate as `value [lo, hi]`, a float to
    4 significant digits, None as a dash."""
    from ..intervals import Estimate

    labels = {
        key.format(top=top): label.format(top=top)
        for key, label in MEASURE_LABELS.items()
    }

    def cell(value) -> str:
        if isinstance(value, Estimate):
            return format(value, ".3g")
        if value is None:
            return "—"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    table = pd.DataFrame(
        {
            name: {labels[k]: cell(v) for k, v in row.items()}
            for name, row in rows.items()
        }
    )
    return table.reindex([label for label in labels.values() if label in table.index])
