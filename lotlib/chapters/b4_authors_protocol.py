"""Chapter B4's figures under the authors' protocol: the residual statistics by pair of layers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from ..lines_of_thought.residuals import pair_frame


def authors_heatmaps(ensembles: dict, layers, title: str) -> None:
    """B4: the paper's three panels (Fig. 4, `figA_llama2_7B.m`) for the sample of each `AuthorsPairs` of
    `ensembles` (name -> pairs, one row each): mean abs(μ/σ) over raw coordinates, log10 of the mean variance and
    mean abs(κ) − 3 (bias-corrected kurtosis) per pair (t, t + τ), on the paper's color scales where it gives them
    (0-0.5 and 0-0.8, arrows where values run past). `layers`: the `PairLayers` of the same L."""
    panels = [
        ("mean_abs_z", "⟨|μ/σ|⟩", "viridis", (0.0, 0.5), lambda v: v),
        ("mean_var", "log10 ⟨σ²⟩", "magma", (None, None), np.log10),
        ("mean_abs_kurtosis", "⟨|κ|⟩ − 3", "viridis", (0.0, 0.8), lambda v: v - 3.0),
    ]
    fig, axes = plt.subplots(
        len(ensembles),
        len(panels),
        figsize=(5.2 * len(panels), 4.0 * len(ensembles)),
        squeeze=False,
    )
    for row, (name, pairs) in zip(axes, ensembles.items()):
        for ax, (attr, label, cmap, (lo, hi), show) in zip(row, panels):
            frame = pair_frame(show(getattr(pairs, attr)[0]), layers)
            sns.heatmap(
                frame,
                cmap=cmap,
                vmin=lo,
                vmax=hi,
                ax=ax,
                xticklabels=4,
                yticklabels=4,
                cbar_kws={"extend": "both" if lo is not None else "neither"},
            )
            ax.set(title=f"{label}, {name}")
            ax.grid(False)
    fig.suptitle(title)
    fig.tight_layout()
    plt.show()
