"""Continuous lines of thought: the deterministic part of the Langevin flow evaluated between layers.

From the true state x(t1), the flow of Eq. 3 without noise is solved exactly for a in [0, 1]:

    x(t1 + a) = U1 M^a diag(sigma(t1 + a) / sigma(t1)) U1^T x(t1),    M = U1^T U2

(in the frame R(t) = U1 M^a the coordinates only scale; U are the proper bases of `Flow`). At a = 1 it is
Eq. 1 with tau = 1 (up to the columns flipped to make the bases proper), so it lands on x~(t1, 1), not on
x(t1 + 1): the gap is the residual w. The *bridged* path adds the residual
linearly, x(t1 + a) + a w, and so passes through every true position.
"""

from __future__ import annotations

import numpy as np

from .langevin import Flow


def flow_segment(x: np.ndarray, flow: Flow, t1: int, a) -> np.ndarray:
    """States `(n, D)` at layer t1 carried to t1 + a for every a `(m,)` in [0, 1]: `(n, m, D)`."""
    a = np.asarray(a, dtype=np.float64)
    U1 = flow.U[t1]
    y = (x.astype(np.float64) @ U1)[None] * flow.sigma.ratio(t1, t1 + a)[
        :, None, :
    ]  # (m, n, D)
    turned = flow.rotations[t1].rotate(y, a)  # each row times (M^a)^T
    return (turned @ U1.T).transpose(1, 0, 2)


def restarted_paths(
    X: np.ndarray, flow: Flow, layers, per_layer: int = 20
) -> tuple[np.ndarray, np.ndarray]:
    """The flow from every true x(t), t in `layers` but the last, to t + 1, `per_layer` + 1 points each.

    X `(N, T, D)`. Returns times `(n_seg, per_layer + 1)` and paths `(N, n_seg, per_layer + 1, D)`;
    the last point of each segment is where the flow lands, to compare with the true x(t + 1).
    """
    layers = np.asarray(layers)
    a = np.linspace(0.0, 1.0, per_layer + 1)
    paths = np.stack(
        [flow_segment(X[:, t], flow, int(t), a) for t in layers[:-1]], axis=1
    )
    return layers[:-1, None] + a, paths


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
    """||x_flow(t+1) - x(t+1)||, where the flow from the true x(t) lands against the true next state, for
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
    `(N, n_seg)`: `gap` ||x_flow(t+1) - x(t+1)|| (where the flow lands), `step` ||x(t+1) - x(t)||, `norm`
    ||x(t+1)||, and `length_ratio`, the length of the bridged path over that of the chord (>= 1: how far the
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
