"""Figures of Part II (Lines of Thought): each takes measured arrays and returns or draws one figure in the
book's theme (`lotlib.plots.apply_theme`), so that a chapter's cell is the one call a reader would copy."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

# --- B1 lines of thought, B2 ensemble SVD, C3 continuous lines -----------------------------------------


def show_paths(
    P: np.ndarray, layers: np.ndarray, title: str, axis_names=("u1", "u2", "u3")
) -> None:
    """B1: trajectories `P` `(N, T, 3)` drawn twice, rotatable (`plots.paths_3d`) and static
    (`plots.paths_static`), points colored by `layers` `(T,)`."""
    from .. import plots

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


def angle_maps(angles: np.ndarray, title: str) -> None:
    """B2: one L x L map per direction of the angles `(n, T, T)` (degrees) between layers t1 and t2."""
    T = angles.shape[1]
    fig, axes = plt.subplots(1, len(angles), figsize=(15, 3.8), constrained_layout=True)
    for i, ax in enumerate(axes):
        sns.heatmap(
            angles[i],
            vmin=0,
            vmax=90,
            cmap="magma",
            square=True,
            ax=ax,
            cbar=i == len(angles) - 1,
            cbar_kws={"label": "angle (degrees)"},
            xticklabels=max(1, T // 6),
            yticklabels=max(1, T // 6),
        )
        ax.invert_yaxis()
        ylabel = "layer t1" if i == 0 else None
        ax.set(title=f"u{i + 1}", xlabel="layer t2", ylabel=ylabel)
    fig.suptitle(title)
    plt.show()


def turning_table(turning) -> pd.DataFrame:
    """B2: the readings of a `Turning` (`ensemble.basis_turning`), one row per direction u_i, in degrees."""
    L = turning.angles.shape[1] - 1
    return pd.DataFrame(
        {
            f"largest rank, t = 1..{L}": turning.top,
            f"median angle t → t+1 (t = 1..{L - 1})": np.median(turning.step, axis=1),
            f"u_i({L // 2}) vs u_i({L})": turning.middle_to_last,
            "u_i(0) vs u_i(1) (embedding)": turning.embedding,
            f"u_i({L - 1}) vs u_i({L}) (last step)": turning.last_step,
        },
        index=[f"u{i + 1}" for i in range(len(turning.top))],
    ).round(1)


def spectra_figure(S: np.ndarray, title: str) -> None:
    """B2: the sorted singular values `(T, k)` of every layer on log-log axes, colored by layer."""
    from matplotlib import cm, colors

    T, k = S.shape
    index = np.arange(1, k + 1)
    spectra = pd.DataFrame(
        {
            "index i": np.tile(index, T),
            "singular value σ_i(t)": S.ravel(),
            "layer t": np.repeat(np.arange(T), k),
        }
    )
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(
        spectra,
        x="index i",
        y="singular value σ_i(t)",
        hue="layer t",
        palette="viridis",
        legend=False,
        lw=1,
        ax=ax,
    )
    ax.set(xscale="log", yscale="log", title=title)
    mappable = cm.ScalarMappable(norm=colors.Normalize(0, T - 1), cmap="viridis")
    fig.colorbar(mappable, ax=ax, label="layer t")
    plt.show()


PROTOCOL_LABELS = {
    "last layer": "last layer only",
    "every layer": "every layer, propagated",
}


def truncation_curves(
    protocols: dict, d: int, model: str, n_boot: int = 2000, seed: int = 0
) -> None:
    """B2: mean KL(p_K || p) and top-`top` overlap against K for each protocol of `protocols` (name ->
    `Truncation`, `truncation.truncation_protocols`), K = d left out, with 95% bootstrap bands over
    pilots; the paper's K = d/4 and 2.5 of 5 marked."""
    top = next(iter(protocols.values())).top
    kl_name, overlap_name = "KL(p_K ‖ p) (nats)", f"top-{top} tokens shared with p"
    scores = pd.concat(
        [
            pd.DataFrame(
                {
                    "K": np.repeat(result.ks[:-1], result.kl.shape[1]),
                    kl_name: result.kl[:-1].ravel(),
                    overlap_name: result.overlap[:-1].ravel(),
                    "protocol": f"{PROTOCOL_LABELS[name]} ({result.kl.shape[1]} pilots)",
                }
            )
            for name, result in protocols.items()
        ]
    )
    _, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for ax, measure in zip(axes, [kl_name, overlap_name]):
        sns.lineplot(
            scores,
            x="K",
            y=measure,
            hue="protocol",
            marker="o",
            errorbar=("ci", 95),
            n_boot=n_boot,
            seed=seed,
            ax=ax,
        )
        ax.axvline(d // 4, color="grey", ls=":", label="K = D/4")
        ax.set(xscale="log", title=f"{measure.split(' (')[0]}, {model}, D = {d}")
    axes[0].set_yscale("log")
    axes[1].axhline(2.5, color="k", ls="--", lw=1, label="paper: 2.5 of 5 at K = D/4")
    axes[1].legend(fontsize=8)
    plt.show()


def truncation_table(found: dict, random: dict, top: int = 5) -> pd.DataFrame:
    """B2: the authors' numbers per protocol (`found`: name -> `truncation.truncation_criteria`), for the
    random-directions null (`random`) and as the paper gives them for GPT-2 medium."""
    paper = {
        "kl_drop": "≈ 0.1",
        "kl_quarter_d": "≈ 0.5 nats",
        "overlap_quarter_d": "≈ 2.5 of 5",
        "k0_over_d": "0.25",
    }
    columns = {**found, "random directions (null)": random}
    table = pd.DataFrame(
        {
            **{n: {k: format(v) for k, v in c.items()} for n, c in columns.items()},
            "paper (GPT-2 medium)": paper,
        }
    )
    table.index = [
        "KL(D/4) / KL(1)",
        "KL at D/4 (nats)",
        f"top-{top} overlap at D/4",
        "K0 / D (KL down to a tenth)",
    ]
    return table


def _with_breaks(P: np.ndarray) -> np.ndarray:
    """Segments `(n_seg, m, 3)` as one polyline `(n_seg * (m + 1), 3)` with a gap between segments."""
    return np.concatenate([P, np.full((len(P), 1, 3), np.nan)], axis=1).reshape(-1, 3)


def continuous_lines(
    X: np.ndarray,
    pilots: np.ndarray,
    paths: np.ndarray,
    bridged: np.ndarray,
    basis: np.ndarray,
    layers: np.ndarray,
    title: str,
) -> None:
    """C3: continuous lines of thought drawn twice, rotatable (plotly) and static: the bridged paths
    (solid), the flow segments (dotted) ending at crosses where the flow lands, and the true positions
    colored by layer. X `(N, T, D)` the trajectories, pilots `(n,)` those drawn; paths, bridged `(n, n_seg, m, D)`
    (`continuous.restarted_paths`, `bridged_paths`); basis `(D, 3)` the axes."""
    import matplotlib
    import plotly.graph_objects as go

    from .. import plots

    true = X[pilots][:, layers] @ basis  # (n, len(layers), 3)
    paths, bridged = paths @ basis, bridged @ basis
    colors = [
        matplotlib.colors.to_hex(c)
        for c in matplotlib.colormaps["viridis"](np.linspace(0, 1, len(layers)))
    ]
    fig = go.Figure()
    ax = plt.figure(figsize=(8, 7)).add_subplot(projection="3d")
    for n in range(len(true)):
        curve, dotted = bridged[n].reshape(-1, 3), _with_breaks(paths[n])
        lands = paths[n, :, -1]
        fig.add_trace(
            go.Scatter3d(
                **dict(zip("xyz", curve.T)),
                mode="lines",
                line={"width": 4},
                name=f"pilot {pilots[n]}: bridged path",
            )
        )
        fig.add_trace(
            go.Scatter3d(
                **dict(zip("xyz", dotted.T)),
                mode="lines",
                showlegend=False,
                line={"width": 2, "dash": "dot", "color": "grey"},
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter3d(
                **dict(zip("xyz", true[n].T)),
                mode="markers",
                showlegend=False,
                marker={"size": 3, "color": colors},
                text=[f"t = {t}" for t in layers],
            )
        )
        fig.add_trace(
            go.Scatter3d(
                **dict(zip("xyz", lands.T)),
                mode="markers",
                showlegend=False,
                marker={"size": 2, "symbol": "x", "color": "black"},
            )
        )
        ax.plot(*curve.T, lw=1.2)
        ax.plot(*dotted.T, ":", color="grey", lw=0.8)
        ax.scatter(*true[n].T, c=layers, cmap="viridis", s=10, depthshade=False)
        ax.scatter(*lands.T, marker="x", color="black", s=8, depthshade=False)
    fig.update_layout(
        title=title,
        height=650,
        margin={"l": 0, "r": 0, "t": 40, "b": 0},
        scene={"xaxis_title": "u1", "yaxis_title": "u2", "zaxis_title": "u3"},
    )
    plots.show(fig)
    ax.set(xlabel="u1", ylabel="u2", zlabel="u3", title=f"{title} (static view)")
    plt.show()


def medians_by_layer(
    curves: dict[str, np.ndarray], arrival: np.ndarray, ylabel: str, title: str
) -> None:
    """C3: per arrival layer t + 1 `(n_seg,)`, the median and quartiles over pilots of each curve of
    `curves` (name -> `(N, n_seg)`), with a grey line at 1."""
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "arrival layer t + 1": np.tile(arrival, len(values)),
                    ylabel: values.ravel(),
                    "ratio": name,
                }
            )
            for name, values in curves.items()
        ]
    )
    _, ax = plt.subplots(figsize=(8, 4))
    sns.lineplot(
        frame,
        x="arrival layer t + 1",
        y=ylabel,
        hue="ratio" if len(curves) > 1 else None,
        estimator="median",
        errorbar=("pi", 50),
        marker="o",
        ax=ax,
    )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set(title=title)
    plt.show()


def stability_figure(overlap: np.ndarray, partial_gap: dict[int, float]) -> None:
    """C3: the median overlap `|u_i(t).u_i(t+1)|` by rank of sigma (`overlap` `(n_seg, D)`), and the median
    landing gap / true step of the partial flow against the k directions it maps (`partial_gap`, k -> median;
    k = 0, staying put, scores 1)."""
    D = overlap.shape[1]
    _, axes = plt.subplots(1, 2, figsize=(13, 4))
    axes[0].plot(np.arange(1, D + 1), np.median(overlap, axis=0))
    axes[0].set(
        xscale="log",
        xlabel="rank of σ(t)",
        ylabel="|u_i(t) · u_i(t+1)| (median over layers)",
        title="Stability of the aligned directions",
    )
    ks, gaps = [0, *partial_gap], [1.0, *partial_gap.values()]
    axes[1].plot(ks, gaps, marker="o")
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set(
        xscale="symlog",
        xlim=(0, 1.5 * D),
        xlabel="k directions mapped by Eq. 1 (the rest stays put)",
        ylabel="median gap / true step",
        title="Landing gap of a partial flow",
    )
    plt.show()


# --- B3 extrapolation, B4 residuals -------------------------------------------------------------------


def extrapolation_grid(study, starts, taus, pilots: np.ndarray, title: str) -> None:
    """B3: true x(t+tau) and Eq. 1's x~(t, tau) of `pilots` on u2, u3 of the arrival layer, one panel per
    start t of `starts` (rows) and tau of `taus` (columns) of a `HeldOutBases` `study`."""
    fig, axes = plt.subplots(
        len(starts),
        len(taus),
        figsize=(3.2 * len(taus), 3.0 * len(starts)),
        squeeze=False,
        constrained_layout=True,
    )
    for (row, t), (col, tau) in itertools.product(enumerate(starts), enumerate(taus)):
        ax = axes[row, col]
        if t + tau > study.L:
            ax.axis("off")
            text = f"t + τ = {t + tau} > L"
            ax.text(0.5, 0.5, text, ha="center", color="grey", transform=ax.transAxes)
            continue
        plane = study.directions(t + tau, slice(1, 3))
        true = study.states(pilots, t + tau) @ plane
        guess = study.extrapolate(pilots, t, tau) @ plane
        ax.scatter(*true.T, s=3, alpha=0.5, label="true x(t+τ)")
        ax.scatter(*guess.T, s=3, alpha=0.5, label="extrapolated x̃(t,τ)")
        ax.set_title(f"t = {t}, τ = {tau}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set(
            ylabel="u3" if col == 0 else "",
            xlabel="u2" if row == len(starts) - 1 else "",
        )
    axes[0, 0].legend(fontsize=7, markerscale=3)
    fig.suptitle(title)
    plt.show()


def prediction_error_figure(errors, n_boot: int, seed: int, title: str) -> None:
    """B3: each prediction's distance to the true state over the mean state norm against tau, from
    `PredictionErrors`, with 95% bootstrap bands over held-out pilots."""
    y = "‖error‖ / mean ‖x(t+τ)‖"
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "τ": np.repeat(errors.taus, d.shape[1]),
                    "prediction": name,
                    y: (d / errors.state_norm[:, None]).ravel(),
                }
            )
            for name, d in errors.distances.items()
        ]
    )
    _, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(
        frame,
        x="τ",
        y=y,
        hue="prediction",
        marker="o",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        ax=ax,
    )
    ax.set(title=title)
    plt.show()


def svm_figure(curves: dict, true_vs_true: np.ndarray, taus, title: str) -> None:
    """B3: SVM accuracy against tau for each curve of `curves` (`svm_by_tau`), the mean of `true_vs_true`
    (grey line) and the paper's two values for GPT-2 medium (crosses)."""
    _, ax = plt.subplots(figsize=(7, 4))
    frame = pd.DataFrame(curves, index=pd.Index(taus, name="τ"))
    sns.lineplot(frame, markers=True, dashes=False, ax=ax)
    ax.axhline(
        true_vs_true.mean(), color="grey", ls=":", label="true vs true, other pilots"
    )
    ax.plot([1, 10], [0.505, 0.60], "kx", ms=9, mew=2, label="paper (GPT-2 medium)")
    ax.set(xlabel="τ", ylabel="5-fold accuracy", ylim=(0.3, 1.02), title=title)
    ax.legend(fontsize=8, loc="center right")
    plt.show()


def pair_frame(values: np.ndarray, pairs) -> pd.DataFrame:
    """B4: a `(T, T)` pair statistic over `PairLayers.all` as a heatmap table: departure t in rows (top:
    last), arrival t + tau in columns."""
    layers = pairs.layers
    shown = np.where(pairs.all, values, np.nan)[1 : pairs.L, 1:]
    return pd.DataFrame(
        shown,
        index=pd.Index(layers[:-1], name="departure layer t"),
        columns=pd.Index(layers, name="arrival layer t + τ"),
    ).iloc[::-1]


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

    from .residuals import residual_coordinates

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


# --- B5 Langevin, C4 null tests, C5 other models -------------------------------------------------------


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


def separability_figure(table: pd.DataFrame, title: str):
    """Test accuracy against the layer per pair of ensembles (`Separability.table`), band: 95% CI over splits."""
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.lineplot(
        table,
        x="layer t",
        y="test accuracy",
        hue="pilots",
        style="pilots",
        markers=True,
        errorbar=("ci", 95),
        ax=ax,
    )
    ax.axhline(0.5, color="grey", ls=":")
    ax.legend(loc="lower right", fontsize=8)
    ax.set(ylim=(0.15, 1.03), title=title)
    return fig


def path_shapes_figure(shapes, title: str):
    """Histogram of the straightness per model and the coherence of steps per layer with its bootstrap band, from
    `lotlib.lines_of_thought.null_tests.PathShapes`; dotted: a random walk and independent directions."""
    N, L = (
        len(next(iter(shapes.straight.values()))),
        next(iter(shapes.coherence.values())).shape[1] + 1,
    )
    step_layers = np.arange(1, L)
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    rows = [
        {"straightness": v, "model": name}
        for name, s in shapes.straight.items()
        for v in s
    ]
    sns.histplot(
        pd.DataFrame(rows),
        x="straightness",
        hue="model",
        bins=40,
        binrange=(0, 1),
        ax=axes[0],
    )
    axes[0].axvline(
        1 / np.sqrt(L - 1), color="grey", ls=":", label="random walk, 1/√(L−1)"
    )
    for name, c in shapes.coherence.items():
        axes[1].plot(step_layers, c[0], marker="o", label=name)
        axes[1].fill_between(
            step_layers, *np.quantile(c[1:], [0.025, 0.975], axis=0), alpha=0.25
        )
    axes[1].axhline(
        1 / np.sqrt(N), color="grey", ls=":", label="independent directions, 1/√N"
    )
    axes[0].set(
        xlabel="‖x(L) − x(1)‖ / path length",
        ylabel="pilots",
        title="Straightness (full space)",
    )
    axes[1].set(
        xlabel="step t → t+1",
        ylabel="‖mean unit step‖",
        title="Parallel steps (band: 95% bootstrap over pilots)",
        ylim=(0, 1.02),
    )
    axes[1].legend(fontsize=8)
    fig.suptitle(title)
    return fig


def noise_law_pairs_figure(law: dict[str, dict], model: str):
    """ln(mean variance) with the fit of Eq. 2 (top) and ln(relative variance) (bottom) of every pair against the
    arrival layer, colored by departure, one column per model (`compare_noise_laws`)."""
    from .residuals import pair_mask

    T = next(iter(law.values()))["log_var"].shape[0]
    L = T - 1
    t_idx, s_idx = np.nonzero(pair_mask(T, 1, L))
    fig, axes = plt.subplots(
        2, len(law), figsize=(6.5 * len(law), 8), sharex=True, squeeze=False
    )
    for col, (name, entry) in enumerate(law.items()):
        for row, (key, label) in enumerate(
            [
                ("log_var", "ln(mean variance)"),
                ("log_rel", "ln(tr Cov w / tr Cov x(t+τ))"),
            ]
        ):
            ax = axes[row, col]
            points = ax.scatter(
                s_idx, entry[key][t_idx, s_idx], c=t_idx, cmap="viridis", s=10
            )
            ax.set(ylabel=label, title=f"{name} {model}")
        f, grid = entry["fit"], np.linspace(1, L, 50)
        axes[0, col].plot(
            grid,
            np.log(f["alpha"]) + f["lambda"] * grid,
            color="crimson",
            label=f"α e^(λ(t+τ)): λ = {f['lambda']:.3f}, arrival R² = {f['arrival_r2']:.2f}",
        )
        axes[0, col].legend(fontsize=8)
        axes[1, col].axhline(np.log(2), color="grey", ls="--", lw=0.8)
        axes[1, col].set(xlabel="arrival layer t + τ")
        axes[1, col].text(
            0.98,
            0.04,
            f"arrival R² {entry['relative_arrival_r2']:.2f}",
            transform=axes[1, col].transAxes,
            ha="right",
            va="bottom",
            fontsize=9,
        )
    fig.colorbar(points, ax=axes, label="departure layer t")
    return fig


def stalling_figure(steps: pd.DataFrame, split: int, title: str):
    """Relative step length (median, quartiles) and cosine of consecutive steps (mean, 95% CI) against the layer
    per model (`lotlib.lines_of_thought.null_tests.step_table`); dashed: the first re-initialised block."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    sns.lineplot(
        steps.dropna(subset=["relative step"]),
        x="t",
        y="relative step",
        hue="model",
        estimator="median",
        errorbar=("pi", 50),
        ax=axes[0],
    )
    sns.lineplot(
        steps.dropna(subset=["cos"]),
        x="t",
        y="cos",
        hue="model",
        errorbar=("ci", 95),
        ax=axes[1],
        legend=False,
    )
    axes[0].set(
        yscale="log",
        xlabel="step t → t+1",
        ylabel="‖x(t+1) − x(t)‖ / ‖x(t)‖",
        title="Relative step length (median, band: quartiles over pilots)",
    )
    axes[1].set(
        xlabel="layer t",
        ylabel="cos(consecutive steps)",
        title="Change of direction (mean, 95% CI)",
        ylim=(-0.2, 1.02),
    )
    for ax in axes:
        ax.axvline(split, color="grey", ls="--")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    return fig


def paths_side_by_side(views: dict[str, np.ndarray], layers: np.ndarray):
    """Static 3-D pictures of paths `(n, len(layers), 3)` side by side, titled by their keys."""
    from .. import plots

    fig = plt.figure(figsize=(6.5 * len(views), 5.5))
    for i, (title, P) in enumerate(views.items()):
        plots.paths_static(
            P, layers, title, ax=fig.add_subplot(1, len(views), i + 1, projection="3d")
        )
    return fig


def last_layer_law_figure(measures: dict):
    """Per model (`null_tests.ModelMeasures` by name): ln(mean variance) of every pair against the arrival layer,
    colored by departure, the law fitted on all pairs, and the pairs arriving at L with the final norm applied."""
    from .residuals import fit_variance, pair_mask

    fig, axes = plt.subplots(
        1, len(measures), figsize=(6.2 * len(measures), 4.3), squeeze=False
    )
    for ax, (name, m) in zip(axes[0], measures.items()):
        L = m.L
        t_idx, s_idx = np.nonzero(pair_mask(L + 1, 1, L))
        points = ax.scatter(
            s_idx, m.law["log_var"][t_idx, s_idx], c=t_idx, cmap="viridis", s=8
        )
        f, grid = (
            fit_variance(m.law["log_var"], pair_mask(L + 1, 1, L)),
            np.linspace(1, L, 50),
        )
        label = f"law on all pairs: λL = {f['lambda'] * L:.2f}"
        ax.plot(
            grid, np.log(f["alpha"]) + f["lambda"] * grid, color="crimson", label=label
        )
        ax.scatter(
            np.full(L - 1, L),
            m.normalized["log_var"][1:L, L],
            marker="x",
            color="crimson",
            s=25,
            label="arrival L, final norm applied",
        )
        ax.axvline(L, color="grey", ls="--", lw=1)
        ax.set(
            xlabel="arrival layer t + τ",
            ylabel="ln(mean variance)",
            title=f"{name}, L = {L}",
        )
        ax.legend(fontsize=8, loc="upper left")
        fig.colorbar(points, ax=ax, label="departure layer t")
    fig.suptitle(
        "Residual variance of the linear extrapolation against the arrival layer; dashed: the last layer"
    )
    fig.tight_layout()
    return fig


def leave_one_out_figure(measures: dict, model: str):
    """r(s), each arrival layer off the law fitted without it, against the relative depth s/L with 95% bootstrap
    bands: ln(mean variance) and relative to the arrival spread for every model, and `model` against its
    structureless cloud; a circle marks the last layer."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    panels = [(axes[0], "loo", name, name) for name in measures] + [
        (axes[1], "loo_relative", name, name) for name in measures
    ]
    panels += [
        (axes[2], key, model, label)
        for key, label in (("loo", "model"), ("loo_relative", "model, relative"))
    ]
    for ax, key, name, label in panels:
        L = measures[name].L
        depth, r = np.arange(2, L + 1) / L, measures[name].law[key][:, 2:]
        half = 1.96 * np.nanstd(r[1:], axis=0)
        line = ax.plot(depth, r[0], marker="o", ms=3, label=label)[0]
        ax.fill_between(
            depth, r[0] - half, r[0] + half, alpha=0.2, color=line.get_color()
        )
        ax.scatter(
            [1.0], [r[0, -1]], s=80, facecolors="none", edgecolors=line.get_color()
        )
    for key, label in (("loo", "cloud"), ("loo_relative", "cloud, relative")):
        r, L = measures[model].cloud[key][:, 2:], measures[model].L
        axes[2].plot(np.arange(2, L + 1) / L, r[0], ls="--", marker=".", label=label)
    titles = [
        "ln(mean variance)",
        "relative to the arrival spread",
        f"{model} vs a structureless cloud",
    ]
    for ax, title in zip(axes, titles):
        ax.axhline(0, color="grey", lw=1)
        ax.axvline(0.5, color="grey", ls=":", lw=1)
        ax.set(
            xlabel="relative depth s / L",
            ylabel="r(s): off the leave-one-out law (ln units)",
            title=title,
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def spectra_truncation_separability_figure(measures: dict, n_k_gibberish: int):
    """Per model: the last layer's spectrum over sigma_1, the truncated KL against K/D (dotted: D/4) and the
    separability of Walden and gibberish against the relative depth."""
    spectra = pd.concat(
        [
            pd.DataFrame(
                {
                    "i": np.arange(1, len(m.spectrum) + 1),
                    "σ_i(L) / σ_1(L)": m.spectrum,
                    "model": name,
                }
            )
            for name, m in measures.items()
        ]
    )
    curves = pd.concat([m.curve.assign(model=name) for name, m in measures.items()])
    separable = pd.concat(
        [
            pd.DataFrame(
                {
                    "relative depth t / L": np.arange(len(m.separable))
                    / (len(m.separable) - 1),
                    "test accuracy": m.separable,
                    "model": name,
                }
            )
            for name, m in measures.items()
        ]
    )
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    sns.lineplot(spectra, x="i", y="σ_i(L) / σ_1(L)", hue="model", ax=axes[0])
    sns.lineplot(
        curves,
        x="K / D",
        y="mean KL (nats)",
        hue="model",
        marker="o",
        ax=axes[1],
        legend=False,
    )
    sns.lineplot(
        separable,
        x="relative depth t / L",
        y="test accuracy",
        hue="model",
        marker="o",
        ax=axes[2],
        legend=False,
    )
    axes[0].set(xscale="log", yscale="log", title="Last layer's spectrum")
    axes[1].set(xscale="log", title="Truncated next-token distribution (last layer)")
    axes[1].axvline(0.25, color="grey", ls=":", lw=1)
    axes[2].set(ylim=(0.4, 1.02), title=f"Walden vs gibberish, N_k = {n_k_gibberish}")
    fig.tight_layout()
    return fig


# --- B4: the authors' protocol -----------------------------------------------------------------------


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


# --- B2/B3: the authors' protocol ---------------------------------------------------------------------


def svm_protocols_figure(paper: dict, verdicts: dict, tau_max: int, title: str) -> None:
    """B3: SVM accuracy at tau = 1 and `tau_max` with 95% intervals by the paper's protocol in its two readings
    (`paper`: `extrapolation.same_pilot_svm` with bases from all pilots, keys `paper_svm_tau{1,10}`, and from
    the training pilots, the same keys ending in `_training_bases`) and the book's held-out test with its
    cloud (`verdicts`, `extrapolation.repeated_svm`), chance (grey) and the paper's two values (crosses)."""
    found = {
        **{
            f"paper's protocol, bases from {pilots} pilots": [
                paper[f"paper_svm_{w}{suffix}"] for w in ("tau1", "tau10")
            ]
            for pilots, suffix in (("all", ""), ("training", "_training_bases"))
        },
        "book: held-out pilots": [
            verdicts[f"svm_extrapolated_{w}"] for w in ("tau1", "tau_max")
        ],
        "book: structureless cloud": [
            verdicts[f"svm_cloud_{w}"] for w in ("tau1", "tau_max")
        ],
    }
    _, ax = plt.subplots(figsize=(7, 4))
    shifts = np.linspace(-0.3, 0.3, len(found))
    for shift, (label, estimates) in zip(shifts, found.items()):
        y = np.array([e.value for e in estimates])
        spread = np.array([[e.value - e.lo, e.hi - e.value] for e in estimates]).T
        x = np.array([1.0, tau_max]) + shift
        ax.errorbar(x, y, yerr=spread, fmt="o", capsize=4, label=label)
    ax.axhline(0.5, color="grey", ls=":", label="chance")
    ax.plot([1, 10], [0.505, 0.60], "kx", ms=9, mew=2, label="paper (GPT-2 medium)")
    ax.set(xlabel="τ", ylabel="test accuracy", xticks=sorted({1, tau_max, 10}))
    ax.set(title=title)
    ax.legend(fontsize=8)
    plt.show()


def truncation_bands(results: dict, d: int, model: str) -> None:
    """B2: mean KL(p_K || p) and top-`top` overlap against K (K = d left out) for each protocol of each
    `truncation.ResampledTruncation` of `results` (label -> result; a result shared by two labels is drawn
    once): the sample's curve with a 95% band from the repetitions that refit the basis (their percentile
    band moved onto the sample's curve, as the intervals are); the paper's K = d/4 and 2.5 of 5 marked."""
    _, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    drawn = []
    for label, result in results.items():
        if any(result is seen for seen in drawn):
            continue
        drawn.append(result)
        for name, truncated in result.protocols.items():
            ks = np.array(truncated.ks[:-1])
            curve = np.stack([truncated.kl.mean(1), truncated.overlap.mean(1)])
            reps = result.curves[name]  # (n_rep, 2, len(ks))
            lo, hi = np.quantile(reps, [0.025, 0.975], axis=0) + curve - reps.mean(0)
            for i, ax in enumerate(axes):
                (line,) = ax.plot(
                    ks,
                    curve[i, :-1],
                    marker="o",
                    ms=3,
                    label=f"{PROTOCOL_LABELS[name]}, {label}",
                )
                ax.fill_between(
                    ks, lo[i, :-1], hi[i, :-1], color=line.get_color(), alpha=0.2
                )
    top = next(iter(results.values())).protocols["last layer"].top
    for ax, measure in zip(axes, ("KL(p_K ‖ p) (nats)", f"top-{top} shared with p")):
        ax.axvline(d // 4, color="grey", ls=":", label="K = D/4")
        ax.set(xscale="log", xlabel="K", ylabel=measure, title=f"{model}, D = {d}")
    axes[0].set_yscale("log")
    axes[1].axhline(2.5, color="k", ls="--", lw=1, label="paper: 2.5 of 5 at K = D/4")
    axes[1].legend(fontsize=8)
    plt.show()


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
