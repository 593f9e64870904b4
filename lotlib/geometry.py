"""The geometry of the norms (Traveling Words, Part I): sphere, hyperplane, gamma, beta, and what the
final norm lets the unembedding reach.

LayerNorm centres x (projects it on the hyperplane x . 1 = 0), scales it onto the sphere of radius
sqrt(d), stretches by gamma and shifts by beta. RMSNorm only scales and stretches. Before gamma the
normalized norm is sqrt(d * m / (m + eps)), with m the variance (LayerNorm) or the mean square
(RMSNorm) of x: sqrt(d) up to eps.
"""
from __future__ import annotations

from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from scipy.special import gammaln
from scipy.stats import beta as beta_distribution
from torch import Tensor
from tqdm.auto import tqdm

from .capture_hooks import capture
from .models import Model
from .view import ModelView, Norm

# ------------------------------------------------------------------------------------------------
# norms, restricted and re-kinded


def reading_norms(view: ModelView) -> list[Norm]:
    """The norm that reads x(t), t = 0..L: block t's input norm for t < L, the final norm at t = L."""
    return [view.block_norm(t) for t in range(view.n_layers)] + [view.final_norm]


def restrict(norm: Norm, coords) -> Norm:
    """The same norm acting on a few coordinates only (gamma and beta restricted to `coords`)."""
    coords = list(coords)
    return Norm(norm.kind, norm.gamma[coords], None if norm.beta is None else norm.beta[coords], norm.eps)


def as_kind(norm: Norm, kind: str) -> Norm:
    """A `kind` ("layer" or "rms") norm with this norm's gamma and eps and no beta."""
    return Norm(kind, norm.gamma, None, norm.eps)


def unit_norm(kind: str, d: int, eps: float) -> Norm:
    """A norm without gamma and beta (gamma = 1): only the centring (LayerNorm) and the scaling."""
    return Norm(kind, torch.ones(d), None, eps)


# ------------------------------------------------------------------------------------------------
# identities of the normalized state


def second_moment(kind: str, x: Tensor) -> Tensor:
    """The quantity the norm divides by before eps: variance (LayerNorm) or mean square (RMSNorm), float64."""
    x = x.double()
    if kind == "layer":
        x = x - x.mean(-1, keepdim=True)
    return x.pow(2).mean(-1)


def predicted_norm(norm: Norm, x: Tensor) -> Tensor:
    """||normalize(x)|| as eps makes it: sqrt(d * m / (m + eps)), float64, `(...)`."""
    m = second_moment(norm.kind, x)
    return torch.sqrt(x.shape[-1] * m / (m + norm.eps))


def cos_to_ones(x: Tensor) -> Tensor:
    """cos(x, 1) = mean(x) sqrt(d) / ||x||, float64 `(...)`: the signed distance of x from the hyperplane
    x . 1 = 0 relative to ||x|| (0 after LayerNorm's centring)."""
    x = x.double()
    return x.sum(-1) / (x.shape[-1] ** 0.5 * x.norm(dim=-1))


def random_cos_to_ones(d: int) -> float:
    """E|cos(x, 1)| for a uniformly random direction in d dimensions (1/2 for d = 3, ~sqrt(2 / (pi d)))."""
    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / np.sqrt(np.pi))


@torch.inference_mode()
def norm_statistics(model: Model, ids: np.ndarray, batch_size: int = 8, progress: bool = True) -> dict:
    """Per state x(t) of every position of `ids` `(N, T)`, each `(N, T, L+1)`, and `d`:

    `residual` ||x(t)||; `normalized` ||normalize(x(t))|| computed in float32 as the model does, by the
    norm that reads x(t) (see `reading_norms`); `predicted` the eps formula (float64); `cos_ones`
    cos(x(t), 1), signed. Captured `batch_size` sequences at a time, so memory stays small.
    """
    norms = reading_norms(model.view)
    parts = []
    for start in tqdm(range(0, len(ids), batch_size), desc="norm statistics", unit="batch", disable=not progress):
        X = torch.from_numpy(capture(model, ids[start:start + batch_size], all_positions=True, progress=False))
        per_layer = [(X[..., t, :].norm(dim=-1).double(), norm.normalize(X[..., t, :]).double().norm(dim=-1),
                      predicted_norm(norm, X[..., t, :]), cos_to_ones(X[..., t, :]))
                     for t, norm in enumerate(norms)]
        parts.append([torch.stack(column, -1).numpy() for column in zip(*per_layer)])
    names = ("residual", "normalized", "predicted", "cos_ones")
    return {"d": model.view.d_model, **{name: np.concatenate(column) for name, column in zip(names, zip(*parts))}}


def norm_table(stats: dict) -> pd.DataFrame:
    """One row per layer t = 0..L from `norm_statistics` output (the norm reading x(t) is block t's input
    norm, or the final norm at t = L): residual norm, normalized norm and its gap to sqrt(d), measured
    and eps-predicted, and cos(x, 1)."""
    d = stats["d"]
    residual, normalized, predicted, cos = (stats[k].reshape(-1, stats[k].shape[-1])
                                            for k in ("residual", "normalized", "predicted", "cos_ones"))
    L = residual.shape[1] - 1
    return pd.DataFrame({
        "reading norm": [f"block {t} input" for t in range(L)] + ["final"],
        "||x|| median": np.median(residual, 0), "||x|| mean": residual.mean(0),
        "||x̂|| mean": normalized.mean(0),
        "sqrt(d) - ||x̂|| measured": d ** 0.5 - normalized.mean(0),
        "sqrt(d) - ||x̂|| eps-predicted": d ** 0.5 - predicted.mean(0),
        "max |measured - predicted|": np.abs(normalized - predicted).max(0),
        "mean |cos(x, 1)|": np.abs(cos).mean(0),
    }, index=pd.RangeIndex(L + 1, name="t"))


def random_cos_density(c: np.ndarray, d: int) -> np.ndarray:
    """Density of cos(x, 1) for a uniformly random direction in d dimensions: (c+1)/2 ~ Beta((d-1)/2, (d-1)/2)."""
    return beta_distribution.pdf((np.asarray(c) + 1) / 2, (d - 1) / 2, (d - 1) / 2) / 2


# ------------------------------------------------------------------------------------------------
# A1: the operations on a few coordinates


def qk_forms(view: ModelView, layer: int) -> Tensor:
    """Each head's query-key form on the state before gamma, diag(gamma) W_QK^h diag(gamma): `(H, d, d)`.

    It is the part of the score that the normalized vectors see (beta left out)."""
    heads, gamma = view.heads(layer), view.block_norm(layer).gamma.double()
    W_QK = torch.einsum("hde,hfe->hdf", heads.W_Q.double(), heads.W_K.double()) * heads.scaling
    return gamma[:, None] * W_QK * gamma


def strongest_coordinates(form: Tensor, k: int, gamma: Tensor | None = None,
                          min_ratio: float = 1.0) -> tuple[list[int], float]:
    """Greedy choice of k coordinates whose k x k block carries the most of `form` `(d, d)`.

    Starts from the best pair, among pairs whose |gamma| differ at least `min_ratio`-fold when `gamma`
    is given and such pairs exist (so that gamma visibly stretches the circle), then adds one
    coordinate at a time. Returns the coordinates and the share of ||form||_F^2 in their block.
    """
    A = form.double().pow(2)
    pair = torch.diagonal(A)[:, None] + torch.diagonal(A)[None, :] + A + A.T
    pair.fill_diagonal_(-1.0)
    if gamma is not None:
        g = gamma.double().abs()
        ratio = torch.maximum(g[:, None], g[None, :]) / torch.minimum(g[:, None], g[None, :])
        allowed = ratio >= min_ratio
        if allowed.any():  # otherwise (gamma nearly uniform) every pair is allowed
            pair[~allowed] = -1.0
    i, j = divmod(int(pair.argmax()), A.shape[0])
    coords = [i, j]
    while len(coords) < k:
        gain = A[coords].sum(0) + A[:, coords].sum(1) + torch.diagonal(A)
        gain[coords] = -1.0
        coords.append(int(gain.argmax()))
    return coords, block_share(form, coords)


def block_share(form: Tensor, coords) -> float:
    """Share of ||form||_F^2 in the block of `coords` (rows and columns)."""
    A = form.double().pow(2)
    coords = list(coords)
    return float(A[coords][:, coords].sum() / A.sum())


def planar_stages(points: Tensor, norm: Norm, W: Tensor) -> dict[str, Tensor]:
    """The schematic of Traveling Words on k-dimensional `points` `(n, k)`, each stage `(n, k)`:

    `normalized` onto the circle (sphere) of radius sqrt(k) (scaling only: in 2-D, centring would leave
    two points), `stretched` by gamma, `shifted` by beta (unchanged without beta), `mapped` by `W`
    `(k, k)` (a query x goes to x W, the key direction it seeks). `norm` is already restricted.
    """
    normalized = unit_norm("rms", points.shape[-1], norm.eps).normalize(points).double()
    stretched = normalized * norm.gamma.double()
    shifted = stretched if norm.beta is None else stretched + norm.beta.double()
    return {"normalized": normalized, "stretched": stretched, "shifted": shifted, "mapped": shifted @ W.double()}


def circle(k_points: int = 200) -> Tensor:
    """`(k_points, 2)` points of the unit circle, for drawing whole curves through the stages."""
    angle = torch.linspace(0, 2 * np.pi, k_points, dtype=torch.float64)
    return torch.stack([angle.cos(), angle.sin()], -1)


# ------------------------------------------------------------------------------------------------
# A2: global centering and scaling of the embeddings against the norm

VARIANTS = ("Original E", "Centered E-c", "Scaled sE", "Centered & scaled s(E-c)")


def global_variants(E: Tensor) -> Iterator[tuple[str, Tensor]]:
    """E, E - c, sE, s(E - c) with c the mean row and s = sqrt(d) / mean ||e|| (float64), one at a time:
    yields (name, `(V, d)`)."""
    E = E.double()
    c = E.mean(0)
    s = E.shape[1] ** 0.5 / E.norm(dim=1).mean()
    yield VARIANTS[0], E
    yield VARIANTS[1], E - c
    yield VARIANTS[2], s * E
    yield VARIANTS[3], s * (E - c)


def row_distances(E: Tensor, reference: Norm) -> dict[str, tuple[Tensor, Tensor]]:
    """Per row of each global variant: (L2 distance, cosine distance) to reference.normalize(E), `(V,)` each."""
    R = reference.normalize(E).double()
    R_norm = R.norm(dim=1)
    out = {}
    for name, A in global_variants(E):
        cos = torch.einsum("vd,vd->v", A, R) / (A.norm(dim=1) * R_norm)
        out[name] = ((A - R).norm(dim=1), 1 - cos)
    return out


def distance_table(distances: dict[str, tuple[Tensor, Tensor]]) -> pd.DataFrame:
    """mean and std of the L2 and cosine distances, one row per variant."""
    rows = {name: {"L2 mean": float(l2.mean()), "L2 std": float(l2.std()),
                   "cosine mean": float(cd.mean()), "cosine std": float(cd.std())}
            for name, (l2, cd) in distances.items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def table_identities(E: Tensor, reference: Norm,
                     distances: dict[str, tuple[Tensor, Tensor]]) -> dict[str, float]:
    """Largest violation of each exact identity of the table (0 up to float64 rounding, or up to eps):

    cos(Original) = cos(Scaled); cos(Centered) = cos(Centered & scaled);
    ||ref(e)|| = sqrt(d * m / (m + eps)) (and its distance from sqrt(d), which is eps's doing).
    """
    cd = {name: d[1] for name, d in distances.items()}
    norms = reference.normalize(E.double()).double().norm(dim=1)
    return {"cos_original_vs_scaled": float((cd[VARIANTS[0]] - cd[VARIANTS[2]]).abs().max()),
            "cos_centered_vs_centered_scaled": float((cd[VARIANTS[1]] - cd[VARIANTS[3]]).abs().max()),
            "norm_vs_eps_formula": float((norms - predicted_norm(reference, E)).abs().max()),
            "norm_vs_sqrt_d": float((norms - E.shape[1] ** 0.5).abs().max())}


# ------------------------------------------------------------------------------------------------
# A3: reachable tokens

SCORES = ("||e||", "||gamma*e||", "||e|| + beta.e", "||gamma*e|| + beta.e", "max logit")


def reachability_scores(norm: Norm, U: Tensor, b_U: Tensor | None = None) -> pd.DataFrame:
    """The paper's four scores of each token's unembedding vector u = e (rows of `U` `(V, d)`), and the
    largest logit the final norm can give the token, `max logit`:

    sqrt(d) ||P(gamma * u)|| + beta . u + b_U, with P the projection on the hyperplane x . 1 = 0 for
    LayerNorm and the identity for RMSNorm (the normalized state ranges over that sphere; eps ignored).
    beta = 0 when the norm has none. Returns a `(V, 5)` frame indexed by token id.
    """
    U = U.double()
    beta = torch.zeros(U.shape[1], dtype=torch.float64) if norm.beta is None else norm.beta.double()
    g_u = U * norm.gamma.double()
    bias = 0.0 if b_U is None else b_U.double()
    columns = (U.norm(dim=1), g_u.norm(dim=1), U.norm(dim=1) + U @ beta, g_u.norm(dim=1) + U @ beta,
               U.shape[1] ** 0.5 * _reachable_part(norm, U).norm(dim=1) + U @ beta + bias)
    return pd.DataFrame({name: c.numpy() for name, c in zip(SCORES, columns)})


def _reachable_part(norm: Norm, U: Tensor) -> Tensor:
    """P(gamma * u) for each row u of `U`: the part of gamma * u that a normalized state can align with."""
    g_u = U.double() * norm.gamma.double()
    return g_u - g_u.mean(1, keepdim=True) if norm.kind == "layer" else g_u


def best_states(norm: Norm, U: Tensor) -> Tensor:
    """For each row u of `U` `(k, d)`, the state on the norm's sphere (and hyperplane, LayerNorm) that gives
    u its largest logit: sqrt(d) P(gamma * u) / ||P(gamma * u)||, `(k, d)`."""
    reach = _reachable_part(norm, U)
    return U.shape[1] ** 0.5 * reach / reach.norm(dim=1, keepdim=True)


def rank_at_best_state(norm: Norm, W_U: Tensor, b_U: Tensor | None,
                       token_ids) -> tuple[np.ndarray, np.ndarray]:
    """Each token's rank among all logits (0 = top prediction) and its logit, when the residual state is
    its best state (`best_states`), passed through the norm and the unembedding `W_U` `(d, V)`."""
    token_ids = torch.as_tensor(list(token_ids))
    logits = norm(best_states(norm, W_U.T[token_ids]).float()) @ W_U.float()
    if b_U is not None:
        logits = logits + b_U.float()
    own = logits.gather(1, token_ids[:, None])
    return (logits > own).sum(1).numpy(), own[:, 0].numpy()


def extreme_tokens(scores: pd.DataFrame, tokenizer, k: int = 5) -> dict[str, pd.DataFrame]:
    """For each score, the top-k and bottom-k tokens as `repr` of the decoded string with the score."""
    def table(order) -> pd.DataFrame:
        return pd.DataFrame({name: [f"{tokenizer.decode([int(i)])!r} ({scores[name][i]:.2f})"
                                    for i in order(scores[name])] for name in scores},
                            index=pd.RangeIndex(1, k + 1, name="rank"))
    return {"top": table(lambda s: s.nlargest(k).index), "bottom": table(lambda s: s.nsmallest(k).index)}


# ------------------------------------------------------------------------------------------------
# figures: sphere, hyperplane and the points on them

PALETTE = ("#9e9e9e", "#1f77b4", "#d62728", "#2ca02c")  # grey, blue, red, green: one per point set


def _sphere_mesh(radius: float, n: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, n), np.linspace(0, np.pi, n))
    return radius * np.cos(u) * np.sin(v), radius * np.sin(u) * np.sin(v), radius * np.cos(v)


def _plane_mesh(radius: float, n: int = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A disc of the plane x + y + z = 0 of the given radius."""
    a = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    b = np.array([1.0, 1.0, -2.0]) / np.sqrt(6)
    r, t = np.meshgrid(np.linspace(0, radius, n), np.linspace(0, 2 * np.pi, 4 * n))
    P = (r * np.cos(t))[..., None] * a + (r * np.sin(t))[..., None] * b
    return P[..., 0], P[..., 1], P[..., 2]


def sphere_figure(panels: dict[str, dict[str, np.ndarray]], hyperplane: dict[str, bool], axis_names,
                  title: str) -> go.Figure:
    """Rotatable 3-D panels: the sphere of radius sqrt(3), the hyperplane x . 1 = 0 where asked, and
    point sets `panels[panel][label]` `(n, 3)`."""
    names = list(panels)
    fig = make_subplots(rows=1, cols=len(names), specs=[[{"type": "scene"}] * len(names)], subplot_titles=names)
    for col, name in enumerate(names, start=1):
        x, y, z = _sphere_mesh(3 ** 0.5)
        fig.add_trace(go.Surface(x=x, y=y, z=z, opacity=0.12, showscale=False,
                                 colorscale=[[0, "grey"], [1, "grey"]], hoverinfo="skip", name="sphere"),
                      row=1, col=col)
        if hyperplane[name]:
            x, y, z = _plane_mesh(2.2)
            fig.add_trace(go.Surface(x=x, y=y, z=z, opacity=0.25, showscale=False,
                                     colorscale=[[0, "orange"], [1, "orange"]], hoverinfo="skip", name="x·1 = 0"),
                          row=1, col=col)
        ones = np.array([[0, 0, 0], [1, 1, 1]]) * 1.2
        fig.add_trace(go.Scatter3d(x=ones[:, 0], y=ones[:, 1], z=ones[:, 2], mode="lines+text", text=["", "1"],
                                   line=dict(color="black", width=4), showlegend=False), row=1, col=col)
        for (label, P), color in zip(panels[name].items(), PALETTE):
            fig.add_trace(go.Scatter3d(x=P[:, 0], y=P[:, 1], z=P[:, 2], mode="markers", name=f"{name}: {label}",
                                       marker=dict(size=2, color=color)), row=1, col=col)
    fig.update_scenes(xaxis_title=axis_names[0], yaxis_title=axis_names[1], zaxis_title=axis_names[2],
                      aspectmode="cube", camera=dict(eye=dict(x=1.8, y=0.5, z=0.7)))
    fig.update_layout(title=title, height=560, margin=dict(l=0, r=0, t=60, b=0), legend=dict(itemsizing="constant"))
    return fig


def sphere_static(panels: dict[str, dict[str, np.ndarray]], hyperplane: dict[str, bool], axis_names, title: str,
                  elev: float = 20, azim: float = 15):
    """Static matplotlib version of `sphere_figure`, seen from (elev, azim) degrees; returns the figure.

    The default view is 30 degrees off the all-ones direction: the plane x . 1 = 0 shows as a tilted disc."""
    fig = plt.figure(figsize=(5.5 * len(panels), 5.5))
    for col, (name, sets) in enumerate(panels.items(), start=1):
        ax = fig.add_subplot(1, len(panels), col, projection="3d")
        ax.plot_wireframe(*_sphere_mesh(3 ** 0.5, 20), color="grey", alpha=0.15, lw=0.5)
        if hyperplane[name]:
            ax.plot_surface(*_plane_mesh(2.2), color="orange", alpha=0.2, lw=0)
        ax.quiver(0, 0, 0, 1.2, 1.2, 1.2, color="black", lw=1.5)
        for (label, P), color in zip(sets.items(), PALETTE):
            ax.scatter(P[:, 0], P[:, 1], P[:, 2], s=3, color=color, label=label, depthshade=False)
        ax.set(xlabel=axis_names[0], ylabel=axis_names[1], zlabel=axis_names[2], title=name)
        ax.set_box_aspect((1, 1, 1))
        ax.view_init(elev=elev, azim=azim)
        ax.legend(loc="upper left", fontsize=7)
    fig.suptitle(title)
    return fig
