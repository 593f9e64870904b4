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


# --- B2: the authors' criterion read off the truncation curves ---------------------------------------------

PAPER_DROP = 0.1  # the authors' criterion: the mean KL falls to about a tenth of its value at K = 1
UNITS = {"last layer": "pilots", "every layer": "pilots (propagated)"}


def truncation_grid(d: int) -> list[int]:
    """The K of B2: the powers of two below `d`, the multiples of d/16 from d/8 to d/2, and `d`, sorted."""
    powers = {2**j for j in range(int(np.log2(d)) + 1) if 2**j < d}
    return sorted(powers | {j * d // 16 for j in range(2, 9)} | {d})


def random_orthonormal(d: int, seed: int = 0) -> np.ndarray:
    """`d` random orthonormal directions `(d, d)` (QR of a standard normal matrix): the null basis of B2."""
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))[0]


def truncation_protocols(
    model: Model,
    ids: np.ndarray,
    x_last: np.ndarray,
    bases: np.ndarray,
    ks: list[int],
    picked: np.ndarray,
    sub: np.ndarray,
    top: int = 5,
) -> dict[str, Truncation]:
    """Both protocols of B2 on the grid `ks`: "last layer" (`truncation_scores` of the pilots `picked`,
    states `x_last` `(N, D)` on the basis `bases[-1]`) and "every layer" (`propagated_truncation` of the
    pseudo-sentences `ids[sub]` `(n, T)` with `bases` `(L+1, D, k)`; left out with fewer than 2 pilots)."""
    out = {
        "last layer": truncation_scores(
            model.view, x_last[picked], bases[-1], ks, top=top
        )
    }
    if len(sub) > 1:
        out["every layer"] = propagated_truncation(model, ids[sub], bases, ks, top=top)
    return out


def truncation_criteria(
    result: Truncation,
    d: int,
    unit: str = "pilots",
    n_boot: int = 2000,
    seed: int = 0,
    k0: bool = True,
) -> dict:
    """The authors' numbers from per-pilot scores, each an `Estimate` over the pilots of `result`
    (recomputed on every bootstrap resample): `kl_drop` KL(d/4) / KL(1) (means over pilots), `kl_quarter_d`
    and `overlap_quarter_d` (means at K = d/4) and, with `k0`, `k0_over_d`: the smallest K of the grid
    whose mean KL is at most `PAPER_DROP` x the mean KL at K = 1, over d. Needs K = 1 and d/4 in the grid."""
    from ..intervals import bootstrap, bootstrap_mean

    one, quarter, n = result.ks.index(1), result.ks.index(d // 4), result.kl.shape[1]

    def drop(i: np.ndarray) -> float:
        return result.kl[quarter, i].mean() / result.kl[one, i].mean()

    def k0_over_d(i: np.ndarray) -> float:
        curve = result.kl[:, i].mean(1)
        return result.ks[int(np.argmax(curve <= PAPER_DROP * curve[one]))] / d

    ask = {"unit": unit, "n_boot": n_boot, "seed": seed}
    out = {
        "kl_drop": bootstrap(drop, n, **ask),
        "kl_quarter_d": bootstrap_mean(result.kl[quarter], **ask),
        "overlap_quarter_d": bootstrap_mean(result.overlap[quarter], **ask),
    }
    if k0:
        out["k0_over_d"] = bootstrap(k0_over_d, n, **ask)
    return out


def truncation_summary(
    protocols: dict[str, Truncation], found: dict[str, dict], random: dict
) -> dict:
    """B2's summary of the protocols (`truncation_protocols`), their criteria (`truncation_criteria` per
    protocol) and the random-directions null's: mean KL and overlap per K of each protocol (None for a
    protocol not run) and every criterion under `<name>_last_layer`, `_every_layer`, `_random_directions`."""
    out = {}
    for name in UNITS:
        suffix = name.replace(" ", "_")
        result = protocols.get(name)
        out[f"kl_{suffix}_mean"] = None if result is None else result.kl.mean(1)
        out[f"overlap_{suffix}_mean"] = (
            None if result is None else result.overlap.mean(1)
        )
    for name, criteria in [*found.items(), ("random directions", random)]:
        suffix = name.replace(" ", "_")
        out.update({f"{key}_{suffix}": value for key, value in criteria.items()})
    return out
