"""How many singular directions the next-token distribution needs: KL(p_K || p) after truncating states."""

from __future__ import annotations

import copy
from collections.abc import Iterator
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
    shared tokens among the `top` most likely of p_K and of p (the authors' downstream reading, top-5 at
    K = D/4 against K = D), both `(len(ks), n)` for the grid `ks`, numpy on the CPU."""

    ks: list[int]
    kl: np.ndarray
    overlap: np.ndarray
    top: int
    # with the pilots' true next tokens: -log p_K(next) and whether it is p_K's top token, `(len(ks), n)`,
    # and the same for p itself, `(n,)`
    loss: np.ndarray | None = None
    top1: np.ndarray | None = None
    full_loss: np.ndarray | None = None
    full_top1: np.ndarray | None = None


@torch.inference_mode()
def next_token_logprobs(view: ModelView, x: Tensor) -> Tensor:
    """log p(next token) from residual states taken before the final norm, read as the model reads its last
    state (`ModelView.logits`): `(n, D)` -> `(n, V)` on the model's device."""
    return view.logits(x).log_softmax(-1)


def kl(logp: Tensor, logq: Tensor, work: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """KL(p || q) in nats, row by row, from log-probabilities `(n, V)`: `(n,)`. `work`: two tensors of their
    shape and dtype to compute in, so that a loop over many distributions allocates none (each fresh tensor
    of a vocabulary's width costs the system new pages to fill)."""
    p, terms = work or (torch.empty_like(logp), torch.empty_like(logp))
    torch.exp(logp, out=p)
    torch.sub(logp, logq, out=terms)
    return terms.mul_(p).sum(-1).clamp_min(0.0)


# entries per block of a row in `top_tokens` on the CPU
TOP_BLOCK = 64


def top_tokens(logp: Tensor, top: int = 5) -> Tensor:
    """The `top` most likely tokens of each row of log-probabilities (or logits) `(n, V)`: `(n, top)` ids,
    the most likely first.

    On the CPU the row is read in blocks of `TOP_BLOCK` entries: its `top` largest entries lie in the `top`
    blocks of largest maxima or in the partial block at the end, so `topk` runs on those alone (one pass of
    maxima over the row, where `topk` over the whole row selects among all V). The same tokens as `topk`
    over the whole row but where entries tie at the boundary, in the same order."""
    n, V = logp.shape
    full = V // TOP_BLOCK * TOP_BLOCK
    if logp.device.type != "cpu" or full < 4 * top * TOP_BLOCK:
        return logp.topk(top, dim=-1).indices
    blocks = logp[:, :full].reshape(n, full // TOP_BLOCK, TOP_BLOCK)
    chosen = blocks.amax(-1).topk(top, dim=-1).indices  # (n, top) blocks
    within = torch.arange(TOP_BLOCK, device=logp.device)
    ids = torch.cat(
        [
            (chosen[..., None] * TOP_BLOCK + within).reshape(n, top * TOP_BLOCK),
            torch.arange(full, V, device=logp.device).expand(n, V - full),
        ],
        dim=1,
    )
    return ids.gather(1, logp.gather(1, ids).topk(top, dim=-1).indices)


def shared_tokens(a: Tensor, b: Tensor) -> Tensor:
    """How many of the ids in each row of `a` `(n, top)` are in the same row of `b` `(n, top)`: `(n,)`."""
    return (a[:, :, None] == b[:, None, :]).sum((1, 2))


@dataclass(frozen=True)
class TruncatedReadout:
    """How the model reads a state truncated to the first K columns of a basis, for a whole grid of K at once.

    The final norm is linear up to one scale per state (centering and gamma are linear, and the state is divided
    by its norm after centering), so the unembedding reads the state B_K c_K (c = B^T x) as
    r_K (W gamma P B)[:, :K] c_K + (W beta + b), r_K the norm's scale of P B_K c_K. Each step of an increasing
    grid adds the next columns' terms to the last step's: one (V, D) product per state for the whole grid,
    not one per K. Built once per basis (`of`): `basis` `(D, k)`, `centered` P B `(D, k)`, `reading`
    (W gamma P B)^T `(k, V)`, `offset` W beta + b `(V,)` or None.
    """

    view: ModelView
    basis: Tensor
    centered: Tensor
    reading: Tensor
    offset: Tensor | None

    @classmethod
    @torch.inference_mode()
    def of(cls, view: ModelView, basis: np.ndarray | Tensor) -> TruncatedReadout:
        """The readout of `view` for `basis` `(D, k)` (float32, on the model's device)."""
        B = torch.as_tensor(basis, dtype=torch.float32, device=view.device)
        norm, (W, b) = view.final_norm, view.unembedding()
        centered = norm.center(B.T).T
        reading = centered.T @ (W * norm.gamma.to(W.device, torch.float32)).T
        offset = b
        if norm.beta is not None:
            offset = W @ norm.beta.to(W.device, torch.float32) + (0 if b is None else b)
        return cls(view, B, centered, reading.contiguous(), offset)

    @torch.inference_mode()
    def logprobs(self, rows: Tensor, ks: list[int]) -> Iterator[Tensor]:
        """log p_K of states `rows` `(n, D)` (before the final norm, on the model's device) projected on the
        first K columns of the basis, for each K of the increasing grid `ks` (a K above k keeps all k):
        yields `(n, V)` per K, in order."""
        if list(ks) != sorted(set(ks)) or min(ks, default=1) < 1:
            raise ValueError(f"ks must increase strictly from 1 on, got {list(ks)}")
        eps = self.view.final_norm.eps
        coords = rows.float() @ self.basis
        raw = torch.zeros(len(rows), self.reading.shape[1], device=rows.device)
        state = torch.zeros(len(rows), self.basis.shape[0], device=rows.device)
        logits = torch.empty_like(raw)  # one buffer for every K: log_softmax copies it
        start = 0
        for K in ks:
            raw += coords[:, start:K] @ self.reading[start:K]
            state += coords[:, start:K] @ self.centered[:, start:K].T
            start = K
            torch.mul(
                raw, torch.rsqrt(state.pow(2).mean(-1, keepdim=True) + eps), out=logits
            )
            if self.offset is not None:
                logits += self.offset
            yield self.view.finish_logits(logits).log_softmax(-1)


def grid_plan(ks: list[int], k: int, d: int) -> tuple[list[int], list[int | None]]:
    """How a grid `ks` (increasing) is read on a basis of `k` columns in `d` dimensions: the distinct truncations
    to compute, min(K, k) increasing, and per K of the grid the index of its truncation among them, or None
    where it keeps the whole space (k = d and K >= d: p itself, up to rounding)."""
    computed = sorted({min(K, k) for K in ks if min(K, k) < d})
    return computed, [computed.index(min(K, k)) if min(K, k) < d else None for K in ks]


def spread(values: np.ndarray, where: list[int | None], whole) -> np.ndarray:
    """Scores per K of a grid `(len(where), n)` from the scores of its computed truncations `values` `(m, n)`
    (`grid_plan`'s `where`), `whole` (a number or `(n,)`) where a K keeps the whole space."""
    out = np.empty((len(where), values.shape[1]))
    for i, j in enumerate(where):
        out[i] = whole if j is None else values[j]
    return out


@torch.inference_mode()
def truncation_scores(
    view: ModelView,
    x: np.ndarray,
    basis: np.ndarray,
    ks: list[int],
    top: int = 5,
    batch_size: int = 64,
    progress: bool = True,
) -> Truncation:
    """KL(p_K || p) and top-`top` overlap for each K in `ks` (increasing; last-layer protocol).

    x: last-layer states before the final norm `(n, D)`; basis: `(D, k)` orthonormal columns sorted by
    decreasing singular value. p_K is the distribution of x projected on the first K columns
    (`TruncatedReadout`).
    """
    return truncation_scores_of_bases(
        view, x, [(basis, ks)], top, batch_size, progress
    )[0]


@torch.inference_mode()
def truncation_scores_of_bases(
    view: ModelView,
    x: np.ndarray,
    grids: list[tuple[np.ndarray, list[int]]],
    top: int = 5,
    batch_size: int = 64,
    progress: bool = True,
) -> list[Truncation]:
    """`truncation_scores` of the states x `(n, D)` for each (basis `(D, k)`, grid `ks`) of `grids`, one per
    grid: p and its top tokens are read once per batch for all of them. Each grid reads each distinct
    truncation once (`grid_plan`); a K that keeps the whole space scores KL 0 and overlap `top`, as p_K = p."""
    D = x.shape[1]
    readouts = [TruncatedReadout.of(view, basis) for basis, _ in grids]
    plans = [grid_plan(ks, np.shape(basis)[1], D) for basis, ks in grids]
    scores = [np.empty((2, len(computed), len(x))) for computed, _ in plans]
    for start in tqdm(
        range(0, len(x), batch_size), desc="truncated KL", disable=not progress
    ):
        rows = torch.as_tensor(
            x[start : start + batch_size], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        reference = top_tokens(logp, top)
        work = torch.empty_like(logp), torch.empty_like(logp)  # kl's, for every K
        for readout, (computed, _), out in zip(readouts, plans, scores):
            for j, truncated in enumerate(readout.logprobs(rows, computed)):
                out[0, j, start : start + len(rows)] = (
                    kl(truncated, logp, work).cpu().numpy()
                )
                out[1, j, start : start + len(rows)] = (
                    shared_tokens(top_tokens(truncated, top), reference).cpu().numpy()
                )
    return [
        Truncation(
            list(ks), spread(out[0], where, 0.0), spread(out[1], where, top), top
        )
        for (_, ks), (_, where), out in zip(grids, plans, scores)
    ]


@torch.inference_mode()
def propagated_truncation(
    model: Model,
    ids: np.ndarray,
    bases: np.ndarray,
    ks: list[int],
    top: int = 5,
    batch_size: int = 32,
    progress: bool = True,
    targets: np.ndarray | None = None,
) -> Truncation:
    """KL(p_K || p) and top-`top` overlap, `(len(ks), n)`, when the pilot is truncated after every block
    and propagated; with `targets` `(n,)`, each pilot's true next token, also the next-token loss and top-1
    hit of p_K and of p (`Truncation.loss`, `top1`, `full_loss`, `full_top1`).

    ids: pseudo-sentences `(n, T)`, the pilot last; bases: `(L+1, D, k)` per-layer singular vectors,
    each sorted by decreasing singular value (`ensemble_svd`, not aligned). The prefix (all tokens but
    the pilot) runs once and is kept as a key-value cache: causal attention makes it independent of
    what happens to the pilot. For each K the pilot then runs alone through the model's own blocks
    (their position embeddings and masks), its output replaced by the projection onto the top-K
    directions of U(t) after each block t = 1..L. p is the same pass without truncation. Each distinct
    truncation runs once (`grid_plan`); a K that keeps the whole space is p's pass itself.
    """
    view = model.view
    bases = torch.as_tensor(bases, dtype=torch.float32, device=view.device)
    ids = np.asarray(ids, dtype=np.int64)
    computed, where = grid_plan(ks, bases.shape[2], bases.shape[1])
    scores = np.empty((4, len(computed), len(ids)))  # KL, overlap, loss, top-1
    full = np.empty((2, len(ids)))  # p's loss and top-1
    for start in tqdm(
        range(0, len(ids), batch_size),
        desc="propagated truncation",
        disable=not progress,
    ):
        rows = slice(start, min(start + batch_size, len(ids)))
        scores[:, :, rows], full[:, rows] = _propagated_batch(
            view,
            ids[rows],
            bases,
            computed,
            top,
            None if targets is None else targets[rows],
        )
    divergence, overlap = spread(scores[0], where, 0.0), spread(scores[1], where, top)
    if targets is None:
        return Truncation(list(ks), divergence, overlap, top)
    loss, top1 = spread(scores[2], where, full[0]), spread(scores[3], where, full[1])
    return Truncation(list(ks), divergence, overlap, top, loss, top1, full[0], full[1])


def _propagated_batch(
    view: ModelView,
    batch: np.ndarray,
    bases: Tensor,
    computed: list[int],
    top: int,
    targets: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """`propagated_truncation` of pseudo-sentences `batch` `(b, T)` truncated to each K of `computed` on `bases`
    `(L+1, D, k)`: KL, overlap and, with `targets` `(b,)`, loss and top-1 hit of p_K `(4, len(computed), b)`
    (NaN where there are no targets), and p's loss and top-1 hit `(2, b)`."""
    prefix = view.prefix_cache(batch[:, :-1])
    pilot = batch[:, -1:]
    scores, full = (
        np.full((4, len(computed), len(batch)), np.nan),
        np.full((2, len(batch)), np.nan),
    )
    logp = next_token_logprobs(
        view, _pilot_last_state(view, pilot, copy.deepcopy(prefix), None)
    )
    if targets is not None:
        full[:] = _next_token_scores(logp, targets)
    reference = top_tokens(logp, top)
    for j, K in enumerate(computed):
        truncated = next_token_logprobs(
            view,
            _pilot_last_state(view, pilot, copy.deepcopy(prefix), bases[:, :, :K]),
        )
        scores[0, j] = kl(truncated, logp).cpu().numpy()
        scores[1, j] = (
            shared_tokens(top_tokens(truncated, top), reference).cpu().numpy()
        )
        if targets is not None:
            scores[2:, j] = _next_token_scores(truncated, targets)
    return scores, full


def _next_token_scores(
    logp: Tensor, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """-log p(target) and whether the target is p's most likely token, from log-probabilities `(n, V)`
    and target ids `(n,)`: two `(n,)` arrays."""
    target = torch.as_tensor(targets, dtype=torch.long, device=logp.device)
    loss = -logp.gather(1, target[:, None])[:, 0]
    return loss.cpu().numpy(), (logp.argmax(-1) == target).cpu().numpy()


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


def truncation_grid(d: int) -> list[int]:
    """The grid of K of B2 and C8: the powers of two below `d`, the multiples of d/16 from d/8 to d/2, and `d`, sorted."""
    powers = {2**j for j in range(int(np.log2(d)) + 1) if 2**j < d}
    return sorted(powers | {j * d // 16 for j in range(2, 9)} | {d})
