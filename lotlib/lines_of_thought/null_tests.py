"""Null tests and cross-model diagnostics of Lines of Thought (appendix): is language separable from
gibberish, do paths stall in re-initialised blocks, does the last layer break the noise law?

Trajectories are `(N, L+1, D)` as everywhere in lotlib: x(0) the input of block 0, x(t) block t's
output, the final norm never applied. The noise law follows chapter B4's conventions: uncentered
per-layer SVD (`lotlib.lines_of_thought.ensemble.ensemble_svd`), bases aligned from layer 0 (`align_bases`), residual
coordinates of Eq. 1 in the aligned arrival basis (`lotlib.residuals`), natural log of the mean
variance over coordinates.
"""
from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from .residuals import PairStatistics, coordinate_moments, pair_statistics, residual_coordinates, singular_coordinates
from .ensemble import align_bases, ensemble_svd
from ..models.view import ModelView

CLASSIFIERS = ("perceptron", "logistic")


def separability(A: np.ndarray, B: np.ndarray, train_fraction: float = 0.7, seed: int = 0,
                 classifier: str = "perceptron") -> float:
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
    train_x, test_x, train_y, test_y = train_test_split(features, labels, train_size=train_fraction,
                                                        stratify=labels, random_state=seed)
    model = (Perceptron(random_state=seed) if classifier == "perceptron"
             else LogisticRegression(C=1.0, max_iter=2000))
    return float(make_pipeline(StandardScaler(), model).fit(train_x, train_y).score(test_x, test_y))


def layer_separability(XA: np.ndarray, XB: np.ndarray, train_fraction: float = 0.7, seed: int = 0,
                       classifier: str = "perceptron", progress: bool = True) -> np.ndarray:
    """`separability` of two ensembles of trajectories `(n_a, T, D)`, `(n_b, T, D)` at every layer: `(T,)`.
    The same split at every layer."""
    return np.array([separability(XA[:, t], XB[:, t], train_fraction, seed, classifier)
                     for t in tqdm(range(XA.shape[1]), desc="separability", unit="layer", disable=not progress)])


def relative_steps(X: np.ndarray) -> np.ndarray:
    """Step length relative to the state, ||x(t+1) - x(t)|| / ||x(t)||, `(N, T-1)` (index t: step t -> t+1)."""
    X = X.astype(np.float64)
    return np.linalg.norm(np.diff(X, axis=1), axis=-1) / np.linalg.norm(X[:, :-1], axis=-1)


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
    return np.linalg.norm(X[:, -1] - X[:, 0], axis=-1) / np.linalg.norm(np.diff(X, axis=1), axis=-1).sum(1)


def step_coherence(X: np.ndarray) -> np.ndarray:
    """How parallel the pilots' steps are at each layer: norm of the mean unit step over pilots, `(T-1,)`.
    1 when every pilot steps in the same direction, about 1/sqrt(N) for independent random directions."""
    steps = np.diff(X.astype(np.float64), axis=1)
    return np.linalg.norm((steps / np.linalg.norm(steps, axis=-1, keepdims=True)).mean(0), axis=-1)


def stalling(X: np.ndarray, split: int, first: int = 1) -> dict:
    """Do paths stall after layer `split`? Steps x(t) -> x(t+1) with first <= t < split are "before", with
    t >= split "after" (cosines: both steps on the same side). Returns the median relative step length before
    and after and their ratio (`step_ratio`, 1 = no change, near 0 = stalled), and the mean cosine between
    consecutive steps before and after."""
    steps, cosines = relative_steps(X), step_cosines(X)  # cosines[:, t - 1] pairs steps t-1 and t
    before, after = np.median(steps[:, first:split]), np.median(steps[:, split:])
    return {"step_before": float(before), "step_after": float(after), "step_ratio": float(after / before),
            "cos_before": float(cosines[:, first:split - 1].mean()), "cos_after": float(cosines[:, split:].mean())}


def residual_statistics(X: np.ndarray, U: np.ndarray, S: np.ndarray, progress: bool = True) -> PairStatistics:
    """Chapter B4's residual statistics for every pair 1 <= t < t + tau <= L. X `(N, L+1, D)`; U `(L+1, D, k)`,
    S `(L+1, k)` from `ensemble_svd` (sorted, not aligned: aligned here from layer 0, as in B4)."""
    U, S = align_bases(U, S)
    return pair_statistics(singular_coordinates(X, U), S, np.arange(1, X.shape[1]), progress=progress)


def arrival_spread(log_var: np.ndarray, mask: np.ndarray) -> float:
    """Mean over arrival layers of the standard deviation of `log_var` `(T, T)` (indexed `[t, t + tau]`) across
    departure layers t, for the pairs in `mask` (arrivals with at least two departures). 0 when the variance is a
    function of t + tau alone."""
    spreads = [np.std(log_var[mask[:, s], s]) for s in range(mask.shape[1]) if mask[:, s].sum() >= 2]
    return float(np.mean(spreads))


def arrival_log_variance(X: np.ndarray, U: np.ndarray, S: np.ndarray, arrival: int = -1) -> np.ndarray:
    """ln(mean variance) of the Eq. 1 residual coordinates of the pairs (t, arrival), t = 1..arrival-1: `(arrival-1,)`.

    Same conventions as `residual_statistics` (bases U, S from `ensemble_svd`, aligned here from layer 0), for
    one arrival layer only: the cheap way to re-examine the last layer after changing its states.
    """
    arrival %= X.shape[1]
    U, S = align_bases(U[:arrival + 1], S[:arrival + 1])
    Y = singular_coordinates(X[:, :arrival + 1], U)
    t = np.arange(1, arrival)
    return np.log(coordinate_moments(residual_coordinates(Y, S, t, arrival - t))[1].mean(-1))


def law_ratio(log_var: np.ndarray, fit: dict, arrival: int) -> float:
    """Observed over predicted residual variance at `arrival`: the geometric mean over departures of
    exp(log_var) / (alpha exp(lambda arrival)), with `fit` from `lotlib.residuals.fit_variance`. 1 when the
    arrival layer follows the fitted law."""
    return float(np.exp(np.mean(log_var) - np.log(fit["alpha"]) - fit["lambda"] * arrival))


@torch.inference_mode()
def last_layer_normalized(view: ModelView, X: np.ndarray, U: np.ndarray, S: np.ndarray, batch_size: int = 4096):
    """X, U, S with the last layer's states replaced by final_norm(x(L)) and its basis recomputed: the
    trajectory as `output_hidden_states` reports it in Hugging Face models (the last one after the final norm).
    X `(N, L+1, D)`, U `(L+1, D, k)`, S `(L+1, k)` from `ensemble_svd`; returns copies."""
    X, U, S = X.copy(), U.copy(), S.copy()
    for start in range(0, len(X), batch_size):
        X[start:start + batch_size, -1] = view.final_norm(torch.as_tensor(X[start:start + batch_size, -1])).cpu().numpy()
    U[-1:], S[-1:] = ensemble_svd(X[:, -1:])
    return X, U, S


@torch.inference_mode()
def next_token_nll(view: ModelView, x: np.ndarray, next_ids: np.ndarray, batch_size: int = 64) -> np.ndarray:
    """-log p(next_ids) from last-layer states before the final norm, `(n, D)` -> `(n,)` nats. Batched: the
    logits of a 262k-token vocabulary are `batch_size` x V floats at a time."""
    from .truncation import next_token_logprobs

    out = np.empty(len(x))
    for start in range(0, len(x), batch_size):
        logp = next_token_logprobs(view, torch.as_tensor(x[start:start + batch_size], dtype=torch.float32))
        ids = torch.as_tensor(np.asarray(next_ids[start:start + batch_size], dtype=np.int64), device=logp.device)
        out[start:start + len(logp)] = -logp.gather(1, ids[:, None])[:, 0].cpu().numpy()
    return out
