"""Null-test building blocks: path shapes (steps, cosines, straightness), separability of two ensembles and
its resampled split, and the gibberish ensemble beside language."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..models.bounds import pilot_count
from ..models.corpus import gibberish, walden
from ..stats import (
    Estimate,
    exact,
    training_rows,
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


# ----------------------------------------------------------------------------------------------
# bootstrap over pilots, all resamples at once


# ----------------------------------------------------------------------------------------------
# the noise law, pilot by pilot


# ----------------------------------------------------------------------------------------------
# the last layer as Hugging Face reports it, and how well it predicts


# ----------------------------------------------------------------------------------------------
# the chapter's null tests (C4): language vs gibberish, an untrained model, re-initialised blocks


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


# the suffix of the summary keys measured on the paper's architecture, and the paper's excess kurtosis of an
# untrained GPT-2 medium's residuals ("about 1-1.5")


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
