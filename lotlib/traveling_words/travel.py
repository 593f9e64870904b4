"""Travel in the full space: cosines of each block's normalized update with e_next - e_current, and their summaries."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..models.capture import capture
from ..models.loading import Model
from ..stats import Estimate, bootstrap, bootstrap_mean


@dataclass(frozen=True)
class Travel:
    """Cosines keyed by target ("true" next tokens, or a baseline's name): `steps[k]` `(n, T-1, L)` for each
    block's update, `trip[k]` `(n, T-1)` for the whole way final_norm(x(L)) - final_norm(x(0)). NaN where
    the target is 0 (next = current)."""

    steps: dict[str, np.ndarray]
    trip: dict[str, np.ndarray]


def shuffled_next(
    next_ids: np.ndarray, seed: int, within_rows: bool = False
) -> np.ndarray:
    """The next tokens `(n, T-1)` permuted with a seeded generator: across the whole sample, or with
    `within_rows` inside each pseudo-sentence (the baseline word then comes from the same passage)."""
    rng = np.random.default_rng(seed)
    if within_rows:
        return rng.permuted(next_ids, axis=1)
    return rng.permutation(next_ids.ravel()).reshape(next_ids.shape)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine over the last axis, NaN where either vector is zero."""
    norms = a.norm(dim=-1) * b.norm(dim=-1)
    return (a * b).sum(-1) / torch.where(norms > 0, norms, torch.nan)


# the embedding table the target direction e_next - e_current uses
TARGETS = ("W_E", "final_norm(W_E)")


@torch.inference_mode()
def travel_cosines(
    model: Model,
    ids: np.ndarray,
    baselines: dict[str, np.ndarray],
    *,
    first: int = 0,
    batch_size: int = 16,
    progress: bool = True,
) -> dict[str, Travel]:
    """For every position first <= i < T-1 of `ids` `(n, T)` and every block t: the cosine between
    final_norm(x_i(t+1)) - final_norm(x_i(t)) and e[ids_{i+1}] - e[ids_i] ("true"), and the same with each
    baseline's next tokens `(n, T-1-first)`. Positions before `first` (a BOS: `Corpus.prefix`) are context only.
    One `Travel` per target table in TARGETS (raw or final-normed W_E)."""
    view = model.view
    norm, W_E = view.final_norm, view.W_E.detach().float()
    tables = {"W_E": lambda i: W_E[i], "final_norm(W_E)": lambda i: norm(W_E[i])}
    nexts = {"true": ids[:, first + 1 :], **baselines}
    parts = {
        (name, part, kind): []
        for name in TARGETS
        for part in ("steps", "trip")
        for kind in nexts
    }
    for start in tqdm(
        range(0, len(ids), batch_size),
        desc="travel",
        unit="batch",
        disable=not progress,
    ):
        rows = slice(start, start + batch_size)
        X = torch.from_numpy(
            capture(
                model,
                ids[rows],
                all_positions=True,
                batch_size=batch_size,
                progress=False,
            )
        )
        X = X.to(view.device)
        Y = norm(X[:, first:-1])  # (B, T-1-first, L+1, d)
        moves = {"steps": Y.diff(dim=2), "trip": Y[:, :, -1] - Y[:, :, 0]}
        current = torch.from_numpy(np.ascontiguousarray(ids[rows, first:-1])).to(
            view.device
        )
        for name, table in tables.items():
            e_current = table(current)
            for kind, nxt in nexts.items():
                following = torch.from_numpy(np.ascontiguousarray(nxt[rows])).to(
                    view.device
                )
                direction = table(following) - e_current  # (B, T-1, d)
                parts[name, "steps", kind].append(
                    _cosine(moves["steps"], direction[:, :, None])
                )
                parts[name, "trip", kind].append(_cosine(moves["trip"], direction))
    joined = {key: torch.cat(chunks).cpu().numpy() for key, chunks in parts.items()}
    return {
        name: Travel(
            *(
                {kind: joined[name, part, kind] for kind in nexts}
                for part in ("steps", "trip")
            )
        )
        for name in TARGETS
    }


def paired_summary(
    true: np.ndarray,
    shuffled: np.ndarray,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Per column k of `(n, T-1, K)` cosines (or one column of `(n, T-1)`): mean over sentences of each
    sentence's mean (true, shuffled, difference; positions where either is NaN left out of both), the
    difference's standard error over sentences and a bootstrap interval resampling whole sentences (positions
    of one sentence are not independent): the interval of `trip_difference` for the same seed."""
    if true.ndim == 2:
        true, shuffled = true[..., None], shuffled[..., None]
    valid = np.isfinite(true) & np.isfinite(shuffled)
    true, shuffled = np.where(valid, true, np.nan), np.where(valid, shuffled, np.nan)
    per_sentence = {
        "true": np.nanmean(true, axis=1),
        "shuffled": np.nanmean(shuffled, axis=1),
    }
    difference = per_sentence["true"] - per_sentence["shuffled"]  # (n, K)
    n = len(difference)
    resampled = difference[
        np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    ].mean(axis=1)
    lo, hi = np.quantile(resampled, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return pd.DataFrame(
        {
            "true": per_sentence["true"].mean(0),
            "shuffled": per_sentence["shuffled"].mean(0),
            "difference": difference.mean(0),
            "se": difference.std(0, ddof=1) / np.sqrt(n),
            "ci_lo": lo,
            "ci_hi": hi,
        }
    )


def travel_summaries(
    travel: dict[str, Travel], part: str, **kwargs
) -> dict[tuple[str, str], pd.DataFrame]:
    """`paired_summary` of the true next tokens against each baseline (`part` "steps" or "trip"), keyed by
    (target table, baseline name); `kwargs` go to `paired_summary`."""
    return {
        (name, kind): paired_summary(getattr(t, part)["true"], cosines, **kwargs)
        for name, t in travel.items()
        for kind, cosines in getattr(t, part).items()
        if kind != "true"
    }


def per_sentence_difference(true: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Each pseudo-sentence's mean over positions of true minus baseline cosines: `(n, K)` from `(n, T-1, K)`,
    `(n,)` from `(n, T-1)`. Positions where either is NaN (a zero target) are left out of both."""
    difference = true - baseline
    return np.nanmean(difference, axis=1)


def trip_difference(
    true: np.ndarray, baseline: np.ndarray, *, n_boot: int = 2000, seed: int = 0
) -> Estimate:
    """The whole trip's lean toward the true next word over the baseline's: the mean over pseudo-sentences of
    `per_sentence_difference` of `(n, T-1)` cosines, with a bootstrap interval over pseudo-sentences."""
    return bootstrap_mean(
        per_sentence_difference(true, baseline),
        unit="pseudo-sentences",
        n_boot=n_boot,
        seed=seed,
    )


def win_share(
    true: np.ndarray, baseline: np.ndarray, *, n_boot: int = 2000, seed: int = 0
) -> Estimate:
    """Share of positions where the true cosine `(n, T-1)` beats the baseline's (zero targets left out),
    pooled over positions, with a bootstrap interval resampling whole pseudo-sentences."""
    valid = np.isfinite(true) & np.isfinite(baseline)
    wins, counts = ((true > baseline) & valid).sum(1), valid.sum(1)
    return bootstrap(
        lambda idx: wins[idx].sum() / counts[idx].sum(),
        len(true),
        unit="pseudo-sentences",
        n_boot=n_boot,
        seed=seed,
    )


def positive_block_share(
    true: np.ndarray, baseline: np.ndarray, *, n_boot: int = 2000, seed: int = 0
) -> Estimate:
    """Share of blocks whose mean update (over pseudo-sentences) leans toward the true next word more than
    toward the baseline's, from `(n, T-1, L)` step cosines, with a bootstrap interval over pseudo-sentences."""
    difference = per_sentence_difference(true, baseline)  # (n, L)
    return bootstrap(
        lambda idx: np.mean(np.nanmean(difference[idx], axis=0) > 0),
        len(difference),
        unit="pseudo-sentences",
        n_boot=n_boot,
        seed=seed,
    )
