"""Chapter A1's study and figures: one block's input norm and one head drawn on a few coordinates of real states."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import Tensor

from ..models.capture import capture
from ..models.loading import Model
from ..models.view import Norm
from ..stats import exact, not_applicable
from ..traveling_words.norms import (
    beta_shift,
    block_share,
    circle,
    construction_gap,
    cos_to_ones,
    gamma_axis_ratio,
    planar_stages,
    qk_forms,
    strongest_coordinates,
)


@dataclass
class NormGeometry:
    """The A1 drawing: one block's input norm and one head, on real states restricted to a few coordinates.

    `coords` are the three drawn coordinates (the 2-D panels use the first two); `heads` holds, per head, its
    strongest pair of coordinates and that pair's share of the form; `states` `(n, 3)` the states on
    `coords`; `stages` and `curve` the `planar_stages` of the states and of the circle of radius sqrt(2)
    (`(n, 2)` and `(200, 2)` each); `panels` the 3-D point sets `(n, 3)` per norm (`sphere_panels`);
    `checks` the identities' largest violations (`planar_checks`, `sphere_checks`) and `ellipse_residual`, the
    `construction_gap` of the block's norm module on the drawn states in all d coordinates."""

    block: int
    head: int
    coords: list[int]
    norm: Norm
    heads: pd.DataFrame
    share_2d: float
    share_3d: float
    W_QK: Tensor
    states: np.ndarray
    stages: dict[str, Tensor]
    curve: dict[str, Tensor]
    panels: dict[str, dict[str, np.ndarray]]
    hyperplane: dict[str, bool]
    checks: dict[str, float]
    gamma_axis_ratio: float
    q_norm: bool

    @property
    def gamma_2d(self) -> np.ndarray:
        """gamma on the two drawn coordinates `(2,)`."""
        return self.norm.gamma[self.coords[:2]].cpu().double().numpy()

    @property
    def beta_2d(self) -> np.ndarray | None:
        """beta on the two drawn coordinates `(2,)`, None for a norm without beta."""
        beta = self.norm.beta
        return None if beta is None else beta[self.coords[:2]].cpu().double().numpy()

    @property
    def flipped_coords(self) -> list[int]:
        """The drawn coordinates (of the two) whose gamma is negative: gamma flips their axis."""
        return [c for c, g in zip(self.coords[:2], self.gamma_2d) if g < 0]

    @property
    def singular_values(self) -> np.ndarray:
        """Singular values of the `(2, 2)` W_QK block, largest first."""
        return torch.linalg.svdvals(self.W_QK).numpy()

    @property
    def determinant(self) -> float:
        """Determinant of the `(2, 2)` W_QK block (negative: it flips the plane)."""
        return float(torch.linalg.det(self.W_QK))

    def summary(self) -> dict:
        """The chapter's recorded values: the drawing's choices, the identities' largest violations
        (exact over the drawn states), the stretch of gamma and the shift of beta (exact over its d
        coordinates; not applicable without beta)."""
        n, d = len(self.states), len(self.norm.gamma)
        identities = (
            "circle_eps_gap",
            "ellipse_residual",
            "ln_max_abs_cos_ones",
            "ln_gamma_plane_residual",
        )
        return {
            "model_norm": self.norm.kind,
            "centers": self.norm.centers,
            "has_beta": self.norm.beta is not None,
            "block": self.block,
            "head": self.head,
            "coords": self.coords,
            "gamma_2d": self.gamma_2d.tolist(),
            "n_states": n,
            **{k: exact(self.checks[k], n=n, unit="states") for k in identities},
            "gamma_axis_ratio": exact(self.gamma_axis_ratio, n=d, unit="coordinates"),
            "beta_shift": not_applicable("an RMSNorm has no β")
            if self.norm.beta is None
            else exact(
                beta_shift(self.norm.gamma, self.norm.beta), n=d, unit="coordinates"
            ),
            "form_share_2d": exact(self.share_2d, n=d**2, unit="entries of the form"),
            "form_share_3d": self.share_3d,
            "rms_mean_abs_cos_ones_3d": self.checks["rms_mean_abs_cos_ones_3d"],
            "qk_block_singular_values": self.singular_values.tolist(),
        }


def norm_geometry(
    model: Model,
    ids: np.ndarray,
    block: int,
    head: int | None = None,
    coords: list[int] | None = None,
    min_gamma_ratio: float = 2.0,
    first: int = 0,
) -> NormGeometry:
    """Draw block `block`'s input norm and one head on the states x(block) of `ids` `(N, T)`, positions from
    `first` on. `head` (None: the head whose strongest pair carries most of its form) and `coords` (None:
    its strongest three, `strongest_coordinates`, the first two `|gamma|` at least `min_gamma_ratio` apart)."""
    view, norm = model.view, model.view.block_norm(block)
    X = capture(model, ids, all_positions=True)[:, first:, block, :]
    X = torch.from_numpy(X.reshape(-1, view.d_model))
    forms = qk_forms(view, block)  # (H, d, d)
    picks = [strongest_coordinates(f, 2, norm.gamma, min_gamma_ratio) for f in forms]
    if head is None:
        head = int(np.argmax([share for _, share in picks]))
    if coords is None:
        coords = strongest_coordinates(forms[head], 3, norm.gamma, min_gamma_ratio)[0]
    coords = [int(c) for c in coords]
    heads = view.heads(block)
    W2 = heads.W_QK(head)[coords[:2]][:, coords[:2]].cpu().double()
    norm2 = norm.restrict(coords[:2])
    stages = planar_stages(X[:, coords[:2]], norm2, W2)
    panels, hyperplane = sphere_panels(X[:, coords], norm, coords)
    return NormGeometry(
        block=block,
        head=head,
        coords=coords,
        norm=norm,
        heads=pd.DataFrame(
            picks, columns=["strongest pair", "share of the form"]
        ).rename_axis("head"),
        share_2d=block_share(forms[head], coords[:2]),
        share_3d=block_share(forms[head], coords),
        W_QK=W2,
        states=X[:, coords].numpy(),
        stages=stages,
        curve=planar_stages(circle() * 2**0.5, norm2, W2),
        panels=panels,
        hyperplane=hyperplane,
        checks={
            **planar_checks(X[:, coords[:2]], stages, norm2),
            **sphere_checks(X[:, coords], norm, coords),
            "ellipse_residual": construction_gap(
                view.block_norm_module(block), norm, X
            ),
        },
        gamma_axis_ratio=gamma_axis_ratio(norm.gamma),
        q_norm=heads.q_norm is not None,
    )


def planar_checks(
    points: Tensor, stages: dict[str, Tensor], norm: Norm
) -> dict[str, float]:
    """Identities of the 2-D stages of `points` `(n, 2)` (`norm` restricted to the two coordinates):
    `circle_eps_gap`, the largest `|radius - eps formula|` of the normalized points, and the radii's range."""
    radius = stages["normalized"].norm(dim=1)
    unit = Norm.unit("rms", points.shape[1], norm.eps)
    return {
        "circle_eps_gap": float((radius - unit.predicted_norm(points)).abs().max()),
        "radius_min": float(radius.min()),
        "radius_max": float(radius.max()),
    }


def _both_kinds(norm: Norm, coords: list[int]) -> tuple[Norm, Norm]:
    """LayerNorm and RMSNorm with `norm`'s gamma (no beta) on `coords`."""
    return tuple(norm.with_kind(kind).restrict(coords) for kind in ("layer", "rms"))


def sphere_panels(
    points: Tensor, norm: Norm, coords: list[int]
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, bool]]:
    """The 3-D view of `points` `(n, 3)` (states on `coords`): per panel (LayerNorm, RMSNorm with the
    model's gamma, no beta; the model's own norm is named so), the states, the normalized states and gamma
    times them, `(n, 3)` each; and whether the panel shows the hyperplane x . 1 = 0."""
    ln, rms = _both_kinds(norm, coords)
    ln_name = (
        "LayerNorm (the model's norm, without β)"
        if norm.centers
        else "LayerNorm (illustration: model's γ, no β)"
    )
    rms_name = (
        "RMSNorm (illustration)" if norm.centers else "RMSNorm (the model's norm)"
    )
    panels = {
        ln_name: {"states x": points, "centered and scaled": ln.normalize(points)},
        rms_name: {"states x": points, "scaled": rms.normalize(points)},
    }
    for sets, n in zip(panels.values(), (ln, rms)):
        sets["then × γ"] = n(points)
    panels = {k: {s: P.numpy() for s, P in v.items()} for k, v in panels.items()}
    return panels, {ln_name: True, rms_name: False}


def sphere_checks(points: Tensor, norm: Norm, coords: list[int]) -> dict[str, float]:
    """Identities of the 3-D view of `points` `(n, 3)`: LayerNorm's largest `|cos(x̂, 1)|`
    (`ln_max_abs_cos_ones`) and largest `|(y / gamma) . 1|` after gamma (`ln_gamma_plane_residual`); RMSNorm's
    mean `|cos(x̂, 1)|` (`rms_mean_abs_cos_ones_3d`); the range of both normalized radii."""
    ln, rms = _both_kinds(norm, coords)
    ln_hat, rms_hat = ln.normalize(points), rms.normalize(points)
    radius = torch.cat([ln_hat.norm(dim=1), rms_hat.norm(dim=1)])
    return {
        "ln_max_abs_cos_ones": float(cos_to_ones(ln_hat).abs().max()),
        "ln_gamma_plane_residual": float(
            (ln(points) / ln.gamma.cpu()).sum(1).abs().max()
        ),
        "rms_mean_abs_cos_ones_3d": float(cos_to_ones(rms_hat).abs().mean()),
        "radius_3d_min": float(radius.min()),
        "radius_3d_max": float(radius.max()),
    }


# grey, blue, red, green: one per point set
PALETTE = ("#9e9e9e", "#1f77b4", "#d62728", "#2ca02c")


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
