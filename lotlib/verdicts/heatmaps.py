"""Figures of the verdicts: the claim-by-model heatmap and the counts per group as bars."""

from __future__ import annotations

import pandas as pd

from .atlas import JUDGED
from .claims import PAPERS
from .names import AGAINST_PAPER, COLORS, VERDICTS


def verdict_heatmap(atlas: pd.DataFrame, column: str = "verdict", ax=None):
    """Claims x models at a glance: one cell per claim and model, colored by the verdict in `column`
    ("verdict": the book's test; "against paper": question 1) and labelled with the point estimate of the value
    that verdict judges (`JUDGED`), claims grouped by paper and chapter."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    words = AGAINST_PAPER if column == "against paper" else VERDICTS
    models = list(dict.fromkeys(atlas["model"]))
    rows = atlas.drop_duplicates("id").sort_values(["paper", "chapter"], kind="stable")
    codes = atlas.pivot(index="id", columns="model", values=column).reindex(
        index=rows["id"], columns=models
    )
    text = atlas.pivot(index="id", columns="model", values=JUDGED[column][1])
    text = text.reindex_like(codes)
    index = codes.apply(lambda values: values.map(words.index))
    if ax is None:
        size = (2.2 + 1.7 * len(models), 0.26 * len(codes) + 1.5)
        ax = plt.subplots(figsize=size)[1]
    sns.heatmap(
        index.astype(float),
        cmap=ListedColormap([COLORS[v] for v in words]),
        vmin=-0.5,
        vmax=len(words) - 0.5,
        annot=text.fillna(""),
        fmt="",
        annot_kws={"fontsize": 6, "color": "white"},
        cbar=False,
        linewidths=0.5,
        linecolor="white",
        ax=ax,
    )
    ax.set_yticks(
        [i + 0.5 for i in range(len(codes))],
        [f"{i}  ({c})" for i, c in zip(rows["id"], rows["chapter"])],
        fontsize=6,
    )
    ax.set(xlabel="", ylabel="")
    ax.xaxis.tick_top()
    # untrained models' names are long: slanted, so that neighbouring columns' names do not overlap
    ax.tick_params(axis="x", labelrotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("left")
    seen = [v for v in words if (atlas[column] == v).any()]
    ax.legend(
        [Patch(color=COLORS[v]) for v in seen],
        seen,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        frameon=False,
    )
    return ax


def verdict_bars(counts: pd.DataFrame, model: str, ax=None):
    """The headline counts of `headline` as one stacked bar per paper and group, colored by verdict."""
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.subplots(figsize=(8, 1.4 + 0.4 * len(counts)))[1]
    labels = [f"{PAPERS.get(p, p)}: {g}" for p, g in counts.index]
    left = pd.Series(0, index=counts.index)
    for name in counts.columns:
        ax.barh(labels, counts[name], left=left, color=COLORS[name], label=name)
        left += counts[name]
    ax.invert_yaxis()
    ax.set(xlabel="claims", title=f"Verdicts on {model}")
    ax.legend(ncols=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return ax
