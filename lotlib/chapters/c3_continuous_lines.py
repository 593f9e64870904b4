"""Chapter C3's study and figures: continuous lines between layers, where they land and their stability."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import seaborn as sns
from matplotlib.figure import Figure

from ..lines_of_thought.continuous import flow_segment
from ..lines_of_thought.ensemble import aligned_svd
from ..lines_of_thought.extrapolation import extrapolate
from ..lines_of_thought.langevin import Flow, langevin_flow
from ..lines_of_thought.residuals import split_for_bases
from ..models.bounds import ParameterError, layer_index
from ..stats import Estimate, bootstrap


def _with_breaks(P: np.ndarray) -> np.ndarray:
    """Segments `(n_seg, m, 3)` as one polyline `(n_seg * (m + 1), 3)` with a gap between segments."""
    return np.concatenate([P, np.full((len(P), 1, 3), np.nan)], axis=1).reshape(-1, 3)


def continuous_lines(
    X: np.ndarray,
    pilots: np.ndarray,
    paths: np.ndarray,
    basis: np.ndarray,
    layers: np.ndarray,
    title: str,
) -> tuple[go.Figure, Figure]:
    """C3: continuous lines of thought drawn twice, rotatable (plotly) and static: the bridged paths
    (solid, `bridged_paths`), the flow segments (dotted) ending at crosses where the flow lands, and the true
    positions colored by layer. X `(N, T, D)` the trajectories, pilots `(n,)` those drawn; paths
    `(n, n_seg, m, D)` their `continuous.restarted_paths`; basis `(D, 3)` the axes."""
    true = X[pilots][:, layers] @ basis  # (n, len(layers), 3)
    bridged = bridged_paths(X[pilots], paths, layers) @ basis
    paths = paths @ basis
    colors = [
        matplotlib.colors.to_hex(c)
        for c in matplotlib.colormaps["viridis"](np.linspace(0, 1, len(layers)))
    ]
    fig = go.Figure()
    static = plt.figure(figsize=(8, 7))
    ax = static.add_subplot(projection="3d")
    for n in range(len(true)):
        curve, dotted = bridged[n].reshape(-1, 3), _with_breaks(paths[n])
        lands = paths[n, :, -1]
        traces = (
            (curve, "lines", {"line": {"width": 4}}),
            (dotted, "lines", {"line": {"width": 2, "dash": "dot", "color": "grey"}}),
            (true[n], "markers", {"marker": {"size": 3, "color": colors}}),
            (
                lands,
                "markers",
                {"marker": {"size": 2, "symbol": "x", "color": "black"}},
            ),
        )
        for i, (points, mode, style) in enumerate(traces):
            fig.add_trace(
                go.Scatter3d(
                    **dict(zip("xyz", points.T)),
                    mode=mode,
                    **style,
                    **_trace_extras(i, pilots[n], layers),
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
    ax.set(xlabel="u1", ylabel="u2", zlabel="u3", title=f"{title} (static view)")
    return fig, static


def _trace_extras(i: int, pilot: int, layers: np.ndarray) -> dict:
    """The legend and hover settings of trace i of a pilot in `continuous_lines`: the bridged path is named,
    the flow segments skip hovering, the true positions show their layer."""
    if i == 0:
        return {"name": f"pilot {pilot}: bridged path"}
    extras = {"showlegend": False}
    if i == 1:
        extras["hoverinfo"] = "skip"
    if i == 2:
        extras["text"] = [f"t = {t}" for t in layers]
    return extras


def medians_by_layer(
    curves: dict[str, np.ndarray], arrival: np.ndarray, ylabel: str, title: str
) -> Figure:
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
    fig, ax = plt.subplots(figsize=(8, 4))
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
    return fig


def stability_figure(overlap: np.ndarray, partial_gap: dict[int, float]) -> Figure:
    """C3: the median overlap `|u_i(t).u_i(t+1)|` by rank of sigma (`overlap` `(n_seg, D)`), and the median
    landing gap / true step of the partial flow against the k directions it maps (`partial_gap`, k -> median;
    k = 0, staying put, scores 1)."""
    D = overlap.shape[1]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
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
    return fig


def bridged_paths(X: np.ndarray, paths: np.ndarray, layers) -> np.ndarray:
    """`restarted_paths` plus the residual spread linearly over each segment: x_flow(t + a) + a w(t),
    w(t) = x(t + 1) - x_flow(t + 1). Continuous, through every true position: `(N, n_seg, m, D)`."""
    layers = np.asarray(layers)
    a = np.linspace(0.0, 1.0, paths.shape[2])
    gap = X[:, layers[1:]] - paths[:, :, -1]  # (N, n_seg, D)
    return paths + a[None, None, :, None] * gap[:, :, None, :]


def free_path(x0: np.ndarray, flow: Flow, t0: int, n_layers: int) -> np.ndarray:
    """The flow from x(t0) `(n, D)` alone, never restarted: positions at t0..t0+n_layers `(n, n_layers + 1, D)`."""
    out = [x0.astype(np.float64)]
    for t1 in range(t0, t0 + n_layers):
        out.append(flow_segment(out[-1], flow, t1, [1.0])[:, 0])
    return np.stack(out, axis=1)


def landing_gaps(X: np.ndarray, flow: Flow, layers) -> np.ndarray:
    """`||x_flow(t+1) - x(t+1)||`, where the flow from the true x(t) lands against the true next state, for
    every pilot and segment of `layers` (one layer at a time, all pilots at once): `(N, n_seg)`."""
    layers = np.asarray(layers)
    return np.stack(
        [
            np.linalg.norm(
                flow_segment(X[:, t], flow, int(t), [1.0])[:, 0] - X[:, t + 1], axis=-1
            )
            for t in layers[:-1]
        ],
        axis=1,
    )


def path_summary(
    X: np.ndarray, flow: Flow, layers, per_layer: int = 8
) -> dict[str, np.ndarray]:
    """For every pilot and segment [t, t+1] of `layers` (one layer at a time, all pilots at once), each
    `(N, n_seg)`: `gap` `||x_flow(t+1) - x(t+1)||` (where the flow lands), `step` `||x(t+1) - x(t)||`, `norm`
    `||x(t+1)||`, and `length_ratio`, the length of the bridged path over that of the chord (>= 1: how far the
    continuous path bends away from the straight segment), on a grid of `per_layer` + 1 points."""
    layers = np.asarray(layers)
    a = np.linspace(0.0, 1.0, per_layer + 1)
    out = {name: [] for name in ("gap", "step", "norm", "length_ratio")}
    for t in layers[:-1]:
        path = flow_segment(X[:, t], flow, int(t), a)  # (N, m, D)
        target = X[:, t + 1].astype(np.float64)
        bridged = path + a[None, :, None] * (target - path[:, -1])[:, None, :]
        chord = np.linalg.norm(target - X[:, t], axis=-1)
        out["gap"].append(np.linalg.norm(path[:, -1] - target, axis=-1))
        out["step"].append(chord)
        out["norm"].append(np.linalg.norm(target, axis=-1))
        out["length_ratio"].append(
            np.linalg.norm(np.diff(bridged, axis=1), axis=-1).sum(1) / chord
        )
    return {name: np.stack(values, axis=1) for name, values in out.items()}


def continuous_layers(
    L: int, first_layer, last_layer, t_free, model: str = "the model"
) -> tuple[int, int, int]:
    """The layers of C3 checked against depth `L`: the first (at least 1: x(0) is no block output) and the
    last layer of the lines (None: L), and the start of the never-restarted flow (None: L // 2, kept inside
    [first, last - 1]). Raises `ParameterError` for lines shorter than one layer or t_free outside them."""

    first = max(1, layer_index(first_layer, L, "first_layer", model))
    last = L if last_layer is None else layer_index(last_layer, L, "last_layer", model)
    if last <= first:
        raise ParameterError(
            f"parameters first_layer, last_layer = {first}, {last}: {model} has L = {L}; "
            f"the lines need 1 <= first_layer < last_layer <= {L}"
        )
    if t_free is None:
        return first, last, min(max(L // 2, first), last - 1)
    t_free = layer_index(t_free, L, "t_free", model)
    if not first <= t_free < last:
        raise ParameterError(
            f"parameter t_free = {t_free}: must lie in [{first}, {last - 1}] "
            "(first_layer..last_layer - 1)"
        )
    return first, last, t_free


def landing(X: np.ndarray, flow: Flow, layers) -> dict[str, np.ndarray]:
    """Where the flow from every true x(t) lands, for each pilot of `X` `(N, T, D)` and segment of `layers`,
    each `(N, n_seg)`: `gap` `||x_flow(t+1) - x(t+1)||`, `step` `||x(t+1) - x(t)||`, and the ratios
    `gap / true step` and `gap / state norm` (over `||x(t+1)||`)."""
    layers = np.asarray(layers)
    gap = landing_gaps(X, flow, layers)
    step = np.linalg.norm(X[:, layers[1:]] - X[:, layers[:-1]], axis=-1)
    norm = np.linalg.norm(X[:, layers[1:]], axis=-1)
    return {
        "gap": gap,
        "step": step,
        "gap / true step": gap / step,
        "gap / state norm": gap / norm,
    }


def median_over_pilots(values: np.ndarray, n_boot: int = 1000, seed: int = 0):
    """The median of `values` `(N, m)` (pilots x layers) with a 95% bootstrap interval over pilots (a
    pilot is resampled with all its layers): an `Estimate`."""

    return bootstrap(
        lambda rows: float(np.median(values[rows])),
        len(values),
        unit="pilots",
        n_boot=n_boot,
        seed=seed,
    )


def direction_overlap(U: np.ndarray, S: np.ndarray, layers) -> np.ndarray:
    """`|u_i(t).u_i(t+1)|` of the aligned bases U `(T, D, k)` for each segment of `layers`, columns ordered
    by decreasing sigma(t) (S `(T, k)`): `(n_seg, k)`."""
    return np.array(
        [
            np.abs(np.sum(U[t] * U[t + 1], axis=0))[np.argsort(S[t])[::-1]]
            for t in np.asarray(layers)[:-1]
        ]
    )


def partial_flow_gaps(
    X: np.ndarray, U: np.ndarray, S: np.ndarray, layers, ks
) -> dict[int, np.ndarray]:
    """For each k of `ks`, the landing gap over the true step `(N, n_seg)` of a partial map: Eq. 1
    (`extrapolate` with `rank=k`, tau = 1) on the k directions of largest sigma(t), the rest of the state
    left where it is. X `(N, T, D)`; U `(T, D, k)`, S `(T, k)` aligned."""

    layers = np.asarray(layers)
    step = np.linalg.norm(X[:, layers[1:]] - X[:, layers[:-1]], axis=-1)
    out = {}
    for k in ks:
        gaps = []
        for t in layers[:-1]:
            top = U[t][:, np.argsort(S[t])[::-1][:k]]
            kept = X[:, t] - (X[:, t] @ top) @ top.T  # outside the top k directions
            moved = extrapolate(X, U, S, int(t), 1, rank=k) + kept
            gaps.append(np.linalg.norm(moved - X[:, t + 1], axis=-1))
        out[k] = np.stack(gaps, axis=1) / step
    return out


def free_flow_errors(
    X: np.ndarray, flow: Flow, U: np.ndarray, S: np.ndarray, t_free: int, last: int
) -> tuple[np.ndarray, float]:
    """The flow from x(t_free) alone, never restarted, up to layer `last`: its median relative error
    `||x_free - x||` / `||x||` over pilots at t_free + tau `(last - t_free + 1,)`, and the median relative
    difference between its end and Eq. 1 from t_free over the same layers (`extrapolate`, aligned U, S)."""

    n = last - t_free
    free = free_path(X[:, t_free], flow, t_free, n)  # (N, n + 1, D)
    truth = X[:, t_free : last + 1]
    error = np.linalg.norm(free - truth, axis=-1) / np.linalg.norm(truth, axis=-1)
    end = free[:, -1]
    eq1 = np.linalg.norm(end - extrapolate(X, U, S, t_free, n), axis=-1)
    return np.median(error, axis=0), float(
        np.median(eq1 / np.linalg.norm(end, axis=-1))
    )


@dataclass(frozen=True)
class Anchoring:
    """How well the flow from every true x(t) lands on x(t+1) (`anchoring`).

    landed: `landing`; landing_gap: the median gap / true step over pilots and layers (an `Estimate` over
    pilots); overlap `(n_seg, D)`: `direction_overlap`; partial: k -> gap / true step `(N, n_seg)` of the
    partial flows (`partial_flow_gaps`) and of the full flow (k = D), all on held-out pilots; best_k: the k of
    the smallest median on the fitted pilots, and best_partial its median on the held-out ones (an
    `Estimate` over held-out pilots)."""

    landed: dict[str, np.ndarray]
    landing_gap: object
    overlap: np.ndarray
    partial: dict[int, np.ndarray]
    best_k: int
    best_partial: object

    @property
    def ratios(self) -> dict[str, np.ndarray]:
        """The landing gap over the true step and over the state's norm, each `(N, n_seg)`."""
        return {k: self.landed[k] for k in ("gap / true step", "gap / state norm")}

    @property
    def stable(self) -> int:
        """How many directions keep a median overlap above 0.9 between consecutive layers."""
        return int(np.sum(np.median(self.overlap, axis=0) > 0.9))

    @property
    def partial_gap(self) -> dict[int, float]:
        """k -> the median gap / true step of the partial flow over pilots and layers."""
        return {k: float(np.median(v)) for k, v in self.partial.items()}

    def summary(self) -> dict:
        """C3's summary of the landings and the partial flows."""
        full = self.landed["gap / true step"]
        return {
            "landing_gap_over_step_median": self.landing_gap,
            "landing_gap_over_norm_median": float(
                np.median(self.landed["gap / state norm"])
            ),
            "landing_closer_than_staying": float(
                np.mean(self.landed["gap"] < self.landed["step"])
            ),
            "landing_gap_over_step_by_layer": np.median(full, axis=0).tolist(),
            "stable_directions": self.stable,
            "partial_flow_best_k": self.best_k,
            "partial_flow_best_gap_over_step": self.best_partial,
            "partial_flow_gap_by_k": {str(k): v for k, v in self.partial_gap.items()},
        }


@dataclass(frozen=True)
class HeldOutFlow:
    """The flow fitted on some pilots and the others to score it on (`held_out_flow`): `held` and `fitted`
    index the pilots; U `(T, D, D)`, S `(T, D)` the aligned bases of the fitted pilots; `flow` their flow."""

    held: np.ndarray
    fitted: np.ndarray
    U: np.ndarray
    S: np.ndarray
    flow: Flow


def held_out_flow(
    X: np.ndarray,
    layers,
    held_out: float = 0.5,
    seed: int = 0,
    model: str = "the model",
) -> HeldOutFlow:
    """Split the pilots of X `(N, T, D)` (seeded, a share `held_out` held; at least D fitted, else a
    `ParameterError` naming n_s), and fit the aligned bases (`aligned_svd`, kept: B4 fits the same half) and
    the sigma spline (`langevin_flow` over layers 1..T-1, rotations on the segments of `layers`) on the
    fitted pilots only."""

    held, fitted = split_for_bases(len(X), X.shape[2], held_out, seed, model)
    U, S = aligned_svd(X[fitted])
    flow = langevin_flow(
        U, S, np.arange(1, X.shape[1]), intervals=np.asarray(layers)[:-1], log=True
    )
    return HeldOutFlow(held, fitted, U, S, flow)


def anchoring(
    X: np.ndarray,
    fit: HeldOutFlow,
    layers,
    ks=(1, 2, 4, 8, 16, 64),
    n_boot: int = 1000,
    seed: int = 0,
) -> Anchoring:
    """Where the flow lands for every held-out pilot of `X` `(N, T, D)` and segment of `layers`, and where
    the gap comes from: the stability of the aligned directions and the partial flows on the k < D
    directions of `ks` (`Anchoring`). Everything fitted (bases, spline, and the best k, chosen on the
    fitted pilots' gaps) comes from `fit.fitted`; every gap is scored on `fit.held`, so the bootstrap over
    held-out pilots carries the fitted steps."""
    D = X.shape[2]
    small = [k for k in ks if k < D]

    def gaps(pilots: np.ndarray) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray]]:
        landed = landing(X[pilots], fit.flow, layers)
        partial = partial_flow_gaps(X[pilots], fit.U, fit.S, layers, small)
        return landed, {**partial, D: landed["gap / true step"]}

    _, chosen = gaps(fit.fitted)
    best_k = min(chosen, key=lambda k: float(np.median(chosen[k])))
    landed, partial = gaps(fit.held)
    return Anchoring(
        landed=landed,
        landing_gap=median_over_pilots(landed["gap / true step"], n_boot, seed),
        overlap=direction_overlap(fit.U, fit.S, layers),
        partial=partial,
        best_k=best_k,
        best_partial=median_over_pilots(partial[best_k], n_boot, seed),
    )


def line_values(
    curvature: Estimate, t_free: int, free_error: np.ndarray, free_vs_eq1: float
) -> dict[str, object]:
    """C3's summary of the lines' shape: the median bridged length over chord (`curvature`), and the flow
    never restarted from `t_free` (`free_flow_errors`: its error per tau `(n + 1,)`, tau = 0 dropped, and its
    end against Eq. 1)."""
    return {
        "length_ratio_median": curvature,
        "t_free": t_free,
        "free_flow_error_by_tau": free_error[1:].tolist(),
        "free_flow_vs_eq1": free_vs_eq1,
    }
