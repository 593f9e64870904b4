"""Chapter B5's figures: the Langevin model's simulated ensembles against the held-out truth."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..lines_of_thought.extrapolation import extrapolate

if TYPE_CHECKING:
    pass
from ..lines_of_thought.langevin import (
    ENERGY_COLUMNS,
    SCHEMES,
    EnergyMargins,
    HeldOutLangevin,
    fp_stats,
    matched_noise,
    moments,
    noiseless_map,
    propagators,
    sigma_spline,
    simulate,
    steps,
)


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


def scheme_error(model: HeldOutLangevin) -> float:
    """Median relative difference at t0 + n_layers between the noiseless scheme and Eq. 1 on the held-out pilots."""
    drift = simulate(model.X[model.held, model.t0], model.plan, lambda t: 0.0)[:, 0, -1]
    eq1 = noiseless_map(model)[:, -1]
    return float(
        np.median(np.linalg.norm(drift - eq1, axis=-1) / np.linalg.norm(eq1, axis=-1))
    )


def residual_shares(model: HeldOutLangevin) -> pd.DataFrame:
    """tr Cov(x~, w) / tr Cov(w) for Eq. 1 from t0 over tau = 1..n_layers (x~ the extrapolation, w the residual),
    on the fitted and on the held-out pilots: 0 for noise independent of the state, -1/2 when the map already
    has the right spread."""

    def share(Z: np.ndarray, tau: int) -> float:
        tilde = extrapolate(Z, model.U, model.S, model.t0, tau)
        w = Z[:, model.t0 + tau].astype(np.float64) - tilde
        tc, wc = tilde - tilde.mean(0), w - w.mean(0)
        return float(np.sum(tc * wc) / np.sum(wc**2))

    taus = range(1, model.n_layers + 1)
    return pd.DataFrame(
        {
            name: [share(model.X[rows], tau) for tau in taus]
            for name, rows in (("fitted", model.fitted), ("held out", model.held))
        },
        index=pd.Index(list(taus), name="τ"),
    )


def energy_summary(energy: pd.DataFrame, langevin: str, margins: EnergyMargins) -> dict:
    """The margins of the Langevin model over constant-variance noise and over the noiseless map with their
    bootstrap intervals (`energy_margins`), and each mean energy distance at the last layer of `energy`
    (`energy_distances`, column `langevin` for the Langevin model), under the chapter's summary keys."""
    last = energy[energy["layer t"] == energy["layer t"].max()]
    columns = {"langevin": langevin, **ENERGY_COLUMNS}
    return {
        "energy_margin_over_constant": margins.estimate(ENERGY_COLUMNS["constant"]),
        "energy_margin_over_linear": margins.estimate(ENERGY_COLUMNS["linear"]),
        **{
            f"energy_{key}_last": float(last[name].mean())
            for key, name in columns.items()
        },
    }


def scheme_variants(model: HeldOutLangevin) -> pd.DataFrame:
    """The Fokker-Planck moments at t0 + n_layers for the four combinations of scheme ("euler", "exact") and
    spline (of sigma or of ln sigma), each with its own matched noise when the noise is "eq2" (the same rotations).
    One row per combination, columns `FP_STATS`."""
    from dataclasses import replace

    D, truth, chosen = model.D, model.truth, model.rates[model.noise]
    rows = []
    for scheme in SCHEMES:
        for log in (False, True):
            flow = replace(
                model.flow, sigma=sigma_spline(model.S, model.layers, log=log)
            )
            plan = steps(flow, model.t0, model.n_layers, model.plan.dt, scheme)
            rate = (
                matched_noise(plan, model.eq2_variance)
                if model.noise == "eq2"
                else chosen
            )
            added = moments(np.zeros(D), np.zeros((D, D)), plan, rate)[1][-1]
            stats = fp_stats(
                truth[:, 0],
                truth[:, -1],
                propagators(plan)[-1],
                added,
                np.ones((1, len(truth))),
            )
            rows.append(
                {
                    "scheme": scheme,
                    "spline": "ln sigma" if log else "sigma",
                    **{k: float(v[0]) for k, v in stats.items()},
                }
            )
    return pd.DataFrame(rows).set_index(["scheme", "spline"])
