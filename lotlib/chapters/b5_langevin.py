"""Chapter B5's study and figures: the Langevin model's simulated ensembles against the held-out truth."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from ..lines_of_thought.extrapolation import extrapolate
from ..lines_of_thought.langevin import (
    SCHEMES,
    energy_distance,
    matched_noise,
    moments,
    propagators,
    sigma_spline,
    simulate,
    steps,
)
from ..lines_of_thought.langevin_held_out import (
    ENERGY_COLUMNS,
    FP_STATS,
    EnergyMargins,
    FokkerPlanck,
    HeldOutLangevin,
    fp_stats,
    noiseless_map,
)
from ..stats import Estimate


def top_share(model: HeldOutLangevin, k: int = 4) -> float:
    """Share of the held-out truth's total variance at t0 + n_layers that lies along u1..uk of that layer
    (`HeldOutLangevin.top_directions`, fitted pilots)."""
    true = model.truth[:, -1]
    centered = true - true.mean(0)
    along = centered @ model.top_directions(model.t0 + model.n_layers, k)
    return float(np.sum(along**2) / np.sum(centered**2))


def sigma_zero_crossings(model: HeldOutLangevin) -> int:
    """How many singular values a spline of sigma (the authors') takes through zero on [t0, t0 + n_layers]."""
    spline = sigma_spline(model.S, model.layers, log=False)
    return spline.zero_crossings(model.t0, model.t0 + model.n_layers)


def fit_summary(model: HeldOutLangevin) -> dict:
    """The split, the noise law, the rates and the flow's corrections, under the chapter's summary keys."""
    lam, L, rates = model.law["lambda"], model.X.shape[1] - 1, rate_table(model)
    return {
        "n_fitted": len(model.fitted),
        "n_held_out": len(model.held),
        "n_layers": L,
        "d_model": model.D,
        "t_start": model.t0,
        "layers_simulated": model.n_layers,
        "noise": model.noise,
        "alpha": model.law["alpha"],
        "lambda": lam,
        "lambda_L_held_out": lam * L,
        "r2_eq2": model.law["r2"],
        "r2_accumulated": model.accumulated["r2"],
        "paper_rate_share_first_layer": float(1 - np.exp(-lam)),
        "rate_eq2_by_layer": rates["eq2"].tolist(),
        "rate_paper_by_layer": rates["paper"].tolist(),
        "flipped_layers": sum(c is not None for c in model.flow.flipped.values()),
        "sigma_spline_zero_crossings": sigma_zero_crossings(model),
    }


def rate_table(model: HeldOutLangevin) -> pd.DataFrame:
    """The rate B^2 of every noise over each simulated layer [t, t+1]."""
    return pd.DataFrame(
        {
            name: [float(r(t)) for t in model.arrivals[:-1]]
            for name, r in model.rates.items()
        },
        index=pd.Index([f"[{t}, {t + 1}]" for t in model.arrivals[:-1]], name="layer"),
    )


def turn_table(model: HeldOutLangevin) -> pd.DataFrame:
    """Median and largest turn angle (degrees) of the rotation between consecutive bases, per interval."""
    return pd.DataFrame(
        {
            "median turn (deg)": [
                np.degrees(np.median(np.abs(r.theta)))
                for r in model.flow.rotations.values()
            ],
            "largest turn (deg)": [
                np.degrees(np.max(np.abs(r.theta)))
                for r in model.flow.rotations.values()
            ],
        },
        index=pd.Index(
            [f"[{t}, {t + 1}]" for t in model.flow.rotations], name="interval"
        ),
    ).round(1)


def fokker_planck_table(fp: FokkerPlanck) -> pd.DataFrame:
    """`fp.last` as a table of texts, one row per model."""
    return pd.DataFrame(
        {
            name: {k: format(v, ".3g") for k, v in s.items()}
            for name, s in fp.last.items()
        }
    ).T


def energy_distances(
    model: HeldOutLangevin, n_samples: int, n_distance: int, n_seeds: int, seed: int = 0
) -> pd.DataFrame:
    """Energy distance in the full space between the true held-out ensemble at each layer t0 + tau and: the
    Langevin simulation, the constant-variance noise, the noiseless linear map, and a second half of the truth
    (the floor); with the ensemble's scale, the mean `|x - x'|` (300 points). One row per seed and layer; each seed
    draws new noise, subsamples and halves."""
    X0 = model.X[model.held, model.t0]
    noiseless = noiseless_map(model)
    truth, rows = model.truth, []
    for run in range(n_seeds):
        rng = np.random.default_rng(seed + run)
        distance = partial(energy_distance, n=n_distance, seed=seed + run)
        sims = {
            f"Langevin (noise {model.noise})": simulate(
                X0, model.plan, model.rates[model.noise], n_samples, seed=seed + run
            ),
            ENERGY_COLUMNS["constant"]: simulate(
                X0, model.plan, model.rates["constant"], n_samples, seed=seed + run
            ),
        }
        for tau in range(1, model.n_layers + 1):
            true = truth[:, tau]
            halves = np.array_split(rng.permutation(len(true)), 2)
            row = {
                name: distance(Z[:, :, tau].reshape(-1, model.D), true)
                for name, Z in sims.items()
            }
            row[ENERGY_COLUMNS["linear"]] = distance(noiseless[:, tau], true)
            row[ENERGY_COLUMNS["floor"]] = distance(true[halves[0]], true[halves[1]])
            few = true[rng.choice(len(true), size=min(300, len(true)), replace=False)]
            row["scale"] = float(
                np.mean(np.linalg.norm(few[:, None] - few[None], axis=-1))
            )
            rows.append({"seed": run, "layer t": int(model.t0 + tau), **row})
    return pd.DataFrame(rows)


def langevin_scatter(
    model: HeldOutLangevin, simulated: np.ndarray, n_plot: int, seed: int, title: str
):
    """The Langevin samples `(n_h, samples, n_layers + 1, D)` (at most `n_plot` per layer) and the true held-out
    states of a `lotlib.lines_of_thought.langevin_held_out.HeldOutLangevin` on u1..u4 of each arrival layer, one row per
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


def energy_figure(energy: pd.DataFrame, title: str) -> Figure:
    """The energy distances of `energy_distances` against the layer, mean and
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


def fokker_planck_figure(by_layer: pd.DataFrame, title: str) -> Figure:
    """The three Fokker-Planck statistics of `lotlib.lines_of_thought.langevin_held_out.fokker_planck` per layer and model."""
    columns = FP_STATS
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
    mean = {name: float(last[column].mean()) for name, column in ENERGY_COLUMNS.items()}
    return {
        "energy_margin_over_constant": margins.estimate(ENERGY_COLUMNS["constant"]),
        "energy_margin_over_linear": margins.estimate(ENERGY_COLUMNS["linear"]),
        "energy_langevin_last": float(last[langevin].mean()),
        "energy_constant_last": mean["constant"],
        "energy_linear_last": mean["linear"],
        "energy_floor_last": mean["floor"],
    }


def variance_ratio_values(
    ratios: dict[str, dict[str, Estimate]],
) -> dict[str, Estimate]:
    """The total-variance ratios at the last simulated layer (`variance_ratios` of `predictions`, in its order:
    the chosen noise, the other noise, constant-variance noise, the noiseless map), under the chapter's keys."""
    langevin, other, _, linear = ratios.values()
    return {
        "variance_ratio_top4_langevin_last": langevin["u1..u4"],
        "variance_ratio_all_langevin_last": langevin["all D"],
        "variance_ratio_all_other_noise_last": other["all D"],
        "variance_ratio_all_linear_last": linear["all D"],
    }


def fokker_planck_values(fp: FokkerPlanck, langevin: str) -> dict[str, object]:
    """The Langevin model's (`langevin`, a key of `fp.last`) Fokker-Planck estimates, the noiseless drift's
    covariance distance and the sample check, under the chapter's keys."""
    mean_error, cov_distance, variance_ratio = FP_STATS
    lang = fp.last[langevin]
    return {
        "fp_mean_error_last": lang[mean_error],
        "fp_cov_distance_last": lang[cov_distance],
        "fp_variance_ratio_last": lang[variance_ratio],
        "fp_cov_distance_noiseless_last": fp.last["noiseless drift"][cov_distance],
        "fp_cov_distance_fitted_vs_held_out": fp.sample_check,
    }


def scheme_variant_values(variants: pd.DataFrame) -> dict[str, float]:
    """The total-variance ratio of each scheme and spline of `scheme_variants`, under the chapter's keys."""
    ratio = variants["total variance, predicted / true"]
    return {
        "variance_ratio_euler_sigma": ratio["euler", "sigma"],
        "variance_ratio_euler_log": ratio["euler", "ln sigma"],
        "variance_ratio_exact_sigma": ratio["exact", "sigma"],
        "variance_ratio_exact_log": ratio["exact", "ln sigma"],
    }


def scheme_variants(model: HeldOutLangevin) -> pd.DataFrame:
    """The Fokker-Planck moments at t0 + n_layers for the four combinations of scheme ("euler", "exact") and
    spline (of sigma or of ln sigma), each with its own matched noise when the noise is "eq2" (the same rotations).
    One row per combination, columns `FP_STATS`."""
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
