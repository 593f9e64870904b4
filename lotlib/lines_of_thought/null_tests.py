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
interval away from the value; the spread of the resamples is unaffected. The singular bases are computed
once on all pilots and are not resampled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from ..intervals import LEVEL, Estimate
from ..models.view import ModelView
from .ensemble import align_bases, ensemble_svd, gaussian_cloud
from .residuals import fit_laws, pair_mask, residual_coordinates, singular_coordinates

CLASSIFIERS = ("perceptron", "logistic")


# ----------------------------------------------------------------------------------------------
# language vs gibberish


def separability(
    A: np.ndarray,
    B: np.ndarray,
    train_fraction: float = 0.7,
    seed: int = 0,
    classifier: str = "perceptron",
) -> float:
    """Test accuracy of a linear classifier telling samples A `(n_a, f)` from B `(n_b, f)`.

    One seeded, stratified split (`train_fraction` to train, the rest to test); features standardized on
    the training part; `classifier` is "perceptron" (the paper's) or "logistic" (logistic regression,
    C = 1). 0.5 on balanced classes means inseparable, 1.0 linearly separable on unseen samples.
    """
    from sklearn.linear_model import LogisticRegression, Perceptron
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if classifier not in CLASSIFIERS:
        raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {classifier!r}")
    features = np.concatenate([A, B]).astype(np.float64)
    labels = np.repeat([0, 1], [len(A), len(B)])
    train_x, test_x, train_y, test_y = train_test_split(
        features, labels, train_size=train_fraction, stratify=labels, random_state=seed
    )
    model = (
        Perceptron(random_state=seed)
        if classifier == "perceptron"
        else LogisticRegression(C=1.0, max_iter=2000)
    )
    return float(
        make_pipeline(StandardScaler(), model)
        .fit(train_x, train_y)
        .score(test_x, test_y)
    )


def layer_separability(
    XA: np.ndarray,
    XB: np.ndarray,
    train_fraction: float = 0.7,
    seed: int = 0,
    classifier: str = "perceptron",
    progress: bool = True,
) -> np.ndarray:
    """`separability` of two ensembles of trajectories `(n_a, T, D)`, `(n_b, T, D)` at every layer: `(T,)`.
    The same split at every layer."""
    return np.array(
        [
            separability(XA[:, t], XB[:, t], train_fraction, seed, classifier)
            for t in tqdm(
                range(XA.shape[1]),
                desc="separability",
                unit="layer",
                disable=not progress,
            )
        ]
    )


# ----------------------------------------------------------------------------------------------
# the shape of paths


def relative_steps(X: np.ndarray) -> np.ndarray:
    """Step length relative to the state, ||x(t+1) - x(t)|| / ||x(t)||, `(N, T-1)` (index t: step t -> t+1)."""
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
    """End-to-end distance over path length, ||x(T-1) - x(0)|| / sum_t ||x(t+1) - x(t)||, per path `(N,)`:
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


def resampling_weights(n: int, n_boot: int, seed: int = 0) -> np.ndarray:
    """`(1 + n_boot, n)`: row 0 all ones (the sample itself), then how many times each of the `n` units is
    drawn in each bootstrap resample (the same resamples as `lotlib.intervals.bootstrap` for `seed`). A
    statistic written with weighted means over units is evaluated on every row at once."""
    rng = np.random.default_rng(seed)
    draws = [
        np.bincount(rng.integers(0, n, size=n), minlength=n) for _ in range(n_boot)
    ]
    return np.vstack([np.ones(n), *draws]).astype(np.float64)


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

    `energy` `(N, T, T)`: ||w_n(t, s) - mean w(t, s)||^2, each pilot's squared distance from the mean residual
    of Eq. 1 for the pair (t, s = t + tau), NaN outside first <= t < s <= L; `spread` `(N, T)`:
    ||x_n(t) - mean x(t)||^2; `k`: the number of residual coordinates. The means over pilots are tr Cov w and
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
    view: ModelView, X: np.ndarray, U: np.ndarray, S: np.ndarray, batch_size: int = 4096
):
    """X, U, S with the last layer's states replaced by final_norm(x(L)) and its basis recomputed: the
    trajectory as `output_hidden_states` reports it in Hugging Face models (the last one after the final norm).
    X `(N, L+1, D)`, U `(L+1, D, k)`, S `(L+1, k)` from `ensemble_svd`; returns copies."""
    X, U, S = X.copy(), U.copy(), S.copy()
    for start in range(0, len(X), batch_size):
        rows = torch.as_tensor(X[start : start + batch_size, -1], device=view.device)
        X[start : start + batch_size, -1] = view.final_norm(rows).cpu().numpy()
    U[-1:], S[-1:] = ensemble_svd(X[:, -1:])
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
