"""Figures of Part I: the sphere and the hyperplane with points on them (A1), and a token's path among
the embeddings (A7), each as a rotatable plotly figure and a static matplotlib one.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

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
        x, y, z = _sphere_mesh(3**0.5)
        fig.add_trace(
            go.Surface(
                x=x,
                y=y,
                z=z,
                opacity=0.12,
                showscale=False,
                colorscale=[[0, "grey"], [1, "grey"]],
                hoverinfo="skip",
                name="sphere",
            ),
            row=1,
            col=col,
        )
        if hyperplane[name]:
            x, y, z = _plane_mesh(2.2)
            fig.add_trace(
                go.Surface(
                    x=x,
                    y=y,
                    z=z,
                    opacity=0.25,
                    showscale=False,
                    colorscale=[[0, "orange"], [1, "orange"]],
                    hoverinfo="skip",
                    name="x·1 = 0",
                ),
                row=1,
                col=col,
            )
        ones = np.array([[0, 0, 0], [1, 1, 1]]) * 1.2
        fig.add_trace(
            go.Scatter3d(
                x=ones[:, 0],
                y=ones[:, 1],
                z=ones[:, 2],
                mode="lines+text",
                text=["", "1"],
                line=dict(color="black", width=4),
                showlegend=False,
            ),
            row=1,
            col=col,
        )
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

# --- A4/A5 noun probes, A6 SVD tables, C1 probe rates --------------------------------------------------

# --- A7 traveling words, C2 travel in the full space ----------------------------------------------------
