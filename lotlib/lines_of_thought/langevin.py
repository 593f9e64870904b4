"""The Langevin model of lines of thought (Lines of Thought, Eq. 3-4 and the authors' simulation).

    dx = [R' R^T + R S' R^T] x dt + sqrt(alpha lambda e^(lambda t)) dW,    R(t) = U(t),  S = diag(ln sigma(t))

Between integer layers t1 < t < t1 + 1 the basis turns along the geodesic R(t) = U1 expm(a K),
K = logm(U1^T U2), a = t - t1 (so R' R^T = U1 K U1^T), and S' = sigma'/sigma comes from a cubic spline
(not-a-knot) over the layers of the aligned singular values (the authors' code) or of their logarithms.
The drift acts in the full space: U(t) is the full D x D basis, so the ensemble needs N_s >= D pilots.
Euler-Maruyama with step dt, x <- x + A(t) x dt + B(t) sqrt(dt) xi (or, `scheme="exact"`, the drift solved
exactly over each step), vectorized over all trajectories, looping over time steps only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
from scipy.interpolate import CubicSpline
from scipy.linalg import schur
from threadpoolctl import threadpool_limits

from ..models.bounds import ParameterError, layer_index
from ..stats import (
    Estimate,
    bootstrap_and_jackknife_weights,
    centered_percentile,
    jackknife_estimate,
    jackknife_weights,
    percentile_estimate,
    resampling_weights,
    split_pilots,
)
from .ensemble import align_bases, ensemble_svd
from .extrapolation import extrapolate
from .residuals import (
    fit_accumulated,
    fit_variance,
    pair_mask,
    pair_statistics,
    singular_coordinates,
)

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

    def power(self, a: float) -> np.ndarray:
        """M^a `(D, D)`."""
        return self.rotate(np.eye(len(self.Z)), a).T


def rotation_log(M: np.ndarray) -> Rotation:
    """The planes and angles of a rotation M `(D, D)` from its real Schur form (for an orthogonal matrix
    it is block diagonal: 2 x 2 blocks [[cos, -sin], [sin, cos]], and 1 x 1 blocks +1 or -1; pairs of -1
    are turns by pi). Raises if det M = -1 (no real logarithm)."""
    with threadpool_limits(
        limits=1
    ):  # a threaded Schur of a few hundred rows is many times slower on busy cores
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
    consecutive bases differ by a rotation (logm(U1^T U2) needs det +1). Where det U(t) = -1 the column with
    the smallest singular value S[t] is flipped (the least harmful choice: that coordinate changes sign).
    Returns the bases and, per layer, the flipped column (None if none). Flipping whole layers, rather
    than one end of each interval, lets the flow over several layers compose with no sign error between
    intervals."""
    if U.shape[1] != U.shape[2]:
        raise ValueError(
            f"the Langevin drift needs a full D x D basis, got {U.shape[1:]}: use N_s >= D pilots"
        )
    U = U.copy()
    flipped = {}
    for t in np.asarray(layers):
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
    """Step matrices from t0 to t0 + n_layers (dt must divide one layer).

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
    per start, float32: x <- M x + B(t) sqrt(dt) xi. Returns the positions at the integer layers,
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


# ----------------------------------------------------------------------------------------------
# the model fitted on a share of the pilots and scored on the others (chapter B5)


@dataclass
class HeldOutLangevin:
    """Eq. 3 fitted on the pilots `fitted` of X `(N, L+1, D)` and scored on the pilots `held`: aligned U
    `(L+1, D, D)`, S `(L+1, D)` of the fitted pilots, the flow and the steps `plan` from t0 over `n_layers`,
    the noise law (`law`: Eq. 2, `accumulated`: the paper's rate started at the departure layer, each a dict of
    alpha, lambda, r2), the noise rates by name ("eq2", "paper", "constant") and the covariance each
    accumulates from zero, `noise_cov[name]` `(n_layers + 1, D, D)` (also "noiseless"). `noise` names the
    simulated rate."""

    X: np.ndarray
    held: np.ndarray
    fitted: np.ndarray
    U: np.ndarray
    S: np.ndarray
    t0: int
    n_layers: int
    flow: Flow
    plan: Steps
    law: dict
    accumulated: dict
    rates: dict[str, NoiseRate]
    noise_cov: dict[str, np.ndarray]
    noise: str

    @property
    def D(self) -> int:
        return self.X.shape[2]

    @property
    def layers(self) -> np.ndarray:
        """The block outputs 1..L."""
        return np.arange(1, self.X.shape[1])

    @property
    def arrivals(self) -> np.ndarray:
        """t0, ..., t0 + n_layers."""
        return np.arange(self.t0, self.t0 + self.n_layers + 1)

    @property
    def truth(self) -> np.ndarray:
        """The held-out pilots' true states at the arrivals: `(n_h, n_layers + 1, D)` float64."""
        return self.X[self.held][:, self.arrivals].astype(np.float64)

    @property
    def other(self) -> str:
        """The noise rate not simulated ("paper" or "eq2")."""
        return "paper" if self.noise == "eq2" else "eq2"

    def eq2_variance(self, s) -> float:
        """Eq. 2: the residual's variance per coordinate at arrival layer s, alpha e^(lambda s)."""
        return self.law["alpha"] * np.exp(self.law["lambda"] * s)

    def top_directions(self, t: int, k: int = 4) -> np.ndarray:
        """u1..uk of the fitted pilots at layer t (the largest singular values): `(D, k)`."""
        return self.U[t][:, np.argsort(self.S[t])[::-1][:k]]

    def top_share(self, k: int = 4) -> float:
        """Share of the held-out truth's total variance at t0 + n_layers that lies along u1..uk of that layer
        (`top_directions`, fitted pilots)."""
        true = self.truth[:, -1]
        centered = true - true.mean(0)
        along = centered @ self.top_directions(self.t0 + self.n_layers, k)
        return float(np.sum(along**2) / np.sum(centered**2))

    def sigma_zero_crossings(self) -> int:
        """How many singular values a spline of sigma (the authors') takes through zero on [t0, t0 + n_layers]."""
        spline = sigma_spline(self.S, self.layers, log=False)
        return spline.zero_crossings(self.t0, self.t0 + self.n_layers)

    def summary(self) -> dict:
        """The split, the noise law, the rates and the flow's corrections, under the chapter's summary keys."""
        lam, L, rates = self.law["lambda"], self.X.shape[1] - 1, self.rate_table()
        return {
            "n_fitted": len(self.fitted),
            "n_held_out": len(self.held),
            "n_layers": L,
            "d_model": self.D,
            "t_start": self.t0,
            "layers_simulated": self.n_layers,
            "noise": self.noise,
            "alpha": self.law["alpha"],
            "lambda": lam,
            "lambda_L": lam * L,
            "r2_eq2": self.law["r2"],
            "r2_accumulated": self.accumulated["r2"],
            "paper_rate_share_first_layer": float(1 - np.exp(-lam)),
            "rate_eq2_by_layer": rates["eq2"].tolist(),
            "rate_paper_by_layer": rates["paper"].tolist(),
            "flipped_layers": sum(c is not None for c in self.flow.flipped.values()),
            "sigma_spline_zero_crossings": self.sigma_zero_crossings(),
        }

    def rate_table(self) -> pd.DataFrame:
        """The rate B^2 of every noise over each simulated layer [t, t+1]."""
        return pd.DataFrame(
            {
                name: [float(r(t)) for t in self.arrivals[:-1]]
                for name, r in self.rates.items()
            },
            index=pd.Index(
                [f"[{t}, {t + 1}]" for t in self.arrivals[:-1]], name="layer"
            ),
        )

    def turn_table(self) -> pd.DataFrame:
        """Median and largest turn angle (degrees) of the rotation between consecutive bases, per interval."""
        return pd.DataFrame(
            {
                "median turn (deg)": [
                    np.degrees(np.median(np.abs(r.theta)))
                    for r in self.flow.rotations.values()
                ],
                "largest turn (deg)": [
                    np.degrees(np.max(np.abs(r.theta)))
                    for r in self.flow.rotations.values()
                ],
            },
            index=pd.Index(
                [f"[{t}, {t + 1}]" for t in self.flow.rotations], name="interval"
            ),
        ).round(1)


def held_out_langevin(
    X: np.ndarray,
    t_start,
    n_layers: int,
    *,
    held_out: float = 0.25,
    dt: float = 0.1,
    scheme: str = "euler",
    log_spline: bool = True,
    noise: str = "eq2",
    noise_convention: str = "log_mean",
    seed: int = 0,
    model: str = "the model",
) -> HeldOutLangevin:
    """Fit Eq. 3 on a share 1 - `held_out` of the pilots of X `(N, L+1, D)` (seeded split): aligned full bases,
    the noise law of B4 over all pairs of layers 1..L, the flow and steps from t0 (`t_start`, None: L // 2)
    over `n_layers`, and the noise rates: "eq2" (`matched_noise` to Eq. 2), "paper" (alpha lambda e^(lambda t))
    and "constant" (the simulated noise's final variance, injected evenly). Raises ParameterError on bounds."""

    N, T, D = X.shape
    L = T - 1
    t0 = L // 2 if t_start is None else layer_index(t_start, L, "t_start", model)
    if not 1 <= n_layers <= L - t0:
        raise ParameterError(
            f"parameter n_layers = {n_layers}: from t_start = {t0}, {model} (L = {L}) allows 1..{L - t0}"
        )
    held, fitted = split_pilots(N, round(held_out * N), np.random.default_rng(seed))
    if len(fitted) < D or len(held) < 2:
        raise ParameterError(
            f"parameter held_out = {held_out}: {len(fitted)} pilots to fit and {len(held)} held out of {N}; "
            f"the full-space drift needs at least D = {D} to fit: raise n_s or lower held_out"
        )
    U, S = align_bases(*ensemble_svd(X[fitted]))
    layers = np.arange(1, T)
    st = pair_statistics(singular_coordinates(X[fitted], U), S, layers)
    log_var = st.log_mean_var() if noise_convention == "log_mean" else st.mean_log_var()
    pairs = pair_mask(T, 1, L)
    fit, accumulated = fit_variance(log_var, pairs), fit_accumulated(log_var, pairs)
    flow = langevin_flow(
        U, S, layers, intervals=range(t0, t0 + n_layers), log=log_spline
    )
    plan = steps(flow, t0, n_layers, dt, scheme)
    sde = HeldOutLangevin(
        X, held, fitted, U, S, t0, n_layers, flow, plan, fit, accumulated, {}, {}, noise
    )
    sde.rates = {
        "eq2": matched_noise(plan, sde.eq2_variance),
        "paper": exponential_noise(fit["alpha"], fit["lambda"]),
    }
    zero = (np.zeros(D), np.zeros((D, D)))
    sde.noise_cov = {name: moments(*zero, plan, r)[1] for name, r in sde.rates.items()}
    unit = moments(*zero, plan, lambda t: 1.0)[1]
    flat = float(np.trace(sde.noise_cov[noise][-1]) / np.trace(unit[-1]))
    sde.rates["constant"], sde.noise_cov["constant"] = (
        (lambda t: flat),
        flat * unit,
    )
    sde.noise_cov["noiseless"] = np.zeros_like(unit)
    return sde


def predictions(
    model: HeldOutLangevin, n_samples: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """The held-out ensemble at t0..t0 + n_layers predicted from its own states at t0, by name, each
    `(n_h, samples, n_layers + 1, D)`: the Langevin simulation with the chosen noise and with the other one,
    the same drift with constant-variance noise, and the noiseless linear map (Eq. 1, one sample)."""
    X0 = model.X[model.held, model.t0]
    run = lambda name: simulate(X0, model.plan, model.rates[name], n_samples, seed=seed)
    return {
        f"Langevin (noise {model.noise})": run(model.noise),
        f"Langevin (noise {model.other})": run(model.other),
        "constant-variance noise": run("constant"),
        "noiseless linear map (Eq. 1)": noiseless_map(model)[:, None],
    }


def noiseless_map(model: HeldOutLangevin) -> np.ndarray:
    """Eq. 1 from t0 with the fitted bases, on the held-out pilots: `(n_h, n_layers + 1, D)`."""

    Xh, t0 = model.X[model.held], model.t0
    return np.stack(
        [
            extrapolate(Xh, model.U, model.S, t0, tau)
            for tau in range(model.n_layers + 1)
        ],
        axis=1,
    )


def total_variance(Z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Total variance of the distribution the pilots Z `(n, samples, f)` sample (a pilot's samples pooled), for
    each row of `weights` `(B, n)` (how many times each pilot is drawn, with all its samples): `(B,)`, half the
    mean squared distance between points of two distinct pilots. On the sample it is unbiased (the variance
    with ddof 1 for one sample per pilot); in a resample, copies of one pilot make no pair, so the spread
    between pilots is not shrunk by the repeats as a plug-in variance is while the spread within a pilot is
    not (which moved the percentile intervals of a ratio off its truth)."""
    w = np.asarray(weights, dtype=np.float64)
    mu, m2 = (
        Z.mean(1, dtype=np.float64),
        np.mean(np.sum(np.square(Z, dtype=np.float64), -1), 1),
    )
    own = m2 - np.sum(mu**2, 1)  # each pilot's spread within its samples, (n,)
    W = w.sum(1)
    between = W * (w @ m2) - np.sum((w @ mu) ** 2, 1) - (w**2) @ own
    return between / (W**2 - np.sum(w**2, 1))


def variance_ratios(
    model: HeldOutLangevin, predicted: dict[str, np.ndarray]
) -> dict[str, dict[str, Estimate]]:
    """Total variance of each prediction `(n_h, samples, n_layers + 1, D)` at t0 + n_layers over the true held-out
    ensemble's, along u1..u4 of that layer and in all D, with jackknife intervals on the log scale over the
    held-out pilots (`intervals.jackknife_estimate`)."""

    n = len(model.held)
    rows = np.vstack([np.ones(n), jackknife_weights(n)])
    true, basis = model.truth[:, -1], model.top_directions(model.t0 + model.n_layers)

    def ratio(Z: np.ndarray, B: np.ndarray | None) -> Estimate:
        sim, tr = Z[:, :, -1].astype(np.float64), true
        if B is not None:
            sim, tr = sim @ B, tr @ B
        values = total_variance(sim, rows) / total_variance(tr[:, None], rows)
        return jackknife_estimate(
            values[0], values[1:], n, unit="held-out pilots", log=True
        )

    return {
        name: {"u1..u4": ratio(Z, basis), "all D": ratio(Z, None)}
        for name, Z in predicted.items()
    }


ENERGY_COLUMNS = {
    "constant": "constant-variance noise",
    "linear": "noiseless linear map (Eq. 1)",
    "floor": "floor (two halves of the truth)",
}


def energy_distances(
    model: HeldOutLangevin, n_samples: int, n_distance: int, n_seeds: int, seed: int = 0
) -> pd.DataFrame:
    """Energy distance in the full space between the true held-out ensemble at each layer t0 + tau and: the
    Langevin simulation, the constant-variance noise, the noiseless linear map, and a second half of the truth
    (the floor); with the ensemble's scale, the mean `|x - x'|` (300 points). One row per seed and layer; each seed
    draws new noise, subsamples and halves."""
    X0 = model.X[model.held, model.t0]
    noiseless = noiseless_map(model)
    truth, rows = model.truth, []
    for run in range(n_seeds):
        rng = np.random.default_rng(seed + run)
        distance = partial(energy_distance, n=n_distance, seed=seed + run)
        sims = {
            f"Langevin (noise {model.noise})": simulate(
                X0, model.plan, model.rates[model.noise], n_samples, seed=seed + run
            ),
            ENERGY_COLUMNS["constant"]: simulate(
                X0, model.plan, model.rates["constant"], n_samples, seed=seed + run
            ),
        }
        for tau in range(1, model.n_layers + 1):
            true = truth[:, tau]
            halves = np.array_split(rng.permutation(len(true)), 2)
            row = {
                name: distance(Z[:, :, tau].reshape(-1, model.D), true)
                for name, Z in sims.items()
            }
            row[ENERGY_COLUMNS["linear"]] = distance(noiseless[:, tau], true)
            row[ENERGY_COLUMNS["floor"]] = distance(true[halves[0]], true[halves[1]])
            few = true[rng.choice(len(true), size=min(300, len(true)), replace=False)]
            row["scale"] = float(
                np.mean(np.linalg.norm(few[:, None] - few[None], axis=-1))
            )
            rows.append({"seed": run, "layer t": int(model.t0 + tau), **row})
    return pd.DataFrame(rows)


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


@dataclass
class EnergyMargins:
    """B5's energy margins at the last simulated layer, on the held-out sample (row 0) and on `n_boot` resamples
    of the held-out pilots (rows 1..): `margins[name]` `(1 + n_boot,)` is `(E_name - E_Langevin - |floor|) /
    E|x - x'|` for name in "constant-variance noise" and "noiseless linear map (Eq. 1)", over `n` pilots."""

    margins: dict[str, np.ndarray]
    n: int

    def estimate(self, name: str) -> Estimate:
        """The margin over `name` with its 95% bootstrap interval (`centered_percentile`)."""

        return centered_percentile(self.margins[name], self.n, unit="held-out pilots")


def _weighted_energy(
    cross: np.ndarray, within: np.ndarray, truth: np.ndarray, w: np.ndarray, s: int
) -> float:
    """The energy distance between a prediction carrying `s` points per pilot and the truth, with pilot j drawn
    w[j] times, from the pilot-distance sums `cross` (prediction, truth), `within` (prediction, prediction)
    and `truth` (truth, truth): within-sample means over pairs of distinct copies (a copy and itself
    excluded, two copies of one point count as distance 0)."""
    W = w.sum()
    between = w @ cross @ w / (s * W * W)
    own = w @ within @ w / (s * W * (s * W - 1))
    true = w @ truth @ w / (W * (W - 1))
    return float(2 * between - own - true)


def energy_margins(
    model: HeldOutLangevin,
    n_samples: int,
    n_points: int,
    n_boot: int,
    seed: int = 0,
) -> EnergyMargins:
    """The energy margins of the Langevin model at its last layer (`EnergyMargins`) from one simulation of
    `n_samples` realisations per held-out pilot (at most `n_points` pilots, a seeded subset): the distances
    between pilots' points are summed once (`pilot_distances`), and each bootstrap resample of the pilots
    (`resampling_weights`, seeded; every prediction keeps the points of the pilots drawn) reweights them. The
    floor is the energy distance between two seeded halves of the drawn pilots' truth. The model was fitted on
    the other pilots, so every resample is scored out of sample."""

    rng = np.random.default_rng(seed)
    held = np.arange(len(model.held))
    if len(held) > n_points:
        held = np.sort(rng.choice(held, size=n_points, replace=False))
    X0, tau = model.X[model.held][held, model.t0], model.n_layers
    true = model.truth[held, tau][:, None]  # (h, 1, D)
    predicted = {
        "Langevin": simulate(X0, model.plan, model.rates[model.noise], n_samples, seed)[
            :, :, tau
        ],
        ENERGY_COLUMNS["constant"]: simulate(
            X0, model.plan, model.rates["constant"], n_samples, seed
        )[:, :, tau],
        ENERGY_COLUMNS["linear"]: noiseless_map(model)[held, tau][:, None],
    }
    truth = pilot_distances(true, true)
    sums = {
        name: (pilot_distances(P, true), pilot_distances(P, P), P.shape[1])
        for name, P in predicted.items()
    }
    half = rng.permutation(len(held)) < len(held) // 2
    weights = resampling_weights(len(held), n_boot, seed)
    margins = {
        name: [] for name in (ENERGY_COLUMNS["constant"], ENERGY_COLUMNS["linear"])
    }
    for w in weights:
        energy = {
            name: _weighted_energy(*c[:2], truth, w, c[2]) for name, c in sums.items()
        }
        a, b = w * half, w * ~half
        floor = 2 * a @ truth @ b / (a.sum() * b.sum()) - sum(
            v @ truth @ v / (v.sum() * (v.sum() - 1)) for v in (a, b)
        )
        scale = w @ truth @ w / (w.sum() * (w.sum() - 1))
        for name in margins:
            margins[name].append(
                (energy[name] - energy["Langevin"] - abs(floor)) / scale
            )
    return EnergyMargins({k: np.array(v) for k, v in margins.items()}, len(held))


FP_STATS = (
    "mean error / spread",
    "covariance distance",
    "total variance, predicted / true",
)


def fp_stats(
    starts: np.ndarray,
    true: np.ndarray,
    maps: np.ndarray,
    added: np.ndarray,
    weights: np.ndarray,
) -> dict[str, np.ndarray]:
    """The Fokker-Planck moments against the truth at one layer: the starts `(n, D)` carried by `maps` `(D, D)`
    plus the accumulated noise `added` `(D, D)`, against the true states `(n, D)`. For each row of `weights`
    `(B, n)`: the error of the mean over the truth's spread (from pairs of distinct pilots), the covariance
    distance (`covariance_distance`) and the ratio of total variances (`total_variance`), each `(B,)`."""
    Z = starts @ maps.T
    distinct = weights.sum(1) ** 2 - np.sum(weights**2, 1)
    errors = Z - true  # each pilot's share of the error of the predicted mean
    mean_sq = (
        np.sum((weights @ errors) ** 2, 1) - (weights**2) @ np.sum(errors**2, 1)
    ) / distinct
    var_true = total_variance(true[:, None], weights)
    var_pred = total_variance(Z[:, None], weights) + np.trace(added)
    return dict(
        zip(
            FP_STATS,
            (
                np.sqrt(np.clip(mean_sq, 0.0, None) / var_true),
                covariance_distance(true, weights, Z, added),
                var_pred / var_true,
            ),
        )
    )


@dataclass
class FokkerPlanck:
    """The Fokker-Planck moments of three models (`FP_STATS` per layer in `by_layer`, one row per model and
    layer), their estimates at t0 + n_layers with percentile intervals over the held-out pilots (`last`), and
    the covariance distance between the fitted and the held-out pilots' true states there (`sample_check`)."""

    by_layer: pd.DataFrame
    last: dict[str, dict[str, Estimate]]
    sample_check: float

    def summary(self, langevin: str) -> dict:
        """The Langevin model's (`langevin`, a key of `last`) estimates, the noiseless drift's covariance distance
        and the sample check, under the chapter's summary keys."""
        lang = self.last[langevin]
        return {
            "fp_mean_error_last": lang[FP_STATS[0]],
            "fp_cov_distance_last": lang[FP_STATS[1]],
            "fp_variance_ratio_last": lang[FP_STATS[2]],
            "fp_cov_distance_noiseless_last": self.last["noiseless drift"][FP_STATS[1]],
            "fp_cov_distance_fitted_vs_held_out": self.sample_check,
        }

    def table(self) -> pd.DataFrame:
        """`last` as a table of texts, one row per model."""
        return pd.DataFrame(
            {
                name: {k: format(v, ".3g") for k, v in s.items()}
                for name, s in self.last.items()
            }
        ).T


def fokker_planck(model: HeldOutLangevin, n_boot: int, seed: int = 0) -> FokkerPlanck:
    """Mean and covariance carried by the scheme from the held-out pilots at t0 (`propagators`, `moments`) with
    the chosen noise, constant-variance noise and no noise, against the held-out truth at every layer."""

    P, truth, n = propagators(model.plan), model.truth, len(model.held)
    starts = truth[:, 0]
    models = {
        f"Langevin (noise {model.noise})": model.noise_cov[model.noise],
        "constant-variance noise": model.noise_cov["constant"],
        "noiseless drift": model.noise_cov["noiseless"],
    }
    unit = resampling_weights(n, 0)
    rows = [
        {
            "layer t": model.t0 + tau,
            "model": name,
            **{
                k: v[0]
                for k, v in fp_stats(
                    starts, truth[:, tau], P[tau], added[tau], unit
                ).items()
            },
        }
        for name, added in models.items()
        for tau in range(1, model.n_layers + 1)
    ]

    def estimate(key: str, v: np.ndarray) -> Estimate:
        """The mean error (which reads 0 for a perfect prediction) by its bootstrap, the covariance distance
        and the variance ratio by their jackknife (`variance_ratios`)."""
        if key == FP_STATS[0]:
            return percentile_estimate(v[: 1 + n_boot], n, unit="held-out pilots")
        return jackknife_estimate(
            v[0], v[1 + n_boot :], n, unit="held-out pilots", log=True
        )

    resamples = bootstrap_and_jackknife_weights(n, n_boot, seed)
    last = {
        name: {
            k: estimate(k, v)
            for k, v in fp_stats(
                starts, truth[:, -1], P[-1], added[-1], resamples
            ).items()
        }
        for name, added in models.items()
    }
    fitted_cov = np.cov(
        model.X[model.fitted, model.t0 + model.n_layers].T.astype(np.float64), bias=True
    )
    check = float(covariance_distance(truth[:, -1], unit, fixed=fitted_cov)[0])
    return FokkerPlanck(pd.DataFrame(rows), last, check)
