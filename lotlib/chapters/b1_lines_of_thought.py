"""Chapter B1's figures: the pilots' paths and how many directions hold the ensemble."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .. import plots


def show_paths(
    P: np.ndarray, layers: np.ndarray, title: str, axis_names=("u1", "u2", "u3")
) -> None:
    """B1: trajectories `P` `(N, T, 3)` drawn twice, rotatable (`plots.paths_3d`) and static
    (`plots.paths_static`), points colored by `layers` `(T,)`."""

    plots.show(plots.paths_3d(P, layers, title, axis_names=axis_names))
    plots.paths_static(P, layers, title, axis_names=axis_names)
    plt.show()


def direction_counts_figure(
    counts: dict[str, np.ndarray], span: int, title: str, share: float = 0.9
) -> None:
    """B1: per layer, the directions that carry `share` in each reading of `counts` (`direction_counts`,
    each `(L+1,)`), as a share of `span` = min(N_s - 1, D)."""
    label = f"directions for {share:.0%} / min(N_s - 1, D)"
    frame = pd.DataFrame(
        [
            {"layer t": t, "reading": reading, label: k / span}
            for reading, per_layer in counts.items()
            for t, k in enumerate(per_layer)
        ]
    )
    _, ax = plt.subplots(figsize=(7.5, 3.6))
    sns.lineplot(frame, x="layer t", y=label, hue="reading", marker="o", ax=ax)
    ax.set(title=title, ylim=(0, None))
    plt.show()


def held_out_share_figure(
    per_layer: dict[str, list], k: int, title: str, share: float = 0.9
) -> None:
    """B1: the held-out share of variance in `k` principal directions per layer, with its bootstrap band,
    for each curve of `per_layer` (`held_out_shares`: name -> `Estimate` values over layers)."""
    _, ax = plt.subplots(figsize=(7.5, 3.6))
    for name, estimates in per_layer.items():
        t = np.arange(len(estimates))
        frame = pd.DataFrame({"layer t": t, "share": [e.value for e in estimates]})
        sns.lineplot(frame, x="layer t", y="share", marker="o", label=name, ax=ax)
        lo, hi = [e.lo for e in estimates], [e.hi for e in estimates]
        ax.fill_between(t, lo, hi, alpha=0.25)
    ax.axhline(share, color="grey", ls=":", label=f"{share:.0%}")
    ax.set(
        ylabel=f"held-out variance in top D/4 = {k} directions",
        ylim=(0, 1.02),
        title=title,
    )
    ax.legend(fontsize=8)
    plt.show()
