"""The Langevin model of lines of thought (Lines of Thought, Eq. 3-4): its drift, noise, simulation and moments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.linalg import schur
from threadpoolctl import threadpool_limits

# variance injected per unit time per coordinate, B(t)^2
NoiseRate = Callable[[float], float]


@dataclass
class Rotation:
    """A rotation M `(D, D)` (orthogonal, det +1) as turns by angles `theta` `(p,)` in p orthogonal planes:
    M = Z G(theta) Z^T, plane j spanned by columns `planes[j]` `(p, 2)` of Z `(D, D)`. Fractional powers
    M^a = expm(a logm(M)) = Z G(a theta) Z^T follow the geodesic from I (a = 0) to M (a = 1)."""

    Z: np.ndarray
    planes: np.ndarray
    theta: np.ndarray

    @property
    def generator(self) -> np.ndarray:
        """K = logm(M) `(D, D)`, skew-symmetric."""
        log_G = np.zeros((len(self.Z),) * 2)
        i, j = self.planes.T
        log_G[i, j], log_G[j, i] = -self.theta, self.theta
        return self.Z @ log_G @ self.Z.T

    def rotate(self, V: np.ndarray, a) -> np.ndarray:
        """Rows of V `(..., n, D)` turned by M^a: `V (M^a)^T`. `a` is a number or an array broadcasting
        against the leading axes of V (e.g. V `(n, D)` and a `(m,)` give `(m, n, D)`)."""
        a = np.asarray(a, dtype=np.float64)
        W = V @ self.Z
        W = np.broadcast_to(
            W, np.broadcast_shapes(W.shape[:-2], a.shape) + W.shape[-2:]
        ).copy()
        angle = a[..., None, None] * self.theta
        c, s = np.cos(angle), np.sin(angle)
        i, j = self.planes.T
        Wi, Wj = W[..., i], W[..., j]
        W[..., i], W[..., j] = c * Wi - s * Wj, s * Wi + c * Wj
        return W @ self.Z.T


def rotation_log(M: np.ndarray) -> Rotation:
    """The planes and angles of a rotation M `(D, D)` from its real Schur form (for an orthogonal matrix
    it is block diagonal: 2 x 2 blocks [[cos, -sin], [sin, cos]], and 1 x 1 blocks +1 or -1; pairs of -1
    are turns by pi). Raises if det M = -1 (no real logarithm)."""
    # a threaded Schur of a few hundred rows is many times slower on busy cores
    with threadpool_limits(limits=1):
        T, Z = schur(M, output="real")
    first = np.flatnonzero(np.diagonal(T, -1))  # each 2 x 2 block starts at (i, i)
    theta = np.arctan2(T[first + 1, first], T[first, first])
    single = np.setdiff1d(np.arange(len(M)), np.concatenate([first, first + 1]))
    minus = single[T[single, single] < 0]
    if len(minus) % 2:
        raise ValueError(
            "the matrix is a reflection (det -1): it has no real logarithm"
        )
    planes = np.concatenate([np.stack([first, first + 1], 1), minus.reshape(-1, 2)])
    return Rotation(Z, planes, np.concatenate([theta, np.full(len(minus) // 2, np.pi)]))


def proper_bases(
    U: np.ndarray, S: np.ndarray, layers
) -> tuple[np.ndarray, dict[int, int | None]]:
    """Copies of the aligned bases U `(T, D, D)` with det U(t) = +1 at every t in `layers`, so that
    consecutive bases differ by a rotation (logm(U1^T U2) needs det +1).

    The first of `layers` sets the orientation: where its det is -1, its smallest-sigma column is flipped at
    every layer. That changes one coordinate's sign everywhere, which leaves the flow as it was (M -> D M D,
    U K U^T unchanged), so the result does not depend on the signs the SVD gave the reference layer. Then at
    each layer whose det is still -1 (its orientation turned against the first one's) the column with the
    smallest singular value S[t] is flipped (the least harmful choice: that coordinate changes sign there).
    Returns the bases and, per layer, the column flipped at that layer alone (None if none). Flipping whole
    layers, rather than one end of each interval, lets the flow over several layers compose with no sign
    error between intervals."""
    if U.shape[1] != U.shape[2]:
        raise ValueError(
            f"the Langevin drift needs a full D x D basis, got {U.shape[1:]}: use N_s >= D pilots"
        )
    U = U.copy()
    layers = np.asarray(layers)
    first = int(layers.min())
    if np.linalg.slogdet(U[first])[0] < 0:
        U[:, :, np.argmin(S[first])] *= -1
    flipped = {}
    for t in layers:
        flipped[int(t)] = None
        if np.linalg.slogdet(U[t])[0] < 0:
            flipped[int(t)] = int(np.argmin(S[t]))
            U[t][:, flipped[int(t)]] *= -1
    return U, flipped


@dataclass
class SigmaSpline:
    """A cubic spline (not-a-knot) over the layers of the aligned singular values (`log=False`, the
    authors' code) or of their logarithms (`log=True`: S' stays finite where a spline of sigma would
    cross zero between two layers)."""

    spline: CubicSpline
    log: bool

    def rate(self, t) -> np.ndarray:
        """S'(t) = sigma'(t) / sigma(t): `(D,)`, or `(m, D)` for an array of t."""
        return self.spline(t, 1) if self.log else self.spline(t, 1) / self.spline(t)

    def ratio(self, t_from, t_to) -> np.ndarray:
        """sigma(t_to) / sigma(t_from) = exp(integral of S' over [t_from, t_to]): `(D,)`, or `(m, D)` for
        arrays of times."""
        if self.log:
            return np.exp(self.spline(t_to) - self.spline(t_from))
        return self.spline(t_to) / self.spline(t_from)

    def zero_crossings(self, t1: float, t2: float, per_layer: int = 100) -> int:
        """How many singular values the spline takes through zero on [t1, t2] (always 0 for log)."""
        if self.log:
            return 0
        return int(
            np.sum(
                (
                    self.spline(np.linspace(t1, t2, per_layer * round(t2 - t1) + 1))
                    <= 0
                ).any(0)
            )
        )


def sigma_spline(S: np.ndarray, layers, log: bool = True) -> SigmaSpline:
    """Spline of aligned S `(T, k)` over the consecutive integer `layers` (of ln sigma if `log`)."""
    layers = np.asarray(layers)
    values = np.log(S[layers]) if log else S[layers]
    return SigmaSpline(CubicSpline(layers, values, axis=0, bc_type="not-a-knot"), log)


@dataclass
class Flow:
    """The deterministic part of Eq. 3: the bases U `(T, D, D)` made proper (`proper_bases`; `flipped`
    names the flipped column of each layer), the rotation of each interval [t, t+1] (`rotations[t]`,
    M = U(t)^T U(t+1)) and the sigma spline."""

    U: np.ndarray
    rotations: dict[int, Rotation]
    flipped: dict[int, int | None]
    sigma: SigmaSpline


def langevin_flow(
    U: np.ndarray, S: np.ndarray, layers, intervals=None, log: bool = True
) -> Flow:
    """The flow from aligned U `(T, D, D)`, S `(T, D)`: the sigma spline over the consecutive integer `layers`,
    rotations for the intervals [t, t+1] with t in `intervals` (default: all but the last)."""
    layers = np.asarray(layers)
    intervals = (
        layers[:-1] if intervals is None else np.asarray(list(intervals), dtype=int)
    )
    U, flipped = proper_bases(U, S, np.union1d(intervals, intervals + 1))
    rotations = {int(t): rotation_log(U[t].T @ U[t + 1]) for t in intervals}
    return Flow(U, rotations, flipped, sigma_spline(S, layers, log))


SCHEMES = ("euler", "exact")


@dataclass
class Steps:
    """The linear part of every step x <- M x + B(t) sqrt(dt) xi: step start times `t` `(n,)`, step
    matrices `M` `(n, D, D)`, the step `dt`."""

    t: np.ndarray
    M: np.ndarray
    dt: float

    @property
    def per_layer(self) -> int:
        return round(1 / self.dt)


def steps(
    flow: Flow, t0: int, n_layers: int, dt: float = 0.1, scheme: str = "euler"
) -> Steps:
    """Step matrices from t0 to t0 + n_layers (dt must divide one layer) for Eq. 3,

        dx = [R' R^T + R S' R^T] x dt + B(t) dW,    R(t) = U(t),  S = diag(ln sigma(t)),

    with the basis turning along the geodesic R(t1 + a) = U1 expm(a K), K = logm(U1^T U2), between integer
    layers t1 < t < t1 + 1 (so R' R^T = U1 K U1^T) and S' = sigma'/sigma from the flow's spline. The drift acts
    in the full space: U(t) is the full D x D basis.

    `euler` (the authors' code): M = I + A(t) dt, A = R' R^T + R S' R^T = U1 K U1^T + R diag(S') R^T.
    `exact`: M = R(t + dt) diag(sigma(t + dt) / sigma(t)) R(t)^T, the deterministic flow solved over the
    step (in the frame R the coordinates only scale), so that without noise it lands on Eq. 1 at every
    integer layer (up to the flipped columns at both ends). On [t1, t1+1], R(t1 + a) = U1 M^a.
    """
    n = round(1 / dt)
    if not np.isclose(n * dt, 1.0):
        raise ValueError(f"dt must divide one layer, got {dt}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    a = np.arange(n + 1) * dt
    times, matrices = [], []
    for t1 in range(t0, t0 + n_layers):
        U1, rotation = flow.U[t1], flow.rotations[t1]
        R = rotation.rotate(U1, -a)  # (n + 1, D, D): U1 M^a
        if scheme == "euler":
            A = U1 @ rotation.generator @ U1.T + (
                R[:-1] * flow.sigma.rate(t1 + a[:-1])[:, None, :]
            ) @ R[:-1].transpose(0, 2, 1)
            matrices.append(np.eye(len(U1)) + A * dt)
        else:
            ratio = flow.sigma.ratio(t1 + a[:-1], t1 + a[1:])
            matrices.append((R[1:] * ratio[:, None, :]) @ R[:-1].transpose(0, 2, 1))
        times.append(t1 + a[:-1])
    return Steps(np.concatenate(times), np.concatenate(matrices), dt)


def exponential_noise(alpha: float, lam: float) -> NoiseRate:
    """B(t)^2 = alpha lambda e^(lambda t): accumulated from -infinity it gives variance alpha e^(lambda t)."""
    return lambda t: alpha * lam * np.exp(lam * t)


def matched_noise(steps: Steps, variance: Callable[[int], float]) -> NoiseRate:
    """A noise rate constant over each layer, chosen so that the noise accumulated since the first step and
    carried by the steps' linear maps has mean variance per coordinate `variance(s)` at every integer layer s
    the steps reach: the deviation of the simulation from its noiseless drift then has the variance of the
    residual of Eq. 1 from the same start (Eq. 2 read as that residual's variance: `variance(s)` =
    alpha e^(lambda s)). Layer by layer, the accumulated covariance C <- M C M^T + B^2 dt I is linear in that
    layer's rate B^2, which is solved for (0 where the carried noise already exceeds the target).
    Returns B(t)^2 as a function of t (the rate of layer floor(t))."""
    D = steps.M.shape[1]
    n = steps.per_layer
    first = int(round(steps.t[0]))
    carried, rates = np.zeros((D, D)), {}
    for layer in range(len(steps.t) // n):
        unit = np.zeros((D, D))  # the noise of a unit rate injected over this layer
        for M in steps.M[layer * n : (layer + 1) * n]:
            carried, unit = M @ carried @ M.T, M @ unit @ M.T + steps.dt * np.eye(D)
        target = D * variance(first + layer + 1)
        rate = max(0.0, (target - np.trace(carried)) / np.trace(unit))
        carried = carried + rate * unit
        rates[first + layer] = rate
    return lambda t: rates[int(np.floor(t + 1e-9))]


def simulate(
    X0: np.ndarray, steps: Steps, noise: NoiseRate, n_samples: int = 1, seed: int = 0
) -> np.ndarray:
    """Euler-Maruyama from the states X0 `(N, D)` at the first step's time, `n_samples` noise realisations
    per start, float32: x <- M x + B(t) sqrt(dt) xi, vectorized over all trajectories and looping over the
    time steps only. Returns the positions at the integer layers,
    `(N, n_samples, n_layers + 1, D)` (index 0 is X0)."""
    rng = np.random.default_rng(seed)
    N, D = X0.shape
    x = np.repeat(X0.astype(np.float32)[:, None], n_samples, axis=1).reshape(-1, D)
    out = [x]
    for step, (t, M) in enumerate(zip(steps.t, steps.M.astype(np.float32)), start=1):
        x = x @ M.T + np.float32(np.sqrt(noise(t) * steps.dt)) * rng.standard_normal(
            x.shape, dtype=np.float32
        )
        if step % steps.per_layer == 0:
            out.append(x)
    return np.stack(out, axis=1).reshape(N, n_samples, len(out), D)


def moments(
    mean: np.ndarray, cov: np.ndarray, steps: Steps, noise: NoiseRate
) -> tuple[np.ndarray, np.ndarray]:
    """The Fokker-Planck view (Eq. 4) through its first two moments: the ensemble mean `(D,)` and
    covariance `(D, D)` carried by the same scheme, in expectation: m <- M m, C <- M C M^T + B^2 dt I.
    Returns means `(n_layers + 1, D)` and covariances `(n_layers + 1, D, D)` at the integer layers."""
    eye = np.eye(len(mean))
    means, covs = [mean], [cov]
    for step, (t, M) in enumerate(zip(steps.t, steps.M), start=1):
        mean, cov = M @ mean, M @ cov @ M.T + noise(t) * steps.dt * eye
        if step % steps.per_layer == 0:
            means.append(mean)
            covs.append(cov)
    return np.stack(means), np.stack(covs)


def propagators(steps: Steps) -> np.ndarray:
    """The linear part of the steps composed up to every integer layer: `(n_layers + 1, D, D)`, index 0 the
    identity; the noiseless scheme carries x(t0) to P[tau] x(t0), and the Fokker-Planck mean and covariance
    of any starting ensemble to P m0 and P C0 P^T (plus the noise `moments` accumulates from zero)."""
    current = np.eye(steps.M.shape[1])
    out = [current]
    for step, M in enumerate(steps.M, start=1):
        current = M @ current
        if step % steps.per_layer == 0:
            out.append(current)
    return np.stack(out)


def covariance_distance(
    T: np.ndarray,
    weights: np.ndarray,
    Z: np.ndarray | None = None,
    fixed: np.ndarray | None = None,
) -> np.ndarray:
    """Relative Frobenius distance `|| Cov(Z) + fixed - Cov(T) ||` / `|| Cov(T) ||` between the covariances of the
    distributions behind the paired rows of T `(n, D)` and Z `(n, D)`, for each row of `weights` `(B, n)` (a
    bootstrap of the pilots: row b counts how many times each pilot is drawn): `(B,)`.

    Every product of two covariances is estimated from pairs of distinct pilots, tr(t_n t_n^T z_m z_m^T) =
    (t_n . z_m)^2 with n != m, so the squared distance carries no sampling floor: two samples of one distribution
    give about 0 (a negative estimate reads as 0), and a resample estimates the same thing as the sample. Rows
    are centered on the whole sample's means (held fixed: an approximation of relative order 1/n). No D x D
    matrix is formed per resample. Z or `fixed` `(D, D)` (e.g. the accumulated noise) may be left out."""
    c = np.asarray(weights, dtype=np.float64)
    n = c.sum(1)
    distinct = n**2 - np.sum(c**2, 1)
    Tc = T.astype(np.float64) - T.mean(0, dtype=np.float64)

    def inner(P, Q):  # <Cov_b(P), Cov_b(Q)> from distinct pilots
        A = (P @ Q.T) ** 2
        return (np.einsum("bn,nm,bm->b", c, A, c) - (c**2) @ np.diagonal(A)) / distinct

    along = lambda P: c @ np.einsum("nd,de,ne->n", P, fixed, P) / n  # <Cov_b(P), fixed>
    target = inner(Tc, Tc)
    squared = target.copy()
    if Z is not None:
        Zc = Z.astype(np.float64) - Z.mean(0, dtype=np.float64)
        squared += inner(Zc, Zc) - 2 * inner(Zc, Tc)
    if fixed is not None:
        squared += (
            np.sum(fixed**2) - 2 * along(Tc) + (2 * along(Zc) if Z is not None else 0.0)
        )
    return np.sqrt(np.clip(squared, 0.0, None) / target)


def pilot_distances(P: np.ndarray, Q: np.ndarray, block: int = 4096) -> np.ndarray:
    """Sums of Euclidean distances between the points of pilots: P `(n, s, D)` and Q `(m, r, D)` (the points
    each pilot carries) give `(n, m)`, entry [i, j] = sum over a, b of `|P[i, a] - Q[j, b]|`. Float64, computed in
    blocks of about `block` points of P."""
    n, s, D = P.shape
    m, r, _ = Q.shape
    Qf = Q.reshape(-1, D).astype(np.float64)
    q2 = np.sum(Qf**2, 1)
    out = np.empty((n, m))
    rows = max(1, block // s)
    for start in range(0, n, rows):
        Pf = P[start : start + rows].reshape(-1, D).astype(np.float64)
        squared = np.sum(Pf**2, 1)[:, None] + q2[None, :] - 2 * Pf @ Qf.T
        d = np.sqrt(np.clip(squared, 0.0, None)).reshape(-1, s, m, r)
        out[start : start + rows] = d.sum(axis=(1, 3))
    return out


def energy_distance(
    A: np.ndarray, B: np.ndarray, n: int = 1000, seed: int = 0
) -> float:
    """Energy distance between the samples A `(n_a, D)` and B `(n_b, D)`, each subsampled to at most n
    rows (seeded): `2 E|a - b| - E|a - a'| - E|b - b'|` (within-sample means exclude the diagonal).
    Zero when the two distributions are equal; same units as the states."""
    rng = np.random.default_rng(seed)
    A, B = (
        Z[rng.choice(len(Z), size=min(n, len(Z)), replace=False)].astype(np.float64)
        for Z in (A, B)
    )

    def mean_distance(P, Q, same):  # a point and itself add 0: leave the pair out
        total = pilot_distances(P[:, None], Q[:, None]).sum()
        return total / (len(P) * len(Q) - same * len(P))

    return float(
        2 * mean_distance(A, B, False)
        - mean_distance(A, A, True)
        - mean_distance(B, B, True)
    )
