"""Figures: one theme for the whole book (seaborn over matplotlib for statistical figures), rotatable 3-D
figures in plotly, the sweep summary (a seaborn line with a confidence band across repetitions), and
tables shown as HTML."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go
from matplotlib import cm, colors

if TYPE_CHECKING:
    import pandas as pd
    from IPython.display import HTML

THEME = {
    "context": "notebook",
    "style": "whitegrid",
    "palette": "colorblind",
    "font_scale": 0.9,
}


def apply_theme() -> None:
    """The book's one look for matplotlib and seaborn figures (plotly keeps its own for the 3-D ones); chapters
    call it once, before their first figure."""
    import seaborn as sns

    sns.set_theme(**THEME)
    plt.rcParams.update({"figure.dpi": 110, "axes.titlesize": "medium"})


def show(fig: go.Figure) -> None:
    """Display a plotly figure: inline HTML that uses the book's bundled plotly.js when building
    the book (no CDN, works offline), the notebook's own renderer otherwise."""
    if os.environ.get("LOTLIB_BOOK"):  # set by the pipeline in a book run's kernel
        from IPython.display import HTML, display

        display(HTML(fig.to_html(full_html=False, include_plotlyjs=False)))
    else:
        fig.show()


def _layer_colors(n: int, cmap: str = "viridis") -> list[str]:
    return [colors.to_hex(c) for c in matplotlib.colormaps[cmap](np.linspace(0, 1, n))]


def paths_3d(
    P: np.ndarray,
    layers: np.ndarray,
    title: str,
    axis_names=("u1", "u2", "u3"),
    cmap: str = "viridis",
) -> go.Figure:
    """Rotatable 3-D figure of trajectories `P` `(N, T, 3)`: grey paths, points colored by layer."""
    N, T, _ = P.shape
    breaks = np.full((N, 1, 3), np.nan)
    lines = np.concatenate([P, breaks], axis=1).reshape(-1, 3)
    fig = go.Figure(
        go.Scatter3d(
            x=lines[:, 0],
            y=lines[:, 1],
            z=lines[:, 2],
            mode="lines",
            line=dict(color="rgba(120,120,120,0.25)", width=1),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    for t, color in zip(range(T), _layer_colors(T, cmap)):
        fig.add_trace(
            go.Scatter3d(
                x=P[:, t, 0],
                y=P[:, t, 1],
                z=P[:, t, 2],
                mode="markers",
                marker=dict(size=2, color=color),
                name=f"t = {layers[t]}",
            )
        )
    fig.update_layout(
        title=title,
        height=600,
        margin=dict(l=0, r=0, t=40, b=0),
        scene=dict(
            xaxis_title=axis_names[0],
            yaxis_title=axis_names[1],
            zaxis_title=axis_names[2],
        ),
        legend=dict(itemsizing="constant"),
    )
    return fig


def paths_static(
    P: np.ndarray,
    layers: np.ndarray,
    title: str,
    axis_names=("u1", "u2", "u3"),
    cmap: str = "viridis",
    ax=None,
):
    """Static 3-D matplotlib version of `paths_3d`, with a layer colorbar."""
    if ax is None:
        ax = plt.figure(figsize=(7, 6)).add_subplot(projection="3d")
    for path in P:
        ax.plot(path[:, 0], path[:, 1], path[:, 2], color="grey", alpha=0.15, lw=0.5)
    norm = colors.Normalize(layers.min(), layers.max())
    ax.scatter(
        P[..., 0].ravel(),
        P[..., 1].ravel(),
        P[..., 2].ravel(),
        c=np.tile(layers, len(P)),
        cmap=cmap,
        norm=norm,
        s=2,
        depthshade=False,
    )
    ax.set(
        xlabel=axis_names[0], ylabel=axis_names[1], zlabel=axis_names[2], title=title
    )
    ax.figure.colorbar(
        cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.6, label="layer t"
    )
    return ax


def sweep_values(column) -> pd.Series:
    """A results-table column as numbers: an Estimate (a dict, or its JSON text in a CSV) gives its value."""
    import json

    import pandas as pd

    def number(v):
        if isinstance(v, str) and v.startswith("{"):
            v = json.loads(v)
        if isinstance(v, dict):
            v = v.get("value")
        return pd.to_numeric(v, errors="coerce")

    return column.map(number).astype(float)


def sweep_plot(table, y: str, x: str, hue: str | None = None, ax=None):
    """A summary value `y` against the swept parameter `x` from a sweep's results table (failed runs left
    out): seaborn's mean line with its 95% confidence band over the runs that share x (and `hue`), e.g. the
    seeds; one line per value of `hue`."""
    import seaborn as sns

    ok = table[table["status"] == "ok"]
    if y not in ok:
        raise ValueError(
            f"no summary value {y!r} in the sweep results; available: "
            f"{', '.join(c for c in table.columns if c not in ('run', 'status', 'error'))}"
        )
    if ax is None:
        ax = plt.subplots(figsize=(6, 3.5))[1]
    data = ok.assign(**{y: sweep_values(ok[y])})
    sns.lineplot(
        data=data,
        x=x,
        y=y,
        hue=hue,
        errorbar=("ci", 95),
        marker="o",
        ax=ax,
        palette="colorblind" if hue else None,
    )
    ax.set(
        title=f"{y} vs {x}"
        + (f" by {hue}" if hue else "")
        + " (band: 95% CI over runs)"
    )
    return ax


def block_tables(tables: dict[str, object]) -> HTML:
    """Tables (DataFrames or Stylers) one after another, each under its heading."""
    from IPython.display import HTML

    return HTML(
        "".join(
            f"<h4>{heading}</h4>{table.to_html()}" for heading, table in tables.items()
        )
    )


def folded(summary: str, frame: pd.DataFrame, **to_html) -> HTML:
    """A table folded away under a one-line summary (HTML details)."""
    from IPython.display import HTML

    return HTML(
        f"<details><summary>{summary}</summary>{frame.to_html(**to_html)}</details>"
    )
