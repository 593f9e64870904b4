"""Chapter C3's figures: continuous lines between layers and their stability."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .. import plots


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
