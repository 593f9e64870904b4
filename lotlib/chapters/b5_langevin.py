"""Chapter B5's figures: the Langevin model's simulated ensembles against the held-out truth."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def langevin_scatter(model, simulated: np.ndarray, n_plot: int, seed: int, title: str):
    """The Langevin samples `(n_h, samples, n_layers + 1, D)` (at most `n_plot` per layer) and the true held-out
    states of a `lotlib.lines_of_thought.langevin.HeldOutLangevin` on u1..u4 of each arrival layer, one row per
    layer, pairs (u1, u2) and (u3, u4)."""
    n = model.n_layers
    fig, axes = plt.subplots(n, 2, figsize=(10, 4 * n), squeeze=False)
    for row, tau in enumerate(range(1, n + 1)):
        basis = model.top_directions(model.t0 + tau)
        true = model.truth[:, tau] @ basis
        sim = simulated[:, :, tau].reshape(-1, model.D) @ basis
        pick = np.random.default_rng(seed).choice(
            len(sim), size=min(n_plot, len(sim)), replace=False
        )
        for col, (i, j) in enumerate([(0, 1), (2, 3)]):
            ax = axes[row, col]
            ax.scatter(
                sim[pick, i],
                sim[pick, j],
                s=2,
                alpha=0.3,
                color="tab:orange",
                label="Langevin",
            )
            ax.scatter(
                true[:, i],
                true[:, j],
                s=2,
                alpha=0.5,
                color="black",
                label="true (held out)",
            )
            ax.set(
                xlabel=f"u{i + 1}",
                ylabel=f"u{j + 1}",
                title=f"t = {model.t0 + tau} (τ = {tau})",
            )
    axes[0, 0].legend(markerscale=5)
    fig.suptitle(title, y=1.0)
    fig.tight_layout()
    return fig


def energy_figure(energy: pd.DataFrame, title: str):
    """The energy distances of `lotlib.lines_of_thought.langevin.energy_distances` against the layer, mean and
    95% CI over seeds, symlog scale."""
    long = energy.drop(columns="scale").melt(
        id_vars=["seed", "layer t"], var_name="prediction", value_name="energy distance"
    )
    fig, ax = plt.subplots(figsize=(7.5, 4))
    sns.lineplot(
        long,
        x="layer t",
        y="energy distance",
        hue="prediction",
        marker="o",
        errorbar=("ci", 95),
        ax=ax,
    )
    ax.set(yscale="symlog", xticks=sorted(energy["layer t"].unique()), title=title)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1, 1))
    return fig


def fokker_planck_figure(by_layer: pd.DataFrame, title: str):
    """The three Fokker-Planck statistics of `lotlib.lines_of_thought.langevin.fokker_planck` per layer and model."""
    columns = [
        "mean error / spread",
        "covariance distance",
        "total variance, predicted / true",
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, column in zip(axes, columns):
        sns.lineplot(
            by_layer,
            x="layer t",
            y=column,
            hue="model",
            marker="o",
            ax=ax,
            legend=ax is axes[0],
        )
        ax.set(
            xticks=sorted(by_layer["layer t"].unique()),
            yscale="linear" if column == columns[0] else "log",
        )
    axes[2].axhline(1.0, color="grey", lw=0.8)
    fig.suptitle(title)
    return fig
