"""Chapter B1's study and figures: how many directions hold the ensemble, and the values it claims."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from threadpoolctl import threadpool_limits

from ..lines_of_thought.nulls import gaussian_cloud
from ..stats import bootstrap, draw_pilots, split_pilots


def direction_counts_figure(
    counts: dict[str, np.ndarray], span: int, title: str, share: float = 0.9
) -> Figure:
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
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    sns.lineplot(frame, x="layer t", y=label, hue="reading", marker="o", ax=ax)
    ax.set(title=title, ylim=(0, None))
    return fig


def held_out_share_figure(
    per_layer: dict[str, list], k: int, title: str, share: float = 0.9
) -> Figure:
    """B1: the held-out share of variance in `k` principal directions per layer, with its bootstrap band,
    for each curve of `per_layer` (`held_out_shares`: name -> `Estimate` values over layers)."""
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
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
    return fig


def project(X: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Coordinates of states `(..., D)` on the columns of `basis` `(D, k)`: `(..., k)`."""
    return X @ basis


def centered_spectrum(x: np.ndarray) -> np.ndarray:
    """Variances of states `x` `(N, D)` along their principal directions around the ensemble's mean, sorted
    decreasing: `(min(N, D),)` (eigenvalues of the smaller Gram matrix of the centered rows, over N)."""
    xc = x.astype(np.float64) - x.mean(0, dtype=np.float64)
    gram = xc.T @ xc if len(xc) >= xc.shape[1] else xc @ xc.T
    return np.clip(np.linalg.eigvalsh(gram)[::-1], 0.0, None) / len(xc)


def directions_for(spectrum: np.ndarray, share: float = 0.9) -> int:
    """The smallest k whose k largest values of `spectrum` `(k_max,)` (variances or squared singular values,
    sorted decreasing) carry at least `share` of their sum."""
    cumulative = np.cumsum(spectrum) / np.sum(spectrum)
    return int(1 + np.argmax(cumulative >= share - 1e-12))


def principal_directions(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean `(D,)` of states `x` `(N, D)` and their `k` leading principal directions around it, `(D, k)`
    orthonormal columns (at most min(N, D) of them)."""
    x = x.astype(np.float64)
    mean = x.mean(0)
    with threadpool_limits(limits=1):
        _, _, vh = np.linalg.svd(x - mean, full_matrices=False)
    return mean, vh[:k].T


def variance_captured(
    x: np.ndarray, mean: np.ndarray, directions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each state of `x` `(N, D)`: the squared norm of x - mean inside the span of `directions` `(D, k)`
    (orthonormal) and in total, both `(N,)`. Their sums' ratio is the share of the ensemble's variance
    around `mean` that the directions carry; with directions fit on other states, an out-of-sample share."""
    xc = x.astype(np.float64) - mean
    return ((xc @ directions) ** 2).sum(1), (xc**2).sum(1)


READINGS = (
    "squared norm (uncentered)",
    "variance around the mean",
    "structureless cloud, variance",
)


def picture_and_halves(
    n_s: int, n_pilots: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From one generator seeded by `seed`: `n_pilots` pilots drawn for a picture (sorted, at most `n_s`),
    then a random split of all `n_s` pilots into a fit half and a held-out half (both sorted)."""
    rng = np.random.default_rng(seed)
    pilots = draw_pilots(n_s, n_pilots, rng)
    fit, held = split_pilots(n_s, n_s // 2, rng)
    return pilots, fit, held


def squared_norm_shares(S: np.ndarray) -> np.ndarray:
    """Each singular direction's share of the ensemble's squared norm, from singular values `(k,)`: `(k,)`."""
    return S**2 / np.sum(S**2)


def cloud_at(X: np.ndarray, t: int, seed: int = 0) -> np.ndarray:
    """The structureless cloud of layer t of `X` `(N, L+1, D)`: `gaussian_cloud(X[:, t], seed=seed + t)`,
    `(N, D)`."""
    return gaussian_cloud(X[:, t], seed=seed + t)


def direction_counts(
    X: np.ndarray, S: np.ndarray, share: float = 0.9, seed: int = 0
) -> dict[str, np.ndarray]:
    """Per layer, the number of directions that carry `share`, in each of `READINGS`: the uncentered
    squared norm (singular values `S` `(L+1, k)` of `X` `(N, L+1, D)`), the variance around the mean, and
    the variance of the layer's structureless cloud (`cloud_at`). Each `(L+1,)` integers."""
    T = X.shape[1]
    spectra = (
        [S[t] ** 2 for t in range(T)],
        [centered_spectrum(X[:, t]) for t in range(T)],
        [centered_spectrum(cloud_at(X, t, seed)) for t in range(T)],
    )
    return {
        reading: np.array([directions_for(s, share) for s in layer_spectra])
        for reading, layer_spectra in zip(READINGS, spectra)
    }


def held_out_share(
    x: np.ndarray,
    fit: np.ndarray,
    held: np.ndarray,
    k: int,
    n_boot: int = 2000,
    seed: int = 0,
):
    """Share of the held-out states' variance (around the fit states' mean) in the `k` leading principal
    directions of the fit states, with a bootstrap interval over held-out states. x `(N, D)`; fit, held:
    row indices. An `Estimate`; the fit half and its directions are not resampled."""

    mean, directions = principal_directions(x[fit], k)
    captured, total = variance_captured(x[held], mean, directions)
    return bootstrap(
        lambda i: captured[i].sum() / total[i].sum(),
        len(held),
        unit="held-out pilots",
        n_boot=n_boot,
        seed=seed,
    )


def held_out_shares(
    X: np.ndarray,
    fit: np.ndarray,
    held: np.ndarray,
    k: int,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, list]:
    """`held_out_share` at every layer of `X` `(N, L+1, D)`, for the ensemble and for its structureless
    cloud (`cloud_at`, same split): {"ensemble": [Estimate] * (L+1), "structureless cloud": [...]}."""
    T = X.shape[1]
    return {
        "ensemble": [
            held_out_share(X[:, t], fit, held, k, n_boot, seed) for t in range(T)
        ],
        "structureless cloud": [
            held_out_share(cloud_at(X, t, seed), fit, held, k, n_boot, seed)
            for t in range(T)
        ],
    }


def widest_coordinates(x: np.ndarray, n: int = 3) -> np.ndarray:
    """Indices of the `n` coordinates of states `x` `(N, D)` with the largest variance, largest first."""
    return np.argsort(x.var(axis=0))[::-1][:n]


def widest_paths(
    X: np.ndarray, pilots: np.ndarray, layers: np.ndarray, n: int = 3
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The `pilots`' paths over `layers` of X `(N, L+1, D)` in the `n` coordinates of largest variance at the
    last layer (`widest_coordinates`), `(len(pilots), len(layers), n)` in float64; those coordinates and
    their names ("x[d]")."""
    dims = widest_coordinates(X[:, -1], n)
    paths = X[pilots][:, layers][:, :, dims].astype(np.float64)
    return paths, dims, tuple(f"x[{d}]" for d in dims)


def claim_values(
    energy: np.ndarray,
    counts: dict[str, np.ndarray],
    per_layer: dict[str, list],
    t: int,
) -> dict[str, object]:
    """B1's summary at layer t: the shares of the squared norm on u1 and on u1..u3 (`energy`, from
    `squared_norm_shares`), the `direction_counts` of each reading (floats) and the `held_out_shares` of
    the ensemble and its cloud (Estimates at t, and values per layer)."""
    ours, cloud = per_layer["ensemble"], per_layer["structureless cloud"]
    uncentered, centered, structureless = (counts[reading][t] for reading in READINGS)
    return {
        "energy_top3_last_layer": energy[:3].sum(),
        "energy_u1_last_layer": energy[0],
        "k90_uncentered_last_layer": float(uncentered),
        "k90_centered_last_layer": float(centered),
        "k90_cloud_last_layer": float(structureless),
        "held_out_share_quarter_d_last_layer": ours[t],
        "held_out_share_quarter_d_last_layer_cloud": cloud[t],
        "held_out_share_quarter_d_by_layer": [e.value for e in ours],
        "held_out_share_quarter_d_by_layer_cloud": [e.value for e in cloud],
    }
