"""Figures of Part I: the sphere and the hyperplane with points on them (A1), and a token's path among
the embeddings (A7), each as a rotatable plotly figure and a static matplotlib one.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import seaborn as sns
from IPython.display import HTML
from plotly.subplots import make_subplots

from . import head_svd, norms
from .lens import Arrival, TokenPath
from .norms import NormGeometry
from .probes import PROBES, NounProbes, ProbeRates
from .travel import FullSpaceTravel, per_sentence_difference
from .umap_map import EmbeddingMaps

PALETTE = (
    "#9e9e9e",
    "#1f77b4",
    "#d62728",
    "#2ca02c",
)  # grey, blue, red, green: one per point set


def _sphere_mesh(
    radius: float, n: int = 30
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, n), np.linspace(0, np.pi, n))
    return (
        radius * np.cos(u) * np.sin(v),
        radius * np.sin(u) * np.sin(v),
        radius * np.cos(v),
    )


def _plane_mesh(
    radius: float, n: int = 12
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A disc of the plane x + y + z = 0 of the given radius."""
    a = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    b = np.array([1.0, 1.0, -2.0]) / np.sqrt(6)
    r, t = np.meshgrid(np.linspace(0, radius, n), np.linspace(0, 2 * np.pi, 4 * n))
    P = (r * np.cos(t))[..., None] * a + (r * np.sin(t))[..., None] * b
    return P[..., 0], P[..., 1], P[..., 2]


def _surface(mesh, color: str, opacity: float, name: str) -> go.Surface:
    """A one-colour, see-through surface from the mesh `(x, y, z)`, each `(n, n)`."""
    x, y, z = mesh
    return go.Surface(
        x=x,
        y=y,
        z=z,
        opacity=opacity,
        showscale=False,
        colorscale=[[0, color], [1, color]],
        hoverinfo="skip",
        name=name,
    )


def _ones_arrow() -> go.Scatter3d:
    """The direction 1 = (1, 1, 1) as a labelled line from the origin."""
    ones = np.array([[0, 0, 0], [1, 1, 1]]) * 1.2
    return go.Scatter3d(
        x=ones[:, 0],
        y=ones[:, 1],
        z=ones[:, 2],
        mode="lines+text",
        text=["", "1"],
        line=dict(color="black", width=4),
        showlegend=False,
    )


def sphere_figure(
    panels: dict[str, dict[str, np.ndarray]],
    hyperplane: dict[str, bool],
    axis_names,
    title: str,
) -> go.Figure:
    """Rotatable 3-D panels: the sphere of radius sqrt(3), the hyperplane x . 1 = 0 where asked, and
    point sets `panels[panel][label]` `(n, 3)`."""
    names = list(panels)
    fig = make_subplots(
        rows=1,
        cols=len(names),
        specs=[[{"type": "scene"}] * len(names)],
        subplot_titles=names,
    )
    for col, name in enumerate(names, start=1):
        fig.add_trace(
            _surface(_sphere_mesh(3**0.5), "grey", 0.12, "sphere"), row=1, col=col
        )
        if hyperplane[name]:
            fig.add_trace(
                _surface(_plane_mesh(2.2), "orange", 0.25, "x·1 = 0"), row=1, col=col
            )
        fig.add_trace(_ones_arrow(), row=1, col=col)
        for (label, P), color in zip(panels[name].items(), PALETTE):
            fig.add_trace(
                go.Scatter3d(
                    x=P[:, 0],
                    y=P[:, 1],
                    z=P[:, 2],
                    mode="markers",
                    name=f"{name}: {label}",
                    marker=dict(size=2, color=color),
                ),
                row=1,
                col=col,
            )
    fig.update_scenes(
        xaxis_title=axis_names[0],
        yaxis_title=axis_names[1],
        zaxis_title=axis_names[2],
        aspectmode="cube",
        camera=dict(eye=dict(x=1.8, y=0.5, z=0.7)),
    )
    fig.update_layout(
        title=title,
        height=560,
        margin=dict(l=0, r=0, t=60, b=0),
        legend=dict(itemsizing="constant"),
    )
    return fig


def sphere_static(
    panels: dict[str, dict[str, np.ndarray]],
    hyperplane: dict[str, bool],
    axis_names,
    title: str,
    elev: float = 20,
    azim: float = 15,
):
    """Static matplotlib version of `sphere_figure`, seen from (elev, azim) degrees; returns the figure.

    The default view is 30 degrees off the all-ones direction: the plane x . 1 = 0 shows as a tilted disc."""
    fig = plt.figure(figsize=(5.5 * len(panels), 5.5))
    for col, (name, sets) in enumerate(panels.items(), start=1):
        ax = fig.add_subplot(1, len(panels), col, projection="3d")
        ax.plot_wireframe(*_sphere_mesh(3**0.5, 20), color="grey", alpha=0.15, lw=0.5)
        if hyperplane[name]:
            ax.plot_surface(*_plane_mesh(2.2), color="orange", alpha=0.2, lw=0)
        ax.quiver(0, 0, 0, 1.2, 1.2, 1.2, color="black", lw=1.5)
        for (label, P), color in zip(sets.items(), PALETTE):
            ax.scatter(
                P[:, 0],
                P[:, 1],
                P[:, 2],
                s=3,
                color=color,
                label=label,
                depthshade=False,
            )
        ax.set(
            xlabel=axis_names[0], ylabel=axis_names[1], zlabel=axis_names[2], title=name
        )
        ax.set_box_aspect((1, 1, 1))
        ax.view_init(elev=elev, azim=azim)
        ax.legend(loc="upper left", fontsize=7)
    fig.suptitle(title)
    return fig


def path_panels(
    background: np.ndarray,
    path: np.ndarray,
    landmarks: dict[str, np.ndarray],
    title: str,
):
    """Four 3-D panels: the input x(0); its normalization; the first half of the blocks; the second half.

    background `(n, 3)` fitted points; path `(L+2, 3)`: x(0), final_norm(x(0)), final_norm(x(1..L));
    landmarks: label -> `(3,)` (the current and the next token). The path is drawn as arrows.
    """
    L, m = len(path) - 2, (len(path) - 2) // 2
    panels = {
        "input x(0)": (0, 1),
        "normalized input": (0, 2),
        f"blocks 1..{m}": (1, m + 2),
        f"blocks {m + 1}..{L}": (m + 1, L + 2),
    }  # slices of `path`; path[i] is layer max(i - 1, 0)
    colors = plt.get_cmap("viridis")(np.linspace(0, 1, L + 1))
    shown = np.vstack(
        [np.quantile(background, [0.01, 0.99], axis=0), path, *landmarks.values()]
    )
    low, high = (
        shown.min(0),
        shown.max(0),
    )  # the bulk of the map (a few far outliers left out) and the path
    low, high = low - 0.05 * (high - low), high + 0.05 * (high - low)
    inside = ((background >= low) & (background <= high)).all(1)
    fig = plt.figure(figsize=(12, 10))
    for i, (name, (a, b)) in enumerate(panels.items()):
        ax = fig.add_subplot(2, 2, i + 1, projection="3d")
        ax.scatter(
            *background[inside].T, s=0.3, c="silver", alpha=0.35, depthshade=False
        )
        ax.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), zlim=(low[2], high[2]))
        for label, point in landmarks.items():
            ax.scatter(*point, s=30, c="crimson", depthshade=False)
            ax.text(*point, label, color="crimson", fontsize=9)
        points = path[a:b]
        ax.scatter(
            *points.T,
            s=12,
            c=colors[np.maximum(np.arange(a, b) - 1, 0)],
            depthshade=False,
        )
        if len(points) > 1:  # each arrow takes the color of the layer it arrives at
            ax.quiver(
                *points[:-1].T,
                *np.diff(points, axis=0).T,
                color=colors[np.arange(a, b - 1)],
                arrow_length_ratio=0.25,
                linewidth=1.2,
            )
        ax.set_title(name, fontsize=10)
        ax.tick_params(labelsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def path_figure(
    background: np.ndarray,
    background_labels: list[str],
    path: np.ndarray,
    path_labels: list[str],
    landmarks: dict[str, np.ndarray],
    title: str,
) -> go.Figure:
    """Rotatable 3-D version: grey fitted points (hover: token), the path colored by layer, landmarks."""
    fig = go.Figure(
        go.Scatter3d(
            x=background[:, 0],
            y=background[:, 1],
            z=background[:, 2],
            mode="markers",
            marker=dict(size=1.5, color="rgba(150,150,150,0.35)"),
            hovertext=background_labels,
            hoverinfo="text",
            name="embedding rows",
        )
    )
    fig.add_trace(
        go.Scatter3d(
            x=path[:, 0],
            y=path[:, 1],
            z=path[:, 2],
            mode="lines+markers",
            marker=dict(size=4, color=np.arange(len(path)), colorscale="Viridis"),
            line=dict(color="black", width=3),
            hovertext=path_labels,
            hoverinfo="text",
            name="path of the token",
        )
    )
    points = np.array(list(landmarks.values()))
    fig.add_trace(
        go.Scatter3d(
            x=points[:, 0],
            y=points[:, 1],
            z=points[:, 2],
            mode="markers+text",
            text=list(landmarks),
            marker=dict(size=6, color="crimson"),
            name="tokens",
        )
    )
    fig.update_layout(
        title=title,
        height=650,
        margin=dict(l=0, r=0, t=40, b=0),
        scene=dict(xaxis_title="umap 1", yaxis_title="umap 2", zaxis_title="umap 3"),
    )
    return fig


# --- A1 geometry, A2 normalization, A3 reachable tokens ------------------------------------------------


def norm_steps(geo: NormGeometry, title: str):
    """The four 2-D steps of `norm_geometry` (normalize, stretch by gamma, shift by beta, map by W_QK), each
    state colored by its angle on the circle, the whole circle carried through as a curve; returns the
    figure."""
    x, y = geo.coords[:2]
    beta = geo.norm.restrict(geo.coords[:2]).beta
    titles = {
        "normalized": "(a) normalize: onto the circle of radius √2",
        "stretched": "(b) stretch by γ",
        "shifted": "(c) shift by β (arrow)"
        if beta is not None
        else "(c) shift by β: none (RMSNorm has no β)",
        "mapped": f"(d) map by W_QK of head {geo.head}",
    }
    angle = np.arctan2(*geo.stages["normalized"].numpy().T[::-1])
    fig, axes = plt.subplots(2, 2, figsize=(10, 10), layout="constrained")
    previous = None
    for ax, (name, P) in zip(axes.ravel(), geo.stages.items()):
        if previous is None:
            ax.scatter(
                *geo.states[:, :2].T, s=4, color="grey", alpha=0.5, label="states x"
            )
        else:
            ax.plot(
                *geo.curve[previous].numpy().T,
                color="grey",
                lw=0.8,
                ls="--",
                label="previous step",
            )
        ax.plot(*geo.curve[name].numpy().T, color="black", lw=0.8)
        label = "normalized states" if previous is None else None
        ax.scatter(*P.numpy().T, c=angle, cmap="hsv", s=6, label=label)
        if name == "shifted" and beta is not None:
            arrow = {"arrowstyle": "->", "color": "red", "lw": 2}
            ax.annotate("", xy=beta.cpu().numpy(), xytext=(0, 0), arrowprops=arrow)
        ax.axhline(0, color="lightgrey", lw=0.5)
        ax.axvline(0, color="lightgrey", lw=0.5)
        ax.set(title=titles[name], xlabel=f"x[{x}]", ylabel=f"x[{y}]", aspect="equal")
        ax.legend(loc="upper right", fontsize=7)
        previous = name
    fig.suptitle(title)
    return fig


def sqrt_d_gaps(table: pd.DataFrame, d: int, title: str):
    """A2, section 1: per layer, sqrt(d) - `||x̂||` measured and eps-predicted, and the largest
    `|measured - predicted|` over states (columns of `norm_table`), on a log scale; returns the figure."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    measured = table["sqrt(d) - ||x̂|| measured"]
    predicted = table["sqrt(d) - ||x̂|| eps-predicted"]
    worst = table["max |measured - predicted|"]
    ax.semilogy(
        table.index, measured.abs(), "o-", label="√d − ||x̂||, measured (float32)"
    )
    ax.semilogy(table.index, predicted, "x--", label="√d − ||x̂||, eps-predicted")
    ax.semilogy(
        table.index,
        worst,
        ".:",
        color="grey",
        label="max |measured − predicted| over states",
    )
    ax.set(
        xlabel="layer t (norm reading x(t); t = L: final norm)",
        ylabel="gap",
        title=f"||x̂|| vs √d = {d**0.5:.3f}, {title}",
    )
    ax.legend(fontsize=8)
    return fig


def residual_norms(residual: np.ndarray, d: int, title: str):
    """A2, section 2: `||x(t)||` `(N, T, L+1)` by layer, median and 10-90% band, the first position apart
    from the others, on a log scale with sqrt(d) for reference; returns the figure."""
    _, position, t = np.indices(residual.shape).reshape(3, -1)
    where = np.where(position == 0, "first position", "positions ≥ 1")
    frame = pd.DataFrame({"t": t, "||x(t)||": residual.ravel(), "position": where})
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.lineplot(
        frame,
        x="t",
        y="||x(t)||",
        hue="position",
        estimator="median",
        errorbar=("pi", 80),
        marker="o",
        ax=ax,
    )
    ax.axhline(d**0.5, color="grey", ls=":", label="√d (every normalized state)")
    ax.set(
        yscale="log",
        xlabel="layer t",
        title=f"Residual-stream norm before normalization (median, 10–90%), {title}",
    )
    ax.legend(fontsize=8)
    return fig


def hyperplane_figure(
    stats: dict, layers: list[int], n_boot: int = 1000, seed: int = 0
):
    """A2, section 3: left, mean `|cos(·, 1)|` per layer of the incoming and the normalized states
    (`norm_statistics`), means per pseudo-sentence with 95% bootstrap bands, against a random direction;
    right, histograms of cos(x, 1) of the incoming states at `layers` against a random direction's
    density. Returns the figure."""
    d, n_s, n_t = stats["d"], *stats["cos_ones"].shape[::2]
    baseline = norms.random_cos_to_ones(d)
    per_sentence = pd.concat(
        pd.DataFrame(
            {
                "t": np.tile(np.arange(n_t), n_s),
                "mean |cos|": np.abs(stats[key]).mean(1).ravel(),
                "state": name,
            }
        )
        for key, name in (
            ("cos_ones", "states x(t) entering the norm"),
            ("cos_ones_normalized", "normalized states x̂(t)"),
        )
    )
    fig, (ax, hx) = plt.subplots(1, 2, figsize=(12, 3.8))
    sns.lineplot(
        per_sentence,
        x="t",
        y="mean |cos|",
        hue="state",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        marker="o",
        ax=ax,
    )
    ax.axhline(
        baseline, color="grey", ls="--", label=f"random direction ({baseline:.3f})"
    )
    ax.set(
        xlabel="layer t",
        ylabel="mean |cos(·, 1)|",
        title="Distance from the hyperplane x · 1 = 0, relative to the norm",
    )
    ax.legend(fontsize=8)
    cos = stats["cos_ones"]
    picked = pd.DataFrame(
        {
            "cos(x, 1)": cos[..., layers].reshape(-1),
            "t": np.tile(layers, cos[..., 0].size),
        }
    )
    sns.histplot(
        picked,
        x="cos(x, 1)",
        hue="t",
        stat="density",
        common_norm=False,
        element="step",
        fill=False,
        bins=60,
        palette="viridis",
        ax=hx,
    )
    grid = np.linspace(-4, 4, 200) / d**0.5
    hx.plot(
        grid, norms.random_cos_density(grid, d), "k--", lw=1, label="random direction"
    )
    hx.set(title="cos(x, 1) of the incoming states (dashed: a random direction)")
    return fig


def score_hexbin(scores: pd.DataFrame, title: str):
    """A3: `||γ ⊙ e||` against `||e||` for every token (`reachability_scores`), as a log-count hexbin titled
    with their Spearman correlation; returns the figure."""
    rho = scores["||e||"].corr(scores["||gamma*e||"], method="spearman")
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    hb = ax.hexbin(
        scores["||e||"], scores["||gamma*e||"], gridsize=60, bins="log", cmap="viridis"
    )
    fig.colorbar(hb, ax=ax, label="tokens (log)")
    ax.set(
        xlabel="||e||",
        ylabel="||γ ⊙ e||",
        title=f"{title}: every token, Spearman ρ = {rho:.3f}",
    )
    return fig


def rank_ecdf(drawn: pd.DataFrame, title: str):
    """A3: the distribution of each drawn token's rank at its own best state (`win_shares`), one curve
    per end of the ranking, rank + 1 on a log scale; returns the figure."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.ecdfplot(
        drawn.assign(**{"rank + 1": drawn["rank"] + 1}),
        x="rank + 1",
        hue="end",
        log_scale=True,
        ax=ax,
    )
    n = drawn["end"].value_counts().max()
    ax.set(
        title=f"{title}: rank of a token at its own best state ({n} tokens per tenth)",
        ylabel="share of drawn tokens",
    )
    return fig


# --- A4/A5 noun probes, A6 SVD tables, C1 probe rates --------------------------------------------------


def block_tables(tables: dict[str, object]) -> HTML:
    """Tables (DataFrames or Stylers) one after another, each under its heading."""
    return HTML(
        "".join(
            f"<h4>{heading}</h4>{table.to_html()}" for heading, table in tables.items()
        )
    )


def folded(summary: str, frame: pd.DataFrame, **to_html) -> HTML:
    """A table folded away under a one-line summary (HTML details)."""
    return HTML(
        f"<details><summary>{summary}</summary>{frame.to_html(**to_html)}</details>"
    )


def svd_side_by_side(tables: pd.DataFrame, layers: list[int], heads: list[int]) -> HTML:
    """A6: for each block and each of `heads`, its QK and VO directions side by side
    (`head_svd.side_by_side`)."""
    sigma = {("QK", "sigma"): "{:.3g}", ("VO", "sigma"): "{:.3g}"}
    n_heads = tables["head"].max() + 1
    return block_tables(
        {
            f"Block {b}, head {h}": head_svd.side_by_side(tables, b, h).style.format(
                sigma
            )
            for b in layers
            for h in heads
            if h < n_heads
        }
    )


def svd_all_heads(tables: pd.DataFrame) -> HTML:
    """A6: every head's directions (`head_svd.all_heads`), one folded table per block and matrix."""
    n_dirs, n_heads = tables.direction.max() + 1, tables["head"].max() + 1
    return HTML(
        "".join(
            folded(
                f"Block {b}, W_{m}: top-{n_dirs} directions of all {n_heads} heads "
                "(left | right)",
                head_svd.all_heads(tables, b, m),
            ).data
            for b in tables.block.unique()
            for m in ("QK", "VO")
        )
    )


def noun_measures(result: NounProbes, n_boot: int, seed: int, title: str):
    """A4/A5: the three per-head measures (rows) at each probed block (columns), bars for the nouns and
    the random words with 95% bootstrap intervals over queries; dashed: specificity 0.5."""
    grid = sns.catplot(
        result.per_head(),
        kind="bar",
        x="head",
        y="value",
        hue="queries",
        row="measure",
        col="block",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        height=2.6,
        aspect=1.9,
        sharey="row",
    )
    grid.set_titles("block {col_name}")
    for (measure, block), ax in grid.axes_dict.items():
        ax.set_ylabel(measure if block == result.layers[0] else "")
        if measure == "QK key specificity":
            ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    grid.figure.suptitle(title, y=1.02)
    return grid.figure


RATE_TITLES = {
    "qk": "query-key: keys a head seeks",
    "vo_update": "value: the head's update alone",
    "vo": "value: residual + update (paper's readout)",
}


def rate_curves(result: ProbeRates, n_boot: int, seed: int, title: str):
    """C1: one panel per probe, the rate per block for the nouns and the random words (bands: 95%
    bootstrap over queries), the nouns' best head (dotted) and chance (grey)."""
    curves = result.curves().replace({"probe": RATE_TITLES})
    grid = sns.relplot(
        curves,
        kind="line",
        x="block",
        y="rate",
        hue="queries",
        col="probe",
        marker="o",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        height=3.6,
        aspect=1.2,
        facet_kws={"sharey": False},
    )
    for probe, ax in zip(RATE_TITLES, grid.axes.flat):
        best = result.per_query(probe).mean(2).max(1)
        ax.plot(result.layers, best, ":", color="k", label="nouns, best head")
        ax.axhline(result.queries.chance, color="grey", lw=0.8, label="chance")
        ax.set(ylabel="rate")
    grid.axes.flat[0].legend(fontsize=8)
    grid.set_titles("{col_name}")
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


def head_rate_maps(result: ProbeRates):
    """C1: the nouns' rate of every head (rows) at every block (columns), query-key and update alone."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 0.35 * result.n_heads + 1.5))
    for ax, probe in zip(axes, ("qk", "vo_update")):
        sns.heatmap(
            result.head_rates(probe),
            ax=ax,
            cmap="viridis",
            vmin=0,
            cbar_kws={"label": "rate"},
        )
        ax.set(title=f"{PROBES[probe]}: noun rate per head")
    fig.tight_layout()
    return fig


def svd_coverage(curves: pd.DataFrame, d_head: int, title: str):
    """A6: cumulative singular-value coverage per head (`head_svd.coverage_frame`), one panel per matrix
    and block, log rank axis, dashed at d_head where the null space starts."""
    grid = sns.relplot(
        curves,
        kind="line",
        x="rank",
        y="coverage",
        hue="head",
        row="matrix",
        col="block",
        palette="viridis",
        legend="full",
        height=3,
        aspect=1.3,
        lw=1,
    )
    for ax in grid.axes.flat:
        ax.axvline(d_head, color="k", ls="--", lw=0.8)
        ax.set(xscale="log")
    grid.set_titles("block {col_name}, {row_name}")
    grid.figure.suptitle(title, y=1.02)
    return grid.figure


# --- A7 traveling words, C2 travel in the full space ----------------------------------------------------
def _travel_title(path: TokenPath, maps: EmbeddingMaps, model: str) -> str:
    return (
        f"{path.current_name!r} in {path.sentence!r} travels toward "
        f"{path.target_name!r} ({model}; UMAP of {maps.what})"
    )


def travel_panels(path: TokenPath, maps: EmbeddingMaps, model: str):
    """`path_panels` of the path on the first map (A7, Fig. 4)."""
    m = maps.maps[0]
    return path_panels(
        m.embedding, m.path, m.landmarks, _travel_title(path, maps, model)
    )


def travel_figure(
    path: TokenPath, maps: EmbeddingMaps, lens: Arrival, model: str
) -> go.Figure:
    """`path_figure` of the path on the first map; a path point's hover names its layer's top token."""
    labels = [f"x(0) = input, {path.current_name!r}"] + [
        f"final_norm(x({t})): top {top!r}" for t, top in enumerate(lens.top1)
    ]
    m = maps.maps[0]
    title = _travel_title(path, maps, model)
    return path_figure(m.embedding, maps.labels, m.path, labels, m.landmarks, title)


def arrival_figure(path: TokenPath, maps: EmbeddingMaps, lens: Arrival):
    """The next token's logit-lens rank per layer, and its distance on the first map."""
    layers = np.arange(len(lens.ranks))
    fig, (ax_rank, ax_dist) = plt.subplots(1, 2, figsize=(11, 3.2))
    ax_rank.semilogy(layers, lens.ranks + 1, marker="o")
    ax_rank.set(
        xlabel="layer t",
        ylabel="rank + 1",
        title=f"rank of {path.target_name!r} in the logit lens",
    )
    ax_dist.plot(layers, maps.maps[0].distance, marker="o")
    ax_dist.set(
        xlabel="layer t",
        ylabel="UMAP distance",
        title=f"distance to {path.target_name!r} on the map (seed {maps.seeds[0]})",
    )
    return fig


def heading_figure(path: TokenPath, maps: EmbeddingMaps):
    """Histogram of every other token's distance ratio on the first map, the next token's marked."""
    m = maps.maps[0]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    sns.histplot(
        x=np.log10(m.other_ratios),
        bins=80,
        stat="density",
        color="grey",
        ax=ax,
        label="every other token",
    )
    ax.axvline(
        np.log10(m.ratios[m.at_target]),
        color="crimson",
        lw=2,
        label=f"{path.target_name!r}",
    )
    ax.axvline(0, color="black", ls=":", lw=1, label="ratio 1")
    ax.set(
        xlabel="log10 (end distance / start distance) on the map",
        title=f"How much the path heads for each token (seed {m.seed})",
    )
    ax.legend(fontsize=8)
    return fig


BLOCK_CURVES = {
    "raw W_E, shuffled": ("W_E", "shuffled"),
    "final_norm(W_E), shuffled": ("final_norm(W_E)", "shuffled"),
    "raw W_E, shuffled within sentence": ("W_E", "shuffled within sentence"),
}  # (target table, baseline) of each difference curve of `block_travel_figure`


def block_travel_figure(study: FullSpaceTravel, *, n_boot: int, seed: int):
    """Left: each block's mean cosine with e(next) − e(current), true and shuffled next token (raw W_E).
    Right: true − baseline per block for `BLOCK_CURVES`, with a 95% bootstrap band over pseudo-sentences
    (seaborn, `n_boot` resamples, `seed`)."""
    raw = study.blocks
    per_block = pd.concat(
        pd.DataFrame(
            {
                "block": np.tile(raw.index, len(study.ids)),
                "true − baseline": per_sentence_difference(
                    study.travel[table].steps["true"], study.travel[table].steps[kind]
                ).ravel(),
                "target, baseline": name,
            }
        )
        for name, (table, kind) in BLOCK_CURVES.items()
    )
    fig, (ax_cos, ax_diff) = plt.subplots(1, 2, figsize=(12, 4))
    ax_cos.plot(raw.index, raw["true"], marker="o", label="true next token")
    ax_cos.plot(raw.index, raw["shuffled"], marker="o", label="shuffled next token")
    ax_cos.set_yscale("symlog", linthresh=0.02)
    ax_cos.set(
        xlabel="block t+1 (update y(t) → y(t+1))",
        ylabel="mean cosine",
        title="cos(update, e(next) − e(current)), raw W_E",
    )
    ax_cos.legend()
    sns.lineplot(
        per_block,
        x="block",
        y="true − baseline",
        hue="target, baseline",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        marker="o",
        markersize=3,
        ax=ax_diff,
    )
    ax_diff.axhline(0, color="black", lw=0.8)
    ax_diff.set(
        xlabel="block t+1", title="difference, 95% bootstrap band over pseudo-sentences"
    )
    ax_diff.legend(fontsize=8)
    fig.tight_layout()
    return fig


def read_share_figure(found, model: str) -> None:
    """C7: each head's read share (`read_shares.ReadShares`, the sample) by block, one dot per head, with the
    share d_head / d of evenly spread directions as a dashed line."""
    rows = [
        {"block": b, "read share": share}
        for i, b in enumerate(found.blocks)
        for share in found.shares[0, i]
    ]
    _, ax = plt.subplots(figsize=(11, 4))
    sns.stripplot(
        pd.DataFrame(rows), x="block", y="read share", ax=ax, size=4, jitter=0.2
    )
    ax.axhline(
        found.isotropic, color="k", ls="--", lw=1, label="d_head / d (evenly spread)"
    )
    ax.set(
        ylim=(0, None),
        title=f"{model}: the share of the normalized states' variance each head's queries read",
    )
    ax.legend(fontsize=8)
    plt.show()


def state_norms_figure(found, model: str) -> None:
    """C7: per layer, the raw norm ||x(t)|| / sqrt(d) (left) and the ellipsoid ratio of the norm reading x(t)
    (right) of `state_norms.StateNorms`: the median over pilots with the 5-95% band, and 1 (the sphere's
    radius; a state on its reading norm's ellipsoid) dashed."""
    table = found.table()
    _, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, name, title in zip(
        axes,
        ("raw ||x|| / √d", "ellipsoid ratio"),
        (
            "raw state: ||x(t)|| / √d",
            "on the reading norm's ellipsoid: ||(x − β) / γ|| / √d",
        ),
    ):
        ax.fill_between(
            table.index, table[f"{name}, 5%"], table[f"{name}, 95%"], alpha=0.25
        )
        ax.plot(table.index, table[f"{name}, median"], marker="o", ms=3)
        ax.axhline(1.0, color="k", ls="--", lw=1)
        ax.set(xlabel="layer t", yscale="log", title=title)
    axes[0].figure.suptitle(
        f"{model}: how far the states are from the sphere, layer by layer"
    )
    plt.tight_layout()
    plt.show()
