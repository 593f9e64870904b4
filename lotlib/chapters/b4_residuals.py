"""Chapter B4's figures: the residuals of Eq. 1, their variance, correlations and tails."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..lines_of_thought.extrapolation import eq1_residuals
from ..lines_of_thought.residuals import (
    PairLayers,
    PairStatistics,
    coordinate_moments,
    fit_variance,
    pair_frame,
    pair_mask,
    residual_coordinates,
)


def residual_heatmaps(stats, pairs, title: str) -> None:
    """B4: the paper's three panels of a `PairStatistics`: mean `|μ/σ|`, mean ln variance and mean `|excess kurtosis|`
    over coordinates, per pair of layers."""
    panels = [
        (stats.mean_abs_z(), "mean |μ/σ|", "viridis"),
        (stats.mean_log_var(), "mean of ln variance", "magma"),
        (stats.mean_abs_kurtosis(), "mean |excess kurtosis|", "viridis"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2))
    for ax, (values, label, cmap) in zip(axes, panels):
        frame = pair_frame(values, pairs)
        sns.heatmap(frame, cmap=cmap, ax=ax, xticklabels=5, yticklabels=5)
        ax.set(title=label)
    fig.suptitle(title)
    fig.tight_layout()
    plt.show()


def relative_variance_facets(resampled: dict, pairs, title: str) -> None:
    """B4: ln(mean variance) (top) and ln ρ (bottom, ln 2 dashed: a map that knows nothing) of every pair
    against its arrival layer, colored by tau, one column per ensemble of `resampled` (`ResampledPairs`)."""
    t_idx, s_idx = np.nonzero(pairs.all)
    frames = [
        pd.DataFrame(
            {
                "arrival layer t + τ": s_idx,
                "value": values[t_idx, s_idx],
                "τ": s_idx - t_idx,
                "ensemble": name,
                "quantity": label,
            }
        )
        for name, r in resampled.items()
        for label, values in (
            ("ln(mean variance)", r.log_mean_var()[0]),
            ("ln ρ = ln(tr Cov w / tr Cov x(t+τ))", r.log_relative_var()[0]),
        )
    ]
    facets = sns.relplot(
        pd.concat(frames),
        x="arrival layer t + τ",
        y="value",
        hue="τ",
        col="ensemble",
        row="quantity",
        palette="viridis",
        s=12,
        linewidth=0,
        facet_kws={"sharey": "row"},
        height=3.3,
        aspect=1.25,
    )
    for ax in facets.axes[1]:
        ax.axhline(np.log(2), color="crimson", lw=0.8, ls="--")
        ax.axhline(0.0, color="grey", lw=0.8)
    facets.set_titles("{col_name}")
    facets.figure.suptitle(title, y=1.02)
    plt.show()


def noise_pdfs(Y: np.ndarray, S: np.ndarray, t: int, taus: list[int]) -> None:
    """B4: the standardized residual coordinate along the arrival layer's largest singular direction, from
    layer t for each tau of `taus`, against N(0, 1) on a log scale; κ (excess kurtosis) in each title.
    Y `(N, T, k)` from `singular_coordinates`, S `(T, k)` aligned."""
    from scipy.stats import norm

    _, axes = plt.subplots(1, len(taus), figsize=(4 * len(taus), 3.5), sharey=True)
    grid = np.linspace(-6, 6, 200)
    for ax, tau in zip(np.atleast_1d(axes), taus):
        w = residual_coordinates(Y, S, t, tau)[:, int(np.argmax(S[t + tau]))]
        z = (w - w.mean()) / w.std()
        sns.histplot(
            z,
            bins=60,
            binrange=(-6, 6),
            stat="density",
            alpha=0.6,
            ax=ax,
            label="residual",
        )
        ax.plot(grid, norm.pdf(grid), color="crimson", label="N(0, 1)")
        ax.set(
            yscale="log",
            ylim=(1e-4, 1),
            xlabel="standardized residual",
            title=f"t = {t}, τ = {tau}: κ = {float(np.mean(z**4) - 3):.2f}",
        )
    np.atleast_1d(axes)[0].legend()
    plt.show()


def kurtosis_figure(resampled: dict, pairs) -> None:
    """B4: the variance-weighted excess kurtosis κ̄ of the late pairs for each ensemble of `resampled`
    (histograms) and of the model per pair (heatmap)."""
    label = "κ̄ (variance-weighted excess kurtosis)"
    late = f"t ≥ {pairs.early_layers}"
    frame = pd.concat(
        [
            pd.DataFrame({label: r.kurtosis[0][pairs.late], "ensemble": name})
            for name, r in resampled.items()
        ]
    )
    _, axes = plt.subplots(1, 2, figsize=(13, 3.8))
    sns.histplot(
        frame,
        x=label,
        hue="ensemble",
        element="step",
        stat="density",
        common_norm=False,
        ax=axes[0],
    )
    axes[0].set(title=f"pairs with {late}")
    sns.heatmap(
        pair_frame(resampled["model"].kurtosis[0], pairs),
        cmap="viridis",
        ax=axes[1],
        xticklabels=5,
        yticklabels=5,
        cbar_kws={"label": "κ̄"},
    )
    axes[1].set(title="κ̄ of the model by pair")
    plt.show()


def coordinate_variance_figure(var: np.ndarray, pairs, fit: dict, title: str) -> None:
    """B4: per-coordinate residual variance at tau = 1 `var` `(L-1, k)` against the arrival layer 2..L (grey),
    its mean over coordinates and the fitted law alpha e^(lambda (t + tau)) of `fit` (dashed)."""
    arrival = pairs.layers[1:]
    _, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(arrival, var, color="grey", alpha=0.05, lw=0.5)
    ax.plot(arrival, var.mean(1), color="black", lw=2, label="mean over coordinates")
    law = fit["alpha"] * np.exp(fit["lambda"] * arrival)
    ax.plot(arrival, law, "--", color="crimson", label="α e^(λ(t+τ)), ln(mean) fit")
    ax.set(
        yscale="log",
        xlabel="arrival layer t + 1",
        ylabel="residual variance",
        title=title,
    )
    ax.legend()
    plt.show()


def correlation_heatmap(w: np.ndarray, sigma: np.ndarray, n: int, title: str) -> None:
    """B4: correlation matrix of the residual coordinates `w` `(N, k)` along the `n` directions with the
    largest `sigma` `(k,)`."""
    top = np.argsort(sigma)[::-1][:n]
    _, ax = plt.subplots(figsize=(6, 5))
    sns.heatmap(
        np.corrcoef(w[:, top], rowvar=False),
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        square=True,
        ax=ax,
        xticklabels=False,
        yticklabels=False,
    )
    ax.set(title=title, xlabel="coordinate", ylabel="coordinate")
    plt.show()


def gaussian_reference(n: int, k: int, seed: int = 0) -> tuple[float, float]:
    """Mean abs(mu / sigma) and mean abs(excess kurtosis) of a standard Gaussian `(n, k)` sample (seeded):
    what "about zero" means at n pilots."""
    z, _, kurt = coordinate_moments(
        np.random.default_rng(seed).standard_normal((n, k), dtype=np.float32)
    )
    return float(np.mean(np.abs(z))), float(np.mean(np.abs(kurt)))


def moment_table(
    stats: dict[str, PairStatistics | None], pairs: PairLayers
) -> pd.DataFrame:
    """Mean abs(mu / sigma) over all pairs (and its max), mean abs(excess kurtosis) over all, early and
    late departures, one row per basis of `stats` (None skipped)."""
    rows = {}
    for name, s in stats.items():
        if s is None:
            continue
        z, kurt = s.mean_abs_z(), s.mean_abs_kurtosis()
        rows[name] = {
            "mean |μ/σ|": np.mean(z[pairs.all]),
            "max |μ/σ|": np.max(z[pairs.all]),
            "mean |κ|": np.mean(kurt[pairs.all]),
            f"mean |κ|, t < {pairs.early_layers}": np.mean(kurt[pairs.early]),
            f"mean |κ|, t ≥ {pairs.early_layers}": np.mean(kurt[pairs.late]),
        }
    return pd.DataFrame(rows).T


def law_subsets(
    stats: PairStatistics, pairs: PairLayers
) -> dict[tuple[str, str], dict]:
    """`fit_variance` of both conventions ("log_mean": ln(mean variance), "mean_log": mean(ln variance))
    on every subset of `PairLayers.subsets`: (convention, subset) -> fit."""
    conventions = {"log_mean": stats.log_mean_var(), "mean_log": stats.mean_log_var()}
    return {
        (c, s): fit_variance(values, pair_mask(pairs.T, first, last))
        for c, values in conventions.items()
        for s, (_, first, last) in pairs.subsets().items()
    }


def law_subset_table(fits: dict, pairs: PairLayers) -> pd.DataFrame:
    """`law_subsets` as a table: alpha, lambda, lambda L, R², arrival R² and pairs per fit."""
    names = {"log_mean": "ln(mean variance)", "mean_log": "mean(ln variance)"}
    subsets = pairs.subsets()
    return pd.DataFrame(
        [
            {
                "convention": names[c],
                "layers fitted": subsets[s][0],
                "α": f["alpha"],
                "λ": f["lambda"],
                "λ·L": f["lambda"] * pairs.L,
                "R²": f["r2"],
                "arrival R²": f["arrival_r2"],
                "pairs": f["n_pairs"],
            }
            for (c, s), f in fits.items()
        ]
    ).set_index(["convention", "layers fitted"])


def heavy_share_z(stats: PairStatistics, mask: np.ndarray) -> tuple[float, float]:
    """Mean abs(mu / sigma) of the coordinates whose share of their pair's variance is in the top 1%, and of
    the rest, over the pairs in `mask`."""
    share = stats.var[mask] / stats.var[mask].sum(-1, keepdims=True)  # (pairs, k)
    z_abs = np.abs(stats.z[mask])
    heavy = share >= np.quantile(share, 0.99)
    return float(z_abs[heavy].mean()), float(z_abs[~heavy].mean())


def tau1_variances(
    stats: PairStatistics, pairs: PairLayers
) -> tuple[np.ndarray, float]:
    """Per-coordinate residual variance at tau = 1 for arrival layers 2..L, `(L-1, k)`, and the largest
    spread over arrivals of the coordinates' variances, in decades (95th over 5th percentile)."""
    var = np.array([stats.var[t, t + 1] for t in pairs.layers[:-1]])
    spread = np.log10(np.percentile(var, 95, axis=1) / np.percentile(var, 5, axis=1))
    return var, float(spread.max())


def residual_consistency(
    X: np.ndarray, Y: np.ndarray, U: np.ndarray, S: np.ndarray, t: int
) -> tuple[np.ndarray, float]:
    """The residual at t, tau = 1 in the aligned basis of t + 1, `(N, k)` float64, and its largest relative
    difference from the direct Eq. 1 residual (`extrapolation.eq1_residuals`) mapped to that basis."""
    w = residual_coordinates(Y, S, t, 1).astype(np.float64)
    direct = eq1_residuals(X, U, S, t, 1) @ U[t + 1]
    return w, float(np.abs(direct - w).max() / np.abs(w).max())
