"""The geometry of the norms: the sphere, the hyperplane x . 1 = 0, gamma and beta, on states and embeddings."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import pandas as pd
import torch
from scipy.special import gammaln
from scipy.stats import beta as beta_distribution
from torch import Tensor, nn
from tqdm.auto import tqdm

from ..models.capture import capture
from ..models.corpus import Corpus
from ..models.loading import Model
from ..models.view import ModelView, Norm

# ------------------------------------------------------------------------------------------------
# identities of the normalized state (the norms themselves, `Norm`, live in the model view)


def cos_to_ones(x: Tensor) -> Tensor:
    """cos(x, 1) = mean(x) sqrt(d) / `||x||`, float64 `(...)`: the signed distance of x from the hyperplane
    x . 1 = 0 relative to `||x||` (0 after LayerNorm's centering)."""
    x = x.double()
    return x.sum(-1) / (x.shape[-1] ** 0.5 * x.norm(dim=-1))


def gamma_axis_ratio(gamma: Tensor, q: float = 0.05) -> float:
    """How far gamma stretches the sphere from a sphere: the ratio of the (1 - q) to the q quantile of abs(gamma)
    over the d coordinates `(d,)` (the ellipsoid's long to short axes, robust to a few outlying coordinates).
    1 for gamma = 1 (an untrained norm), inf when the q quantile is 0."""
    g = gamma.detach().cpu().double().abs()
    low, high = torch.quantile(g, torch.tensor([q, 1 - q], dtype=torch.float64))
    return float(high / low) if low > 0 else float("inf")


def beta_shift(gamma: Tensor, beta: Tensor) -> float:
    """How far beta moves the ellipsoid from the origin, against the ellipsoid's size: ||beta|| / ||gamma||
    (a point gamma * x_hat of the ellipsoid has norm about ||gamma||, x_hat on the sphere of radius sqrt(d)).
    0 for an untrained norm (beta = 0)."""
    return float(beta.detach().double().norm() / gamma.detach().double().norm())


def random_cos_to_ones(d: int) -> float:
    """The mean `|cos(x, 1)|` for a uniformly random direction in d dimensions (1/2 for d = 3, ~sqrt(2 / (pi d)))."""
    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / np.sqrt(np.pi))


@torch.inference_mode()
def norm_statistics(
    model: Model,
    ids: np.ndarray,
    first: int = 0,
    batch_size: int = 8,
    progress: bool = True,
) -> dict:
    """Per state x(t) of every position from `first` on of `ids` `(N, T)` (earlier positions, a BOS, are context
    only), each `(N, T - first, L+1)`, and `d`:

    `residual` `||x(t)||`; `normalized` `||normalize(x(t))||` computed in float32 as the model does, by the
    norm that reads x(t) (see `reading_norms`); `predicted` the eps formula (float64) and `second_moment` the
    m it divides by (float64); `cos_ones`
    cos(x(t), 1) of the state itself and `cos_ones_normalized` cos(x̂(t), 1) of the normalized state x̂ (before
    gamma), both signed: LayerNorm's centering makes the second 0, RMSNorm leaves it equal to the first.
    Captured `batch_size` sequences at a time (states come back on the CPU), so memory stays small.
    """
    # normalize uses neither gamma nor beta: it runs on the CPU states
    norms = model.view.reading_norms()
    parts = []
    for start in tqdm(
        range(0, len(ids), batch_size),
        desc="norm statistics",
        unit="batch",
        disable=not progress,
    ):
        X = torch.from_numpy(
            capture(
                model,
                ids[start : start + batch_size],
                all_positions=True,
                progress=False,
            )[:, first:]
        )
        per_layer = []
        for t, norm in enumerate(norms):
            x_hat = norm.normalize(X[..., t, :])
            per_layer.append(
                (
                    X[..., t, :].norm(dim=-1).double(),
                    x_hat.double().norm(dim=-1),
                    norm.predicted_norm(X[..., t, :]),
                    norm.second_moment(X[..., t, :]),
                    cos_to_ones(X[..., t, :]),
                    cos_to_ones(x_hat),
                )
            )
        parts.append([torch.stack(column, -1).numpy() for column in zip(*per_layer)])
    names = (
        "residual",
        "normalized",
        "predicted",
        "second_moment",
        "cos_ones",
        "cos_ones_normalized",
    )
    return {
        "d": model.view.d_model,
        **{name: np.concatenate(column) for name, column in zip(names, zip(*parts))},
    }


def norm_table(stats: dict) -> pd.DataFrame:
    """One row per layer t = 0..L from `norm_statistics` output (the norm reading x(t) is block t's input
    norm, or the final norm at t = L): residual norm, normalized norm and its gap to sqrt(d), measured
    and eps-predicted, and cos(x, 1)."""
    d = stats["d"]
    residual, normalized, predicted, cos = (
        stats[k].reshape(-1, stats[k].shape[-1])
        for k in ("residual", "normalized", "predicted", "cos_ones")
    )
    L = residual.shape[1] - 1
    return pd.DataFrame(
        {
            "reading norm": [f"block {t} input" for t in range(L)] + ["final"],
            "||x|| median": np.median(residual, 0),
            "||x|| mean": residual.mean(0),
            "||x̂|| mean": normalized.mean(0),
            "sqrt(d) - ||x̂|| measured": d**0.5 - normalized.mean(0),
            "sqrt(d) - ||x̂|| eps-predicted": d**0.5 - predicted.mean(0),
            "max |measured - predicted|": np.abs(normalized - predicted).max(0),
            "mean |cos(x, 1)|": np.abs(cos).mean(0),
        },
        index=pd.RangeIndex(L + 1, name="t"),
    )


def random_cos_density(c: np.ndarray, d: int) -> np.ndarray:
    """Density of cos(x, 1) for a uniformly random direction in d dimensions: (c+1)/2 ~ Beta((d-1)/2, (d-1)/2)."""
    return beta_distribution.pdf((np.asarray(c) + 1) / 2, (d - 1) / 2, (d - 1) / 2) / 2


def drawn_sentences(corpus: Corpus, n_s: int, seed: int = 0) -> np.ndarray:
    """`(min(n_s, N_s), N_k)` pseudo-sentences of `corpus` drawn at random (seeded, without replacement),
    in corpus order."""
    rng = np.random.default_rng(seed)
    size = min(n_s, corpus.n_s)
    return corpus.ids[np.sort(rng.choice(corpus.n_s, size=size, replace=False))]


# ------------------------------------------------------------------------------------------------
# A1: the operations on a few coordinates


def qk_forms(view: ModelView, layer: int) -> Tensor:
    """Each head's query-key form on the state before gamma, diag(gamma) W_QK^h diag(gamma): `(H, d, d)`.

    It is the part of the score that the normalized vectors see (beta left out)."""
    # float64 work on the CPU
    heads, gamma = view.heads(layer), view.block_norm(layer).gamma.cpu().double()
    W_QK = (
        torch.einsum("hde,hfe->hdf", heads.W_Q.cpu().double(), heads.W_K.cpu().double())
        * heads.scaling
    )
    return gamma[:, None] * W_QK * gamma


def strongest_coordinates(
    form: Tensor, k: int, gamma: Tensor | None = None, min_ratio: float = 1.0
) -> tuple[list[int], float]:
    """Greedy choice of k coordinates whose k x k block carries the most of `form` `(d, d)`.

    Starts from the best pair, among pairs whose abs(gamma) differ at least `min_ratio`-fold when `gamma`
    is given and such pairs exist (so that gamma visibly stretches the circle), then adds one
    coordinate at a time. Returns the coordinates and their block's share of the squared Frobenius norm of `form`.
    """
    A = form.double().pow(2)
    pair = torch.diagonal(A)[:, None] + torch.diagonal(A)[None, :] + A + A.T
    pair.fill_diagonal_(-1.0)
    if gamma is not None:
        g = gamma.detach().cpu().double().abs()
        ratio = torch.maximum(g[:, None], g[None, :]) / torch.minimum(
            g[:, None], g[None, :]
        )
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
    """Share of `||form||`_F^2 in the block of `coords` (rows and columns)."""
    A = form.double().pow(2)
    coords = list(coords)
    return float(A[coords][:, coords].sum() / A.sum())


def geometric_norm(x: Tensor, norm: Norm) -> Tensor:
    """The paper's construction of `norm` on states `x` `(n, d)`, float64 `(n, d)`: project x on the hyperplane
    x . 1 = 0 with the matrix I - 11^T / d (LayerNorm only), move it along its direction onto the sphere of radius
    sqrt(d) (eps shrinks the radius to sqrt(d) ||c|| / sqrt(||c||^2 + d eps)), stretch by gamma, shift by beta."""
    c = x.double()
    d = c.shape[-1]
    if norm.centers:
        c = c @ (torch.eye(d, dtype=torch.float64) - 1.0 / d)
    on_sphere = c * d**0.5 / torch.sqrt(c.pow(2).sum(-1, keepdim=True) + d * norm.eps)
    y = on_sphere * norm.gamma.detach().cpu().double()
    return y if norm.beta is None else y + norm.beta.detach().cpu().double()


@torch.inference_mode()
def construction_gap(module: nn.Module, norm: Norm, x: Tensor) -> float:
    """Largest relative difference `||module(x) - geometric_norm(x)|| / ||geometric_norm(x)||` over the states
    `x` `(n, d)`: the model's own norm module (its code, run on a float32 copy on the CPU) against the paper's
    construction with the gamma and beta the view reads (float64). Float32 round-off (~1e-7) when the two are
    the same map; of order 1 when they are not (a wrong gamma, a missing centering)."""
    own = copy.deepcopy(module).to("cpu", torch.float32)
    ours = own(x.detach().cpu().float()).double()
    built = geometric_norm(x, norm)
    return float(((ours - built).norm(dim=-1) / built.norm(dim=-1)).max())


def planar_stages(points: Tensor, norm: Norm, W: Tensor) -> dict[str, Tensor]:
    """The schematic of Traveling Words on k-dimensional `points` `(n, k)`, each stage `(n, k)`:

    `normalized` onto the circle (sphere) of radius sqrt(k) (scaling only: in 2-D, centering would leave
    two points), `stretched` by gamma, `shifted` by beta (unchanged without beta), `mapped` by `W`
    `(k, k)` (a query x goes to x W, the key direction it seeks). `norm` is already restricted.
    """
    points, W = points.cpu(), W.cpu().double()
    normalized = Norm.unit("rms", points.shape[-1], norm.eps).normalize(points).double()
    stretched = normalized * norm.gamma.cpu().double()
    shifted = stretched if norm.beta is None else stretched + norm.beta.cpu().double()
    return {
        "normalized": normalized,
        "stretched": stretched,
        "shifted": shifted,
        "mapped": shifted @ W,
    }


def circle(k_points: int = 200) -> Tensor:
    """`(k_points, 2)` points of the unit circle, for drawing whole curves through the stages."""
    angle = torch.linspace(0, 2 * np.pi, k_points, dtype=torch.float64)
    return torch.stack([angle.cos(), angle.sin()], -1)


# ------------------------------------------------------------------------------------------------
# A2: global centering and scaling of the embeddings against the norm

VARIANTS = ("Original E", "Centered E-c", "Scaled sE", "Centered & scaled s(E-c)")


def global_variants(E: Tensor) -> Iterator[tuple[str, Tensor]]:
    """E, E - c, sE, s(E - c) with c the mean row and s = sqrt(d) / mean `||e||` (float64), one at a time:
    yields (name, `(V, d)`)."""
    E = E.detach().cpu().double()
    c = E.mean(0)
    s = E.shape[1] ** 0.5 / E.norm(dim=1).mean()
    yield VARIANTS[0], E
    yield VARIANTS[1], E - c
    yield VARIANTS[2], s * E
    yield VARIANTS[3], s * (E - c)


REFERENCES = ("LN(E) (the paper's)", "RMSNorm(E)")


def embedding_tables(W_E: Tensor, eps: float) -> dict:
    """The paper's table for the embedding matrix `W_E` `(V, d)` against each reference of `REFERENCES`
    (LayerNorm, RMSNorm without gamma and beta, with `eps`): per reference the rows left out (`skipped`),
    the `distances`, the `tables` (`distance_table`) and the `identities` (`table_identities`); and
    `||c||` (`mean_row_norm`), mean `||e||` (`mean_norm`), the largest cosine distance of E to RMSNorm(E)
    (`rms_cos_original_max`), the largest `violation` of the cosine identities and of the norm relative
    to sqrt(d) over both references, and the number of rows `n_rows`."""
    E = W_E.detach().cpu()
    d = E.shape[1]
    references = dict(zip(REFERENCES, (Norm.unit(k, d, eps) for k in ("layer", "rms"))))
    distances = {name: row_distances(E, ref) for name, ref in references.items()}
    identities = {
        n: table_identities(E, r, distances[n]) for n, r in references.items()
    }
    return {
        "skipped": {n: int(degenerate_rows(E, r).sum()) for n, r in references.items()},
        "distances": distances,
        "tables": {n: distance_table(dist) for n, dist in distances.items()},
        "identities": identities,
        "violation": max(  # the cosine identities, and the norm relative to sqrt(d)
            max(
                c["cos_original_vs_scaled"],
                c["cos_centered_vs_centered_scaled"],
                c["norm_vs_eps_formula"] / d**0.5,
            )
            for c in identities.values()
        ),
        "mean_row_norm": float(E.double().mean(0).norm()),
        "mean_norm": float(E.double().norm(dim=1).mean()),
        "rms_cos_original_max": float(
            distances[REFERENCES[1]][VARIANTS[0]][1].abs().max()
        ),
        "n_rows": len(E),
    }


def degenerate_rows(E: Tensor, reference: Norm) -> Tensor:
    """Rows of `E` `(V, d)` that the reference norm sends to 0, bool `(V,)`: zero second moment (an all-zero row,
    such as an untrained model's padding row; for LayerNorm also a constant row). Their cosine to the reference
    is 0/0, so the table leaves them out and reports how many there are."""
    return reference.second_moment(E.detach().cpu()) == 0


def row_distances(E: Tensor, reference: Norm) -> dict[str, tuple[Tensor, Tensor]]:
    """Per row of each global variant: (L2 distance, cosine distance) to reference.normalize(E), `(V',)` each,
    over the V' rows that are not `degenerate_rows` (c and s are computed on every row)."""
    E = E.detach().cpu()
    keep = ~degenerate_rows(E, reference)
    R = reference.normalize(E[keep]).double()
    R_norm = R.norm(dim=1)
    out = {}
    for name, A in global_variants(E):
        A = A[keep]
        cos = torch.einsum("vd,vd->v", A, R) / (A.norm(dim=1) * R_norm)
        out[name] = ((A - R).norm(dim=1), 1 - cos)
    return out


def distance_table(distances: dict[str, tuple[Tensor, Tensor]]) -> pd.DataFrame:
    """mean and std of the L2 and cosine distances, one row per variant."""
    rows = {
        name: {
            "L2 mean": float(l2.mean()),
            "L2 std": float(l2.std()),
            "cosine mean": float(cd.mean()),
            "cosine std": float(cd.std()),
        }
        for name, (l2, cd) in distances.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def table_identities(
    E: Tensor, reference: Norm, distances: dict[str, tuple[Tensor, Tensor]]
) -> dict[str, float]:
    """Largest violation of each exact identity of the table over the rows that are not `degenerate_rows`
    (0 up to float64 rounding, or up to eps):

    cos(Original) = cos(Scaled); cos(Centered) = cos(Centered & scaled);
    `||ref(e)||` = sqrt(d * m / (m + eps)) (and its distance from sqrt(d), which is eps's doing).
    """
    cd = {name: d[1] for name, d in distances.items()}
    E = E.detach().cpu()
    E = E[~degenerate_rows(E, reference)]
    norms = reference.normalize(E.double()).double().norm(dim=1)
    return {
        "cos_original_vs_scaled": float(
            (cd[VARIANTS[0]] - cd[VARIANTS[2]]).abs().max()
        ),
        "cos_centered_vs_centered_scaled": float(
            (cd[VARIANTS[1]] - cd[VARIANTS[3]]).abs().max()
        ),
        "norm_vs_eps_formula": float((norms - reference.predicted_norm(E)).abs().max()),
        "norm_vs_sqrt_d": float((norms - E.shape[1] ** 0.5).abs().max()),
    }
