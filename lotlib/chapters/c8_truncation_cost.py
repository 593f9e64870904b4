"""Chapter C8's figures: the cost of reading the last layer through a truncated basis."""

from __future__ import annotations

import matplotlib.pyplot as plt


def truncation_cost_figure(cost, d: int, model: str) -> None:
    """C7: against K, for held-out pilots truncated after every block (`truncation.TruncationCost`): the mean
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
