"""Chapter C8's figures: the cost of reading the last layer through a truncated basis."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..lines_of_thought.ensemble import Ensemble, ensemble_svd
from ..lines_of_thought.truncation import (
    Truncation,
    propagated_truncation,
    truncation_grid,
)
from ..models.bounds import pilot_count
from ..stats import Estimate, bootstrap_mean


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


def truncation_cost_figure(cost: TruncationCost, d: int, model: str) -> Figure:
    """C8: against K, for held-out pilots truncated after every block (`TruncationCost`): the mean
    KL(p_K || p), the rise of the next-token loss over p's and p_K's top-1 accuracy (p's as a dashed line),
    each with its 95% bootstrap band over the pilots; K = D/4 marked."""
    table = cost.table()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    labels = {
        "kl": "KL(p_K ‖ p) (nats)",
        "loss_rise": "next-token loss rise (nats)",
        "top1": "top-1 accuracy of p_K",
    }
    for ax, (score, label) in zip(axes, labels.items()):
        rows = table[table["score"] == score]
        ax.plot(rows["K"], rows["value"], marker="o", ms=3)
        ax.fill_between(rows["K"], rows["lo"], rows["hi"], alpha=0.25)
        ax.axvline(d // 4, color="grey", ls=":", label="K = D/4")
        ax.set(xscale="log", xlabel="K", ylabel=label)
    axes[2].axhline(
        cost.full()["top1"].value, color="k", ls="--", lw=1, label="p (no truncation)"
    )
    axes[2].legend(fontsize=8)
    axes[1].set_title(
        f"{model}, {cost.scores.kl.shape[1]} held-out pilots, bases from {cost.n_fit} others"
    )
    return fig


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
    ens: Ensemble,
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
        ensemble_svd(ens.X[:n_fit], device=ens.lm.device)[0],
        ks or truncation_grid(ens.D),
        progress=progress,
        targets=next_tokens(ens.corpus.ids, rows, ens.corpus.prefix),
    )
    return TruncationCost(scores, n_fit, n_boot, seed)


def claim_values(ens: Ensemble, cost: TruncationCost) -> dict[str, object]:
    """C8's recorded values: the ensemble's sizes and `TruncationCost.summary` at its width."""
    return {**ens.sizes, **cost.summary(ens.D)}
