"""Chapter B4: the residuals of Eq. 1 scored out of sample against two nulls with the same norm growth (the
law of their variance, offset, tails and correlations), the claim values, and the figures."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from ..lines_of_thought.ensemble import aligned_svd
from ..lines_of_thought.extrapolation import eq1_residuals
from ..lines_of_thought.nulls import shuffled_pilots, structureless_cloud
from ..lines_of_thought.residuals import (
    PairLayers,
    PairStatistics,
    ResampledPairs,
    coordinate_moments,
    fit_laws,
    fit_variance,
    pair_frame,
    pair_mask,
    resampled_pairs,
    residual_coordinates,
    singular_coordinates,
    split_for_bases,
)
from ..stats import (
    Estimate,
    bootstrap_and_jackknife_weights,
    jackknife_estimate,
    percentile_estimate,
)
from ..stats.backend import Device

HELD_OUT = 0.5
"""The share of the pilots whose residuals are scored; the others fit the bases (`residual_nulls`)."""

NULL_ENSEMBLES = ("model", "structureless cloud", "shuffled pilots")
"""The ensembles of `residual_nulls`: the model and its two nulls with the same norm growth."""

QUANTITIES = {  # the law's quantity -> its values per resample `(B, T, T)` and its label
    "log_mean": (lambda r: r.log_mean_var(), "ln(mean variance)"),
    "mean_log": (lambda r: r.mean_log_var, "mean(ln variance)"),
    "relative": (
        lambda r: r.log_relative_var(),
        "ln ρ (relative to the arrival spread)",
    ),
}


def offdiagonal_correlation(W: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Root mean square correlation between distinct coordinates of W `(N, d)` for each row of `weights`
    `(B, N)`: `(B,)`. The mean square is estimated from pairs of distinct pilots (n != m: (z_n . z_m)^2 minus
    its diagonal terms estimates sum_{i != j} rho_ij^2), so independent coordinates give about 0 at any sample
    size (a negative estimate reads as 0). Coordinates are standardized by the whole sample (held fixed)."""
    Z = (W - W.mean(0)) / W.std(0)
    squares = Z**2
    A = (Z @ Z.T) ** 2 - squares @ squares.T  # (N, N)
    pairs = np.einsum("bn,nm,bm->b", weights, A, weights)
    pairs -= (weights**2) @ np.diagonal(A)
    count = weights.sum(1) ** 2 - np.sum(weights**2, 1)
    d = W.shape[1]
    return np.sqrt(np.clip(pairs / count / (d * (d - 1)), 0.0, None))


@dataclass(frozen=True)
class EnsembleClaims:
    """B4's statistics of one ensemble of `ResidualNulls`, each with its interval over the held-out pilots:
    arrival R² and R² of Eq. 2 on ln rho (`*_relative`) and on ln(mean variance) (`*_log_mean`), R² on
    mean(ln variance), lambda L of the three quantities, alpha_rel (geometric mean of rho over the fit pairs),
    the rms offset, the median late kurtosis and the rms correlation between raw coordinates at t_pdf."""

    arrival_r2_relative: Estimate
    r2_relative: Estimate
    arrival_r2_log_mean: Estimate
    r2_log_mean: Estimate
    r2_mean_log: Estimate
    lambda_L_log_mean: Estimate
    lambda_L_mean_log: Estimate
    alpha_relative: Estimate
    lambda_L_relative: Estimate
    mean_offset: Estimate
    kurtosis_late: Estimate
    offdiag_corr_raw: Estimate


@dataclass
class ResidualNulls:
    """The model's scored trajectories X `(N, T, D)` and two nulls with the same norm growth ("structureless
    cloud", "shuffled pilots"), each with its own aligned bases (`bases`: name -> (U, S), fitted on other
    pilots: `residual_nulls`) and its `ResampledPairs` over the same `weights` `(B, N)` of the scored pilots
    (`resampled`, `bootstrap_and_jackknife_weights`): row 0 the sample, rows 1..n_boot bootstrap resamples,
    then the delete-a-group jackknife.

    Intervals as in B5 (`langevin_held_out.fokker_planck`): a statistic that reads 0 when the law holds (the
    offset of the mean, the correlation between coordinates: norms) by its percentile bootstrap (`bootstrap`),
    every other one by its jackknife (`estimate`): on a few dozen heavy-tailed pilots the percentile bootstrap
    of lambda L, alpha_rel and the kurtosis covers the truth less often than its level, while the jackknife's
    variance errs wide (`benchmarks/coverage.py` measures both)."""

    ensembles: dict[str, np.ndarray]
    bases: dict[str, tuple[np.ndarray, np.ndarray]]
    resampled: dict[str, ResampledPairs]
    weights: np.ndarray
    pairs: PairLayers
    n_boot: int

    def estimate(self, values: np.ndarray) -> Estimate:
        """`jackknife_estimate` of a statistic per row of `weights` `(B,)` (row 0: the sample) over the
        pilots."""
        values = np.asarray(values, dtype=np.float64)
        n = self.weights.shape[1]
        return jackknife_estimate(
            values[0], values[1 + self.n_boot :], n, unit="pilots"
        )

    def bootstrap(self, values: np.ndarray) -> Estimate:
        """`percentile_estimate` of a statistic per row `(B,)` from its bootstrap rows, over the pilots."""
        n = self.weights.shape[1]
        return percentile_estimate(values[: 1 + self.n_boot], n, unit="pilots")

    def laws(self) -> dict[str, dict[str, dict[str, np.ndarray]]]:
        """`fit_laws` over the fit pairs of each of `QUANTITIES`, per ensemble, per resample."""
        fit = self.pairs.fit
        return {
            name: {q: fit_laws(values(r), fit) for q, (values, _) in QUANTITIES.items()}
            for name, r in self.resampled.items()
        }

    def law_table(self, laws: dict) -> pd.DataFrame:
        """λ·L, R² and arrival R² of every quantity and ensemble, with their intervals, as text."""
        rows = [
            {
                "ensemble": name,
                "quantity": QUANTITIES[q][1],
                "λ·L": format(self.estimate(fit["lambda"] * self.pairs.L), ".3g"),
                "R²": format(self.estimate(fit["r2"]), ".3f"),
                "arrival R²": format(self.estimate(fit["arrival_r2"]), ".3f"),
            }
            for name, fits in laws.items()
            for q, fit in fits.items()
        ]
        return pd.DataFrame(rows).set_index(["quantity", "ensemble"]).sort_index()

    def rho_by_tau(self) -> dict[str, float]:
        """The model's geometric mean of rho over departures t >= 1 for tau = 1, 2, L/4, L/2."""
        rho = self.resampled["model"].log_relative_var()[0]
        L = self.pairs.L
        return {
            str(tau): float(np.exp(np.nanmean(np.diagonal(rho, tau)[1:])))
            for tau in (1, 2, L // 4, L // 2)
            if tau >= 1
        }

    def claims(self, laws: dict, name: str) -> EnsembleClaims:
        """The `EnsembleClaims` of the ensemble `name`, from its `laws`."""
        law, r, pairs, L = laws[name], self.resampled[name], self.pairs, self.pairs.L
        relative, log_mean, mean_log = law["relative"], law["log_mean"], law["mean_log"]
        offset = np.sqrt(np.clip(r.offset[:, pairs.all].mean(1), 0.0, None))
        residual = eq1_residuals(
            self.ensembles[name], *self.bases[name], pairs.t_pdf, 1
        )
        correlation = offdiagonal_correlation(residual, self.weights[: 1 + self.n_boot])
        return EnsembleClaims(
            arrival_r2_relative=self.estimate(relative["arrival_r2"]),
            r2_relative=self.estimate(relative["r2"]),
            arrival_r2_log_mean=self.estimate(log_mean["arrival_r2"]),
            r2_log_mean=self.estimate(log_mean["r2"]),
            r2_mean_log=self.estimate(mean_log["r2"]),
            lambda_L_log_mean=self.estimate(log_mean["lambda"] * L),
            lambda_L_mean_log=self.estimate(mean_log["lambda"] * L),
            alpha_relative=self.estimate(
                np.exp(r.log_relative_var()[:, pairs.fit].mean(1))
            ),
            lambda_L_relative=self.estimate(relative["lambda"] * L),
            mean_offset=self.bootstrap(offset),
            kurtosis_late=self.estimate(np.median(r.kurtosis[:, pairs.late], axis=1)),
            offdiag_corr_raw=self.bootstrap(correlation),
        )

    def model_values(self, laws: dict) -> dict[str, object]:
        """The model's lambda per layer of both conventions (`lambda_per_layer_*`) and its kurtosis: mean
        over late pairs, median over early ones (None without early pairs) and the departures whose median
        over arrivals exceeds 1."""
        k, pairs = self.resampled["model"].kurtosis, self.pairs
        early = pairs.early
        return {
            "kurtosis_early": self.estimate(np.median(k[:, early], axis=1))
            if early.any()
            else None,
            "kurtosis_late_mean": self.estimate(k[:, pairs.late].mean(1)),
            "kurtosis_heavy_departures": [
                int(t) for t in pairs.layers[:-1] if np.median(k[0, t, t + 1 :]) > 1.0
            ],
            "lambda_per_layer_log_mean": self.estimate(
                laws["model"]["log_mean"]["lambda"]
            ),
            "lambda_per_layer_mean_log": self.estimate(
                laws["model"]["mean_log"]["lambda"]
            ),
        }


def dimensionless_table(claims: dict[str, EnsembleClaims]) -> pd.DataFrame:
    """λ·L of both conventions, α_rel and the λ·L of rho of each ensemble's `EnsembleClaims`, as text with
    their intervals, one column per ensemble."""
    return pd.DataFrame(
        {
            name: {
                "λ·L, ln(mean variance)": format(c.lambda_L_log_mean, ".3g"),
                "λ·L, mean(ln variance)": format(c.lambda_L_mean_log, ".3g"),
                "α_rel (geometric mean of ρ)": format(c.alpha_relative, ".3g"),
                "λ·L of ρ (growth beyond the spread)": format(
                    c.lambda_L_relative, ".3g"
                ),
            }
            for name, c in claims.items()
        }
    )


def claim_values(claims: dict[str, EnsembleClaims]) -> dict[str, Estimate]:
    """The chapter's recorded statistics of the model and both nulls (`NULL_ENSEMBLES`) under their keys."""
    model, cloud, shuffled = (claims[name] for name in NULL_ENSEMBLES)
    return {
        "arrival_r2_relative": model.arrival_r2_relative,
        "r2_relative": model.r2_relative,
        "arrival_r2_log_mean": model.arrival_r2_log_mean,
        "r2_log_mean": model.r2_log_mean,
        "r2_mean_log": model.r2_mean_log,
        "lambda_L_log_mean": model.lambda_L_log_mean,
        "lambda_L_mean_log": model.lambda_L_mean_log,
        "alpha_relative": model.alpha_relative,
        "lambda_L_relative": model.lambda_L_relative,
        "mean_offset": model.mean_offset,
        "kurtosis_late": model.kurtosis_late,
        "offdiag_corr_raw": model.offdiag_corr_raw,
        "arrival_r2_relative_cloud": cloud.arrival_r2_relative,
        "r2_relative_cloud": cloud.r2_relative,
        "arrival_r2_log_mean_cloud": cloud.arrival_r2_log_mean,
        "r2_log_mean_cloud": cloud.r2_log_mean,
        "r2_mean_log_cloud": cloud.r2_mean_log,
        "lambda_L_log_mean_cloud": cloud.lambda_L_log_mean,
        "lambda_L_mean_log_cloud": cloud.lambda_L_mean_log,
        "alpha_relative_cloud": cloud.alpha_relative,
        "lambda_L_relative_cloud": cloud.lambda_L_relative,
        "mean_offset_cloud": cloud.mean_offset,
        "kurtosis_late_cloud": cloud.kurtosis_late,
        "offdiag_corr_raw_cloud": cloud.offdiag_corr_raw,
        "arrival_r2_relative_shuffled": shuffled.arrival_r2_relative,
        "r2_relative_shuffled": shuffled.r2_relative,
        "arrival_r2_log_mean_shuffled": shuffled.arrival_r2_log_mean,
        "r2_log_mean_shuffled": shuffled.r2_log_mean,
        "r2_mean_log_shuffled": shuffled.r2_mean_log,
        "lambda_L_log_mean_shuffled": shuffled.lambda_L_log_mean,
        "lambda_L_mean_log_shuffled": shuffled.lambda_L_mean_log,
        "alpha_relative_shuffled": shuffled.alpha_relative,
        "lambda_L_relative_shuffled": shuffled.lambda_L_relative,
        "mean_offset_shuffled": shuffled.mean_offset,
        "kurtosis_late_shuffled": shuffled.kurtosis_late,
        "offdiag_corr_raw_shuffled": shuffled.offdiag_corr_raw,
    }


def held_out_pairs(
    Z: np.ndarray,
    split: tuple[np.ndarray, np.ndarray],
    layers,
    weights: np.ndarray,
    progress: bool = True,
    device: Device = "cpu",
) -> tuple[tuple[np.ndarray, np.ndarray], ResampledPairs]:
    """Eq. 1's residual scored out of sample: for the pilots `split` = (held, fitted) of Z `(N, T, D)` (as
    `split_for_bases` draws them), aligned bases U `(T, D, k)`, S `(T, k)` fitted on the pilots `fitted`
    (`aligned_svd`: kept, and read back by C3 and C5, which fit the same half) and the `ResampledPairs` of
    the pilots `held` in those bases for every row of `weights` `(B, len(held))`, scored on `device`.
    Returns ((U, S), the resampled pairs)."""
    held, fitted = split
    U, S = aligned_svd(Z[fitted], device)
    Y = singular_coordinates(Z[held], U, device)
    found = resampled_pairs(Y, S, layers, weights, progress=progress, device=device)
    return (U, S), found


def residual_nulls(
    X: np.ndarray,
    pairs: PairLayers,
    n_boot: int,
    seed: int = 0,
    model: str = "the model",
    device: Device = "cpu",
) -> ResidualNulls:
    """`ResidualNulls` of trajectories X `(N, T, D)` and its nulls (`structureless_cloud`, `shuffled_pilots`,
    seeded), each scored out of sample (`held_out_pairs`): bases fitted on a seeded share 1 - `HELD_OUT` of
    its pilots (the same split for all three), residuals of the others, over the same rows of weights of
    the held-out pilots (`bootstrap_and_jackknife_weights`), scored on `device`. `ResidualNulls.ensembles`
    keeps the held-out pilots. The intervals hold the bases fixed (`resampled_pairs`), and scoring out of
    sample leaves nothing fitted out of them: the residuals are those of pilots the bases never saw, so each
    interval is about these bases."""
    held, fitted = split = split_for_bases(len(X), X.shape[2], HELD_OUT, seed, model)
    weights = bootstrap_and_jackknife_weights(len(held), n_boot, seed)
    nulls = (X, structureless_cloud(X, seed), shuffled_pilots(X, seed))
    bases, resampled = {}, {}
    for name, Z in zip(NULL_ENSEMBLES, nulls):
        bases[name], resampled[name] = held_out_pairs(
            Z, split, pairs.layers, weights, device=device
        )
    scored = {name: Z[held] for name, Z in zip(NULL_ENSEMBLES, nulls)}
    return ResidualNulls(scored, bases, resampled, weights, pairs, n_boot)


def law_subset_values(fits: dict) -> dict[str, float]:
    """The recorded point values of `law_subsets`: alpha and lambda of both conventions on the default pairs,
    and on every other subset as `<alpha|lambda>_<convention>_<subset>`."""
    lm, ml = fits["log_mean", "default"], fits["mean_log", "default"]
    return {
        "alpha_log_mean": lm["alpha"],
        "lambda_log_mean": lm["lambda"],
        "alpha_mean_log": ml["alpha"],
        "lambda_mean_log": ml["lambda"],
        **{
            f"{name}_{c}_{s}": f[name]
            for (c, s), f in fits.items()
            if s != "default"
            for name in ("alpha", "lambda")
        },
    }


def residual_heatmaps(stats, pairs, title: str) -> Figure:
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
    return fig


def relative_variance_facets(resampled: dict, pairs, title: str) -> Figure:
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
    return facets.figure


def noise_pdfs(Y: np.ndarray, S: np.ndarray, t: int, taus: list[int]) -> Figure:
    """B4: the standardized residual coordinate along the arrival layer's largest singular direction, from
    layer t for each tau of `taus`, against N(0, 1) on a log scale; κ (excess kurtosis) in each title.
    Y `(N, T, k)` from `singular_coordinates`, S `(T, k)` aligned."""
    from scipy.stats import norm

    fig, axes = plt.subplots(1, len(taus), figsize=(4 * len(taus), 3.5), sharey=True)
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
    return fig


def kurtosis_figure(resampled: dict, pairs) -> Figure:
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
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8))
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
    return fig


def coordinate_variance_figure(var: np.ndarray, pairs, fit: dict, title: str) -> Figure:
    """B4: per-coordinate residual variance at tau = 1 `var` `(L-1, k)` against the arrival layer 2..L (grey),
    its mean over coordinates and the fitted law alpha e^(lambda (t + tau)) of `fit` (dashed)."""
    arrival = pairs.layers[1:]
    fig, ax = plt.subplots(figsize=(8, 4.5))
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
    return fig


def correlation_heatmap(w: np.ndarray, sigma: np.ndarray, n: int, title: str) -> Figure:
    """B4: correlation matrix of the residual coordinates `w` `(N, k)` along the `n` directions with the
    largest `sigma` `(k,)`."""
    top = np.argsort(sigma)[::-1][:n]
    fig, ax = plt.subplots(figsize=(6, 5))
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
    return fig


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
