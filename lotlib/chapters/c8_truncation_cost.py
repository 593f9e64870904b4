"""Chapter C8's figures: the cost of reading the last layer through a truncated basis."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..lines_of_thought.ensemble import ensemble_svd
from ..lines_of_thought.truncation import (
    TruncationCost,
    propagated_truncation,
    truncation_grid,
)
from ..models.bounds import pilot_count


def truncation_cost_figure(cost, d: int, model: str) -> None:
    """C8: against K, for held-out pilots truncated after every block (`truncation.TruncationCost`): the mean
    KL(p_K || p), the rise of the next-token loss over p's and p_K's top-1 accuracy (p's as a dashed line),
    each with its 95% bootstrap band over the pilots; K = D/4 marked."""
    table = cost.table()
    _, axes = plt.subplots(1, 3, figsize=(15, 4))
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
    plt.show()


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
        ensemble_svd(ens.X[:n_fit], device=ens.lm.device)[0],
        ks or truncation_grid(ens.D),
        progress=progress,
        targets=next_tokens(ens.corpus.ids, rows, ens.corpus.prefix),
    )
    return TruncationCost(scores, n_fit, n_boot, seed)
