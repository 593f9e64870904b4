"""Continuous lines of thought: the deterministic part of the Langevin flow evaluated between layers."""

from __future__ import annotations

import numpy as np

from .langevin import Flow


def flow_segment(x: np.ndarray, flow: Flow, t1: int, a) -> np.ndarray:
    """States `(n, D)` at layer t1 carried to t1 + a for every a `(m,)` in [0, 1]: `(n, m, D)`.

    The flow of Eq. 3 without noise, solved exactly from x(t1):

        x(t1 + a) = U1 M^a diag(sigma(t1 + a) / sigma(t1)) U1^T x(t1),    M = U1^T U2

    (in the frame R(t) = U1 M^a the coordinates only scale; U are the proper bases of `Flow`). At a = 1 it is
    Eq. 1 with tau = 1 (up to the columns flipped to make the bases proper), so it lands on x~(t1, 1), not on
    x(t1 + 1): the gap is the residual w. A *bridged* path adds the residual linearly, x(t1 + a) + a w, and so
    passes through every true position.
    """
    a = np.asarray(a, dtype=np.float64)
    U1 = flow.U[t1]
    # (m, n, D)
    y = (x.astype(np.float64) @ U1)[None] * flow.sigma.ratio(t1, t1 + a)[:, None, :]
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
