"""How many singular directions the next-token distribution needs: KL(p_K || p) after truncating states.

Two protocols (the paper leaves the choice open):

- `truncation_scores` (`truncated_kl`): project the last layer's state x(L), before the final norm, onto the
  top-K singular directions of the ensemble at L, then final norm + unembedding.
- `propagated_truncation` (`propagated_truncated_kl`): project the pilot's state onto the top-K directions of
  U(t) after **every** block t = 1..L and let the remaining blocks run on the truncated state (earlier
  positions untouched).

Both score each pilot twice: KL(p_K || p) in nats, and how many of the `top` most likely next tokens of p_K
are among those of p (the authors' downstream reading, top-5 at K = D/4 against K = D). Everything runs on
the model's device; the scores come back as numpy arrays on the CPU.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..models.loading import Model
from ..models.view import ModelView


@dataclass(frozen=True)
class Truncation:
    """Per-pilot scores of truncated distributions: `kl` KL(p_K || p) in nats and `overlap`, the number of
    shared tokens among the `top` most likely of p_K and of p, both `(len(ks), n)` for the grid `ks`."""

    ks: list[int]
    kl: np.ndarray
    overlap: np.ndarray
    top: int


@torch.inference_mode()
def next_token_logprobs(view: ModelView, x: Tensor) -> Tensor:
    """log p(next token) from residual states taken before the final norm, read as the model reads its last
    state (`ModelView.logits`): `(n, D)` -> `(n, V)` on the model's device."""
    return view.logits(x).log_softmax(-1)


def kl(logp: Tensor, logq: Tensor) -> Tensor:
    """KL(p || q) in nats, row by row, from log-probabilities `(n, V)`: `(n,)`."""
    return (logp.exp() * (logp - logq)).sum(-1).clamp_min(0.0)


def top_overlap(logp: Tensor, logq: Tensor, top: int = 5) -> Tensor:
    """How many of the `top` most likely tokens of p are among the `top` most likely of q, row by row,
    from log-probabilities `(n, V)`: `(n,)` integers 0..top."""
    a, b = logp.topk(top, dim=-1).indices, logq.topk(top, dim=-1).indices
    return (a[:, :, None] == b[:, None, :]).sum((1, 2))


@torch.inference_mode()
def truncation_scores(
    view: ModelView,
    x: np.ndarray,
    basis: np.ndarray,
    ks: list[int],
    top: int = 5,
    batch_size: int = 256,
    progress: bool = True,
) -> Truncation:
    """KL(p_K || p) and top-`top` overlap for each K in `ks` (last-layer protocol).

    x: last-layer states before the final norm `(n, D)`; basis: `(D, k)` orthonormal columns sorted by
    decreasing singular value. p_K is the distribution of x projected on the first K columns.
    """
    B = torch.as_tensor(basis, dtype=torch.float32, device=view.device)
    divergence, overlap = np.empty((len(ks), len(x))), np.empty((len(ks), len(x)))
    for start in tqdm(
        range(0, len(x), batch_size), desc="truncated KL", disable=not progress
    ):
        rows = torch.as_tensor(
            x[start : start + batch_size], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        coords = rows @ B
        for j, K in enumerate(ks):
            truncated = next_token_logprobs(view, coords[:, :K] @ B[:, :K].T)
            divergence[j, start : start + len(rows)] = kl(truncated, logp).cpu().numpy()
            overlap[j, start : start + len(rows)] = (
                top_overlap(truncated, logp, top).cpu().numpy()
            )
    return Truncation(list(ks), divergence, overlap, top)


def truncated_kl(
    view: ModelView,
    x: np.ndarray,
    basis: np.ndarray,
    ks: list[int],
    batch_size: int = 256,
    progress: bool = True,
) -> np.ndarray:
    """KL(p_K || p) for each K in `ks`, `(len(ks), n)` (the `kl` of `truncation_scores`).

    x: last-layer states before the final norm `(n, D)`; basis: `(D, k)` singular vectors sorted by
    decreasing singular value. p_K is the distribution of x projected on the first K columns.
    """
    return truncation_scores(
        view, x, basis, ks, batch_size=batch_size, progress=progress
    ).kl


@torch.inference_mode()
def consecutive_kl(
    view: ModelView, x: np.ndarray, batch_size: int = 256, progress: bool = True
) -> np.ndarray:
    """KL(p_{i+1} || p_i) between the true distributions of consecutive pseudo-sentences, `(n - 1,)`."""
    out = np.empty(len(x) - 1)
    for start in tqdm(
        range(0, len(x) - 1, batch_size), desc="consecutive KL", disable=not progress
    ):
        rows = torch.as_tensor(
            x[start : start + batch_size + 1], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        out[start : start + len(logp) - 1] = kl(logp[1:], logp[:-1]).cpu().numpy()
    return out


@torch.inference_mode()
def propagated_truncation(
    model: Model,
    ids: np.ndarray,
    bases: np.ndarray,
    ks: list[int],
    top: int = 5,
    batch_size: int = 32,
    progress: bool = True,
) -> Truncation:
    """KL(p_K || p) and top-`top` overlap, `(len(ks), n)`, when the pilot is truncated after every block
    and propagated.

    ids: pseudo-sentences `(n, T)`, the pilot last; bases: `(L+1, D, k)` per-layer singular vectors,
    each sorted by decreasing singular value (`ensemble_svd`, not aligned). The prefix (all tokens but
    the pilot) runs once and is kept as a key-value cache: causal attention makes it independent of
    what happens to the pilot. For each K the pilot then runs alone through the model's own blocks
    (their position embeddings and masks), its output replaced by the projection onto the top-K
    directions of U(t) after each block t = 1..L. p is the same pass without truncation.
    """
    view = model.view
    bases = torch.as_tensor(bases, dtype=torch.float32, device=view.device)
    ids = np.asarray(ids, dtype=np.int64)
    divergence, overlap = np.empty((len(ks), len(ids))), np.empty((len(ks), len(ids)))
    for start in tqdm(
        range(0, len(ids), batch_size),
        desc="propagated truncation",
        disable=not progress,
    ):
        batch = ids[start : start + batch_size]
        prefix = view.prefix_cache(batch[:, :-1])
        pilot = batch[:, -1:]
        logp = next_token_logprobs(
            view, _pilot_last_state(view, pilot, copy.deepcopy(prefix), None)
        )
        for j, K in enumerate(ks):
            truncated = next_token_logprobs(
                view,
                _pilot_last_state(view, pilot, copy.deepcopy(prefix), bases[:, :, :K]),
            )
            divergence[j, start : start + len(batch)] = (
                kl(truncated, logp).cpu().numpy()
            )
            overlap[j, start : start + len(batch)] = (
                top_overlap(truncated, logp, top).cpu().numpy()
            )
    return Truncation(list(ks), divergence, overlap, top)


def propagated_truncated_kl(
    model: Model,
    ids: np.ndarray,
    bases: np.ndarray,
    ks: list[int],
    batch_size: int = 32,
    progress: bool = True,
) -> np.ndarray:
    """KL(p_K || p), `(len(ks), n)`, when the pilot is truncated after every block and propagated (the `kl`
    of `propagated_truncation`, which documents the protocol)."""
    return propagated_truncation(
        model, ids, bases, ks, batch_size=batch_size, progress=progress
    ).kl


def _pilot_last_state(
    view: ModelView, pilot: np.ndarray, cache, bases: Tensor | None
) -> Tensor:
    """The pilot's x(L) `(n, D)` after one cached step; with `bases` `(L+1, D, K)` (float32, on the model's
    device), block t's output is replaced by its projection onto the columns of `bases[t]`, for t = 1..L,
    computed in float32 and handed back in the model's dtype."""
    states = {}

    def visit(t: int, hidden: Tensor) -> Tensor | None:
        if t == 0:
            return None
        if bases is not None:
            hidden = ((hidden.float() @ bases[t]) @ bases[t].T).to(hidden.dtype)
        states[t] = hidden[:, -1]
        return hidden

    with view.trace(visit):
        view.run(pilot, cache=cache)
    return states[view.n_layers]
