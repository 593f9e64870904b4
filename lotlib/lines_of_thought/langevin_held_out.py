"""The Langevin model fitted on a share of the pilots and scored on the held-out others (Lines of Thought, Eq. 3-4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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
from .langevin import (
    Flow,
    NoiseRate,
    Steps,
    covariance_distance,
    exponential_noise,
    langevin_flow,
    matched_noise,
    moments,
    pilot_distances,
    propagators,
    simulate,
    steps,
)
from .residuals import (
    fit_accumulated,
    fit_variance,
    pair_mask,
    pair_statistics,
    singular_coordinates,
)


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


@dataclass(frozen=True)
class LangevinProtocol:
    """How B5 fits Eq. 3 and scores it: the layers simulated (`n_layers` from `t_start`, None: L // 2), the
    share of pilots held out (`held_out`, split by `seed`), the Euler-Maruyama step `dt`, the `scheme`
    ("euler", the authors' code, or "exact"), a spline of ln sigma (`log_spline`) or of sigma, the simulated
    noise rate (`noise`: "eq2" or "paper") and the convention of B4's noise fit (`noise_convention`:
    "log_mean" or "mean_log")."""

    n_layers: int
    t_start: int | None = None
    held_out: float = 0.25
    dt: float = 0.1
    scheme: str = "euler"
    log_spline: bool = True
    noise: str = "eq2"
    noise_convention: str = "log_mean"
    seed: int = 0


def held_out_langevin(
    X: np.ndarray, protocol: LangevinProtocol, model: str = "the model"
) -> HeldOutLangevin:
    """Fit Eq. 3 on a share 1 - `protocol.held_out` of the pilots of X `(N, L+1, D)` (seeded split): aligned
    full bases, the noise law of B4 over all pairs of layers 1..L, the flow and steps from t0 over
    `protocol.n_layers`, and the noise rates: "eq2" (`matched_noise` to Eq. 2), "paper" (alpha lambda
    e^(lambda t)) and "constant" (the simulated noise's final variance, injected evenly). Raises ParameterError
    on bounds, naming `model`."""

    p, n_layers, held_out = protocol, protocol.n_layers, protocol.held_out
    N, T, D = X.shape
    L = T - 1
    t0 = L // 2 if p.t_start is None else layer_index(p.t_start, L, "t_start", model)
    if not 1 <= n_layers <= L - t0:
        raise ParameterError(
            f"parameter n_layers = {n_layers}: from t_start = {t0}, {model} (L = {L}) allows 1..{L - t0}"
        )
    held, fitted = split_pilots(N, round(held_out * N), np.random.default_rng(p.seed))
    if len(fitted) < D or len(held) < 2:
        raise ParameterError(
            f"parameter held_out = {held_out}: {len(fitted)} pilots to fit and {len(held)} held out of {N}; "
            f"the full-space drift needs at least D = {D} to fit: raise n_s or lower held_out"
        )
    U, S = align_bases(*ensemble_svd(X[fitted]))
    layers = np.arange(1, T)
    st = pair_statistics(singular_coordinates(X[fitted], U), S, layers)
    log_var = (
        st.log_mean_var() if p.noise_convention == "log_mean" else st.mean_log_var()
    )
    pairs = pair_mask(T, 1, L)
    fit, accumulated = fit_variance(log_var, pairs), fit_accumulated(log_var, pairs)
    flow = langevin_flow(
        U, S, layers, intervals=range(t0, t0 + n_layers), log=p.log_spline
    )
    plan = steps(flow, t0, n_layers, p.dt, p.scheme)
    sde = HeldOutLangevin(
        X,
        held,
        fitted,
        U,
        S,
        t0,
        n_layers,
        flow,
        plan,
        fit,
        accumulated,
        {},
        {},
        p.noise,
    )
    sde.rates = {
        "eq2": matched_noise(plan, sde.eq2_variance),
        "paper": exponential_noise(fit["alpha"], fit["lambda"]),
    }
    zero = (np.zeros(D), np.zeros((D, D)))
    sde.noise_cov = {name: moments(*zero, plan, r)[1] for name, r in sde.rates.items()}
    unit = moments(*zero, plan, lambda t: 1.0)[1]
    flat = float(np.trace(sde.noise_cov[p.noise][-1]) / np.trace(unit[-1]))
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
    held-out pilots (`stats.jackknife_estimate`)."""

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
