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

B2 reads the authors' criteria off both (`criteria`) by the paper's protocol, the basis fit on the very
pilots it truncates, at any N_s (`truncation_at_sizes`: the book's and the paper's 2.8 D). Their intervals
refit the basis: each repetition draws the pilots with replacement, fits the basis on the draw and rescores
its pilots (`resampled_truncation`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..models.bounds import pilot_count
from ..models.loading import Model
from ..models.view import ModelView
from ..stats import Estimate, bootstrap_mean, draw_pilots
from .ensemble import ensemble_svd
from .extrapolation import weighted_svd
from .resampling import centered_estimates, resample_rows


@dataclass(frozen=True)
class Truncation:
    """Per-pilot scores of truncated distributions: `kl` KL(p_K || p) in nats and `overlap`, the number of
    shared tokens among the `top` most likely of p_K and of p, both `(len(ks), n)` for the grid `ks`."""

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


def kl(logp: Tensor, logq: Tensor) -> Tensor:
    """KL(p || q) in nats, row by row, from log-probabilities `(n, V)`: `(n,)`."""
    return (logp.exp() * (logp - logq)).sum(-1).clamp_min(0.0)


def top_tokens(logp: Tensor, top: int = 5) -> Tensor:
    """The `top` most likely tokens of each row of log-probabilities `(n, V)`: `(n, top)` ids."""
    return logp.topk(top, dim=-1).indices


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
        if list(ks) != sorted(set(ks)) or ks[0] < 1:
            raise ValueError(f"ks must increase strictly from 1 on, got {list(ks)}")
        eps = self.view.final_norm.eps
        coords = rows.float() @ self.basis
        raw = torch.zeros(len(rows), self.reading.shape[1], device=rows.device)
        state = torch.zeros(len(rows), self.basis.shape[0], device=rows.device)
        start = 0
        for K in ks:
            raw += coords[:, start:K] @ self.reading[start:K]
            state += coords[:, start:K] @ self.centered[:, start:K].T
            start = K
            logits = raw * torch.rsqrt(state.pow(2).mean(-1, keepdim=True) + eps)
            if self.offset is not None:
                logits += self.offset
            yield self.view.finish_logits(logits).log_softmax(-1)


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
    readout = TruncatedReadout.of(view, basis)
    divergence, overlap = np.empty((len(ks), len(x))), np.empty((len(ks), len(x)))
    for start in tqdm(
        range(0, len(x), batch_size), desc="truncated KL", disable=not progress
    ):
        rows = torch.as_tensor(
            x[start : start + batch_size], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        reference = top_tokens(logp, top)
        for j, truncated in enumerate(readout.logprobs(rows, ks)):
            divergence[j, start : start + len(rows)] = kl(truncated, logp).cpu().numpy()
            overlap[j, start : start + len(rows)] = (
                shared_tokens(top_tokens(truncated, top), reference).cpu().numpy()
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
    directions of U(t) after each block t = 1..L. p is the same pass without truncation.
    """
    view = model.view
    bases = torch.as_tensor(bases, dtype=torch.float32, device=view.device)
    ids = np.asarray(ids, dtype=np.int64)
    shape = (len(ks), len(ids))
    divergence, overlap, loss, top1 = (np.empty(shape) for _ in range(4))
    full_loss, full_top1 = np.empty(len(ids)), np.empty(len(ids))
    for start in tqdm(
        range(0, len(ids), batch_size),
        desc="propagated truncation",
        disable=not progress,
    ):
        batch = ids[start : start + batch_size]
        rows = slice(start, start + len(batch))
        prefix = view.prefix_cache(batch[:, :-1])
        pilot = batch[:, -1:]
        logp = next_token_logprobs(
            view, _pilot_last_state(view, pilot, copy.deepcopy(prefix), None)
        )
        if targets is not None:
            full_loss[rows], full_top1[rows] = _next_token_scores(logp, targets[rows])
        reference = top_tokens(logp, top)
        for j, K in enumerate(ks):
            truncated = next_token_logprobs(
                view,
                _pilot_last_state(view, pilot, copy.deepcopy(prefix), bases[:, :, :K]),
            )
            divergence[j, rows] = kl(truncated, logp).cpu().numpy()
            overlap[j, rows] = (
                shared_tokens(top_tokens(truncated, top), reference).cpu().numpy()
            )
            if targets is not None:
                loss[j, rows], top1[j, rows] = _next_token_scores(
                    truncated, targets[rows]
                )
    if targets is None:
        return Truncation(list(ks), divergence, overlap, top)
    return Truncation(
        list(ks), divergence, overlap, top, loss, top1, full_loss, full_top1
    )


def _next_token_scores(
    logp: Tensor, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """-log p(target) and whether the target is p's most likely token, from log-probabilities `(n, V)`
    and target ids `(n,)`: two `(n,)` arrays."""
    target = torch.as_tensor(targets, dtype=torch.long, device=logp.device)
    loss = -logp.gather(1, target[:, None])[:, 0]
    return loss.cpu().numpy(), (logp.argmax(-1) == target).cpu().numpy()


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
PROTOCOLS = ("last layer", "every layer")  # the two readings of the truncation


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
    progress: bool = True,
) -> dict[str, Truncation]:
    """Both protocols of B2 on the grid `ks`: "last layer" (`truncation_scores` of the pilots `picked`,
    states `x_last` `(N, D)` on the basis `bases[-1]`) and "every layer" (`propagated_truncation` of the
    pseudo-sentences `ids[sub]` `(n, T)` with `bases` `(L+1, D, k)`; left out with fewer than 2 pilots)."""
    out = {
        "last layer": truncation_scores(
            model.view, x_last[picked], bases[-1], ks, top=top, progress=progress
        )
    }
    if len(sub) > 1:
        out["every layer"] = propagated_truncation(
            model, ids[sub], bases, ks, top=top, progress=progress
        )
    return out


def criteria(
    result: Truncation, d: int, weights: np.ndarray | None = None, k0: bool = True
) -> dict[str, float]:
    """The authors' numbers from per-pilot scores, with pilot j of `result` counted `weights[j]` times
    (None: once): `kl_drop` KL(d/4) / KL(1) (means over pilots), `kl_quarter_d` and `overlap_quarter_d`
    (means at K = d/4) and, with `k0`, `k0_over_d`: the smallest K of the grid whose mean KL is at most
    `PAPER_DROP` x the mean KL at K = 1, over d. Needs K = 1 and d/4 in the grid."""
    w = np.ones(result.kl.shape[1]) if weights is None else np.asarray(weights, float)
    kl_mean, overlap_mean = result.kl @ w / w.sum(), result.overlap @ w / w.sum()
    one, quarter = result.ks.index(1), result.ks.index(d // 4)
    out = {
        "kl_drop": kl_mean[quarter] / kl_mean[one],
        "kl_quarter_d": kl_mean[quarter],
        "overlap_quarter_d": overlap_mean[quarter],
    }
    if k0:
        passed = np.argmax(kl_mean <= PAPER_DROP * kl_mean[one])
        out["k0_over_d"] = result.ks[int(passed)] / d
    return out


RANDOM = "random directions"
# suffix of the summary keys measured on the paper's N_s (2.8 D, or all of Walden if less)
PAPER_NS = "_paper_ns"


@dataclass
class ResampledTruncation:
    """B2's truncation on `n_s` pilots: `protocols` (name -> `Truncation` of the sample, `truncation_protocols`),
    `found` (name -> `criteria` as `Estimate`s, the random-directions null under `RANDOM`) and `curves`
    (name -> `(n_rep, 2, len(ks))`: each repetition's mean KL and mean overlap per K)."""

    n_s: int
    protocols: dict[str, Truncation]
    found: dict[str, dict]
    curves: dict[str, np.ndarray]

    def scored(self, name: str) -> int:
        """How many pilots protocol `name` scores on the sample (0 when it was not run)."""
        result = self.protocols.get(name)
        return 0 if result is None else result.kl.shape[1]

    def summary(self, suffix: str = "") -> dict:
        """Mean KL and overlap per K of each protocol (`kl_{last,every}_layer_mean`, None for a protocol not
        run) and every criterion as `<criterion>_{last_layer,every_layer,random_directions}`, each key
        ending in `suffix`."""
        out = {}
        for name in PROTOCOLS:
            result = self.protocols.get(name)
            for score in ("kl", "overlap"):
                mean = None if result is None else getattr(result, score).mean(1)
                out[f"{score}_{name.replace(' ', '_')}_mean{suffix}"] = mean
        for name, found in self.found.items():
            label = name.replace(" ", "_")
            out.update({f"{key}_{label}{suffix}": v for key, v in found.items()})
        return out


def resampled_truncation(
    model: Model,
    ids: np.ndarray,
    X: np.ndarray,
    ks: list[int],
    picked: np.ndarray,
    sub: np.ndarray,
    *,
    n_rep: int,
    seed: int = 0,
    top: int = 5,
) -> ResampledTruncation:
    """B2's truncation by the paper's protocol, the basis fit on the very pilots it truncates, with intervals
    that refit it.

    X `(N, L+1, D)`, ids `(N, T)`: the pilots. The sample: the uncentered per-layer bases of all N pilots
    (`weighted_svd`, sorted by decreasing singular value), both protocols (`truncation_protocols`: the last
    layer on `picked`, every layer on `sub`) and the random-directions null (the last-layer protocol of
    `picked` on D random orthonormal directions, seeded, K = 1 and D/4). Each of the `n_rep` repetitions
    (`extrapolation.resample_rows`, kept for a resumed run) draws N pilots with replacement, **refits the
    bases on the draw**,
    draws new random directions, and rescores the draw's pilots in the positions `picked` and `sub` (as
    many as the sample scores; each distinct pilot once, weighted by its count). Criteria (`criteria`):
    the sample's values, percentile intervals over the repetitions re-centered on them
    (`extrapolation.centered_percentile`; K0's interval, moved like the others, need not fall on the
    grid, and stops at 1)."""

    N, D = len(X), X.shape[2]
    layers = X if len(sub) > 1 else X[:, -1:]

    def run(
        pilots: np.ndarray, rng: np.random.Generator
    ) -> dict[str, tuple[Truncation, np.ndarray]]:
        distinct, rows = np.unique(pilots, return_inverse=True)
        bases = weighted_svd(layers[distinct], np.bincount(rows))[0]
        (last, n_last), (every, n_every) = (
            np.unique(pilots[s], return_counts=True) for s in (picked, sub)
        )
        scored = truncation_protocols(
            model, ids, X[:, -1], bases, ks, last, every, top, progress=False
        )
        directions = random_orthonormal(D, int(rng.integers(2**31)))
        scored[RANDOM] = truncation_scores(
            model.view, X[last, -1], directions, [1, D // 4], top=top, progress=False
        )
        weights = {"last layer": n_last, "every layer": n_every, RANDOM: n_last}
        return {name: (result, weights[name]) for name, result in scored.items()}

    runs = resample_rows(
        run, N, n_rep=n_rep, seed=seed, desc="truncation resamples (bases refit)"
    )
    values = [
        {
            f"{key}|{name}": value
            for name, (result, w) in one.items()
            for key, value in criteria(result, D, w, k0=name != RANDOM).items()
        }
        for one in runs
    ]
    found = centered_estimates(
        values, N, unit="pilots (bases refit)", bounds=(0.0, np.inf)
    )
    grouped: dict[str, dict] = {}
    for key, estimate in found.items():
        criterion, name = key.split("|")
        if criterion == "k0_over_d":  # a share of D: at most 1
            estimate = replace(estimate, hi=min(estimate.hi, 1.0))
        grouped.setdefault(name, {})[criterion] = estimate
    curves = {
        name: np.array(
            [
                np.stack([r.kl @ w, r.overlap @ w]) / w.sum()
                for r, w in (one[name] for one in runs[1:])
            ]
        )
        for name in runs[0]
    }
    protocols = {name: runs[0][name][0] for name in PROTOCOLS if name in runs[0]}
    return ResampledTruncation(N, protocols, grouped, curves)


def truncation_at_sizes(
    model: Model,
    ids: np.ndarray,
    X: np.ndarray,
    ks: list[int],
    samples: dict[str, np.ndarray],
    n_truncated: int | None,
    n_propagated: int,
    *,
    n_rep: int,
    seed: int = 0,
    top: int = 5,
) -> dict[str, ResampledTruncation]:
    """`resampled_truncation` of each sample of pilots (label -> sorted indices into X `(N, L+1, D)` and ids
    `(N, T)`: the book's N_s, the paper's 2.8 D), its bases fit on that sample alone, scoring
    `n_truncated` (None: all) and `n_propagated` of its pilots (`stats.draw_pilots`, one generator seeded by `seed`). A sample
    equal to one already run shares its result."""

    out: dict[str, ResampledTruncation] = {}
    for label, pilots in samples.items():
        same = [r for lab, r in out.items() if np.array_equal(samples[lab], pilots)]
        if same:
            out[label] = same[0]
            continue
        sizes = [n_truncated or len(pilots), n_propagated]
        rng = np.random.default_rng(seed)
        picked, sub = (draw_pilots(len(pilots), size, rng) for size in sizes)
        out[label] = resampled_truncation(
            model,
            ids[pilots],
            X[pilots],
            ks,
            picked,
            sub,
            n_rep=n_rep,
            seed=seed,
            top=top,
        )
    return out


# --- C7: what the truncation costs downstream ----------------------------------------------------------------


@dataclass
class TruncationCost:
    """Held-out pilots truncated after every block to the top-K directions of bases fit on other pilots
    (`truncation_cost`): `scores` (a `Truncation` with next-token loss and top-1 hits), the pilots the bases
    were fit on (`n_fit`) and, per K, the mean KL(p_K || p), the rise of the next-token loss over p's and p_K's
    top-1 accuracy, each with a bootstrap interval over the scored pilots (`table`, `at`)."""

    scores: Truncation
    n_fit: int
    n_boot: int
    seed: int = 0

    def at(self, K: int) -> dict[str, Estimate]:
        """KL, loss rise (nats) and top-1 accuracy of p_K at K (a value of the grid), with intervals."""

        j = self.scores.ks.index(K)
        per_pilot = {
            "kl": self.scores.kl[j],
            "loss_rise": self.scores.loss[j] - self.scores.full_loss,
            "top1": self.scores.top1[j],
        }
        return {
            name: bootstrap_mean(
                v, unit="held-out pilots", n_boot=self.n_boot, seed=self.seed
            )
            for name, v in per_pilot.items()
        }

    def full(self) -> dict[str, Estimate]:
        """The untruncated model's next-token loss (nats) and top-1 accuracy on the scored pilots."""

        return {
            name: bootstrap_mean(
                v, unit="held-out pilots", n_boot=self.n_boot, seed=self.seed
            )
            for name, v in (
                ("loss", self.scores.full_loss),
                ("top1", self.scores.full_top1),
            )
        }

    def summary(self, d: int) -> dict:
        """The chapter's values: pilots fit and scored, and at K = d/4 (`d` the width) the KL, the loss rise
        and the top-1 accuracy, with the untruncated model's loss and top-1 accuracy."""
        quarter, full = self.at(d // 4), self.full()
        return {
            "n_fit": self.n_fit,
            "n_scored": self.scores.kl.shape[1],
            "kl_quarter_d_held_out": quarter["kl"],
            "loss_rise_quarter_d": quarter["loss_rise"],
            "top1_quarter_d": quarter["top1"],
            "loss_full": full["loss"],
            "top1_full": full["top1"],
        }

    def table(self) -> pd.DataFrame:
        """One row per K: the estimates of `at`, as numbers (`value`, `lo`, `hi` per column)."""
        rows = []
        for K in self.scores.ks:
            for name, e in self.at(K).items():
                rows.append(
                    {"K": K, "score": name, "value": e.value, "lo": e.lo, "hi": e.hi}
                )
        return pd.DataFrame(rows)


def next_tokens(ids: np.ndarray, rows: np.ndarray, prefix: int = 0) -> np.ndarray:
    """The true next token of each pseudo-sentence `rows` of a corpus cut into consecutive non-overlapping
    chunks `ids` `(N, T)` (the first `prefix` columns a BOS): the first text token of the chunk after it,
    `(len(rows),)`. Every row must have a successor (row < N - 1)."""
    rows = np.asarray(rows)
    if len(rows) and rows.max() >= len(ids) - 1:
        raise ValueError(
            f"pseudo-sentence {rows.max()} has no successor among {len(ids)}: its next token is unknown"
        )
    return ids[rows + 1, prefix]


def truncation_cost(
    ens,
    n_scored: int | str,
    *,
    ks: list[int] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = True,
) -> TruncationCost:
    """What truncating every block's output to its top-K ensemble directions costs the next token, on an
    `ensemble.Ensemble` of N pseudo-sentences: bases (`ensemble_svd`, uncentered, sorted) fit on the first
    N - `n_scored` - 1 (a count or a multiple of the width, "0.25D"), the next `n_scored` (held out; each with
    its successor's first token as target, `next_tokens`; the last has none) truncated after every block
    (`propagated_truncation`) for each K of `ks` (None: `truncation_grid`)."""

    scored = pilot_count(n_scored, ens.D, "n_scored", model=ens.lm.name)
    n_fit = ens.n_s - scored - 1
    if n_fit < 1:
        raise ValueError(
            f"parameter n_scored = {n_scored!r} ({scored}) leaves no pseudo-sentence of {ens.n_s} to fit the "
            "bases on (the last one has no known next token): lower it or raise n_s"
        )
    rows = np.arange(n_fit, n_fit + scored)
    scores = propagated_truncation(
        ens.lm,
        ens.corpus.ids[rows],
        ensemble_svd(ens.X[:n_fit])[0],
        ks or truncation_grid(ens.D),
        progress=progress,
        targets=next_tokens(ens.corpus.ids, rows, ens.corpus.prefix),
    )
    return TruncationCost(scores, n_fit, n_boot, seed)
