"""Residuals of the linear extrapolation (Lines of Thought, Eq. 2, Fig. B4) and the tests of their law: i.i.d.
Gaussian coordinates with variance alpha exp(lambda (t + tau)), a function of the arrival layer only."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..models.bounds import ParameterError, layer_index
from ..stats import split_pilots
from ..stats.backend import Device, as_tensor, no_tf32, stats_device, to_numpy


def singular_coordinates(
    X: np.ndarray, U: np.ndarray, device: Device = "cpu"
) -> np.ndarray:
    """y(t) = U(t)^T x(t) for every pilot and layer: X `(N, T, D)`, U `(T, D, k)` -> `(N, T, k)` float32,
    one batched float32 product on `device` (`stats.backend`)."""
    X = as_tensor(np.asarray(X, dtype=np.float32), device)
    U = as_tensor(np.asarray(U, dtype=np.float32), device)
    with no_tf32():
        Y = X.transpose(0, 1) @ U  # (T, N, k)
    return to_numpy(Y.transpose(0, 1))


def residual_coordinates(Y: np.ndarray, S: np.ndarray, t, tau: int) -> np.ndarray:
    """Coordinates of w(t, tau) in the aligned basis U(t+tau): `(N, k)` for one t, `(N, len(t), k)` for
    an array of t. Y `(N, T, k)` from `singular_coordinates`, S `(T, k)` aligned singular values (numpy arrays
    or tensors, both alike).

        U(t+tau)^T w = y(t+tau) - Lambda y(t),    y(t) = U(t)^T x(t),    Lambda = Sigma(t+tau) Sigma(t)^-1,

    so with the coordinates y of every layer computed once, each (t, t+tau) pair costs O(N k) instead of
    two (N, D) x (D, D) products (`lotlib.lines_of_thought.extrapolation.eq1_residuals` is the direct form).
    Raw coordinates are w = U(t+tau) (y(t+tau) - Lambda y(t))."""
    t = np.asarray(t)
    ratio = S[t + tau] / S[t]
    if isinstance(ratio, torch.Tensor):
        return Y[:, t + tau] - Y[:, t] * ratio.to(Y.dtype)
    return Y[:, t + tau] - Y[:, t] * ratio.astype(Y.dtype)


def coordinate_moments(W: np.ndarray | torch.Tensor) -> tuple:
    """Per coordinate over the ensemble (axis 0) of W `(N, ...)`: mean/std, variance, excess kurtosis
    (float64 results of sums in W's dtype: the centered moments need no more precision), as numpy arrays
    for an array and as tensors on W's device for a tensor."""
    host = not isinstance(W, torch.Tensor)
    W = torch.as_tensor(W)
    mean = W.mean(0)
    squares = (W - mean) ** 2
    var = squares.mean(0).double()
    m4 = torch.einsum("n...,n...->...", squares, squares).double() / len(W)
    moments = (mean / var.sqrt(), var, m4 / var**2 - 3.0)
    return tuple(map(to_numpy, moments)) if host else moments


@dataclass
class PairStatistics:
    """Per-coordinate residual statistics for every pair, indexed `[t, t + tau, i]` `(T, T, k)`; NaN where
    no pair was computed. `z` = mean/std, `var` = variance, `kurtosis` = excess kurtosis."""

    z: np.ndarray
    var: np.ndarray
    kurtosis: np.ndarray
    basis: str

    def mean_abs_z(self) -> np.ndarray:
        return np.mean(np.abs(self.z), axis=-1)

    def log_mean_var(self) -> np.ndarray:
        return np.log(np.mean(self.var, axis=-1))

    def mean_log_var(self) -> np.ndarray:
        return np.mean(np.log(self.var), axis=-1)

    def mean_abs_kurtosis(self) -> np.ndarray:
        return np.mean(np.abs(self.kurtosis), axis=-1)


EXPANSION_FLOOR = 1e-6  # least residual variance, relative to its two terms', that the moment expansion resolves


def layer_offsets(
    layers: np.ndarray, desc: str, progress: bool
) -> Iterator[tuple[int, np.ndarray]]:
    """Each offset tau = 1 .. len(layers) - 1 with the layers t `(len(layers) - tau,)` whose pair (t, t + tau)
    lies in `layers`, under a progress bar named `desc` (shown if `progress`)."""
    for tau in tqdm(range(1, len(layers)), desc=desc, unit="tau", disable=not progress):
        yield tau, layers[:-tau]


def pair_statistics(
    Y: np.ndarray,
    S: np.ndarray,
    layers,
    U: np.ndarray | None = None,
    progress: bool = True,
    counts: np.ndarray | None = None,
    expand: bool = True,
    device: Device = "cpu",
) -> PairStatistics:
    """Residual statistics for every pair t < t + tau of `layers` (consecutive integers), Y `(N, T, k)` from
    `singular_coordinates`, S `(T, k)` aligned, pilot n counted `counts[n]` times (None: once each).
    Without U: statistics of the coordinates in the aligned basis U(t+tau) (`basis='singular'`), with `expand`
    from the layers' cross-moments (`singular_pair_moments`) where they resolve every residual; with U
    `(T, D, k)`: of the raw residual-stream coordinates w = U(t+tau) (...) (`basis='raw'`, one
    `(N, k) x (k, D)` product per pair). Otherwise each pair's residuals are formed (the pilots repeated by
    their counts), vectorized over the ensemble and over t for each tau. Either way on `device`."""
    layers = np.asarray(layers)
    if U is None and expand:
        expanded = singular_pair_moments(Y, S, layers, counts, device)
        if expanded is not None:
            return expanded
    Y, S = as_tensor(Y, device), as_tensor(S, device)
    if counts is not None:
        Y = torch.repeat_interleave(Y, as_tensor(counts, device, torch.long), dim=0)
    if U is not None:  # float32 values, in Y's precision
        U = as_tensor(U, device, torch.float32).to(Y.dtype)
    T = Y.shape[1]
    k = Y.shape[2] if U is None else U.shape[1]
    out = {name: np.full((T, T, k), np.nan) for name in ("z", "var", "kurtosis")}
    with no_tf32():
        for tau, t in layer_offsets(layers, "residual statistics", progress):
            W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
            if U is not None:
                W = (W.transpose(0, 1) @ U[t + tau].mT).transpose(0, 1)
            for name, value in zip(("z", "var", "kurtosis"), coordinate_moments(W)):
                out[name][t, t + tau] = to_numpy(value)
    return PairStatistics(**out, basis="singular" if U is None else "raw")


def singular_pair_moments(
    Y: np.ndarray,
    S: np.ndarray,
    layers: np.ndarray,
    counts: np.ndarray | None = None,
    device: Device = "cpu",
) -> PairStatistics | None:
    """`pair_statistics` in the aligned singular basis without forming any residual, or None where that
    would lose precision. Coordinate i of w(t, s) is Z_s - r Z_t plus its mean, with Z the coordinates
    centered per layer and r = S[s, i] / S[t, i], so its central moments expand into moments of two layers:
    m2 = E Z_s^2 - 2 r E Z_s Z_t + r^2 E Z_t^2 and
    m4 = E Z_s^4 - 4 r E Z_s^3 Z_t + 6 r^2 E Z_s^2 Z_t^2 - 4 r^3 E Z_s Z_t^3 + r^4 E Z_t^4.
    Three weighted `(k, m, N) x (k, N, m)` products (torch, float64, on `device`) over the m `layers` give every
    pair at once. The expansion subtracts terms larger than the residual's (m4 keeps about 16 - 2 log10(E Z^2 / m2)
    digits), so it declines (None) when a residual's variance is below `EXPANSION_FLOOR` of its two terms'."""
    N, T, k = Y.shape
    w = torch.ones(N, dtype=torch.float64, device=stats_device(device))
    if counts is not None:
        w = as_tensor(counts, device, torch.float64)
    n = float(w.sum())
    Z = as_tensor(np.ascontiguousarray(Y[:, layers]), device).double()
    Z = Z.permute(2, 1, 0).contiguous()  # (k, m, N)
    mean = Z @ w / n  # (k, m)
    Z -= mean[..., None]
    Zw, Z2 = Z * w, Z * Z
    # E11[i, a, b] = E Z_a Z_b, E22 = E Z_a^2 Z_b^2, E31 = E Z_a^3 Z_b, for layers a, b of `layers`
    E11, E22, E31 = (A @ B.mT / n for A, B in ((Zw, Z), (Z2 * w, Z2), (Z2 * Zw, Z)))
    a, b = np.triu_indices(len(layers), 1)  # departure a, arrival b
    S = as_tensor(S, device)
    r = (S[layers[b]] / S[layers[a]]).T  # (k, pairs)
    terms = E11[:, b, b] + r**2 * E11[:, a, a]
    var = terms - 2 * r * E11[:, b, a]
    if not bool(torch.all(var > EXPANSION_FLOOR * terms)):
        return None
    m4 = (
        E22[:, b, b]
        - 4 * r * E31[:, b, a]
        + 6 * r**2 * E22[:, b, a]
        - 4 * r**3 * E31[:, a, b]
        + r**4 * E22[:, a, a]
    )
    out = torch.full((3, T, T, k), np.nan, dtype=torch.float64, device=Z.device)
    t, s = layers[a], layers[b]
    out[0, t, s] = ((mean[:, b] - r * mean[:, a]) / var.sqrt()).T
    out[1, t, s] = var.T
    out[2, t, s] = (m4 / var**2 - 3.0).T
    z, var, kurtosis = to_numpy(out)
    return PairStatistics(z=z, var=var, kurtosis=kurtosis, basis="singular")


def pair_mask(T: int, first: int, last: int) -> np.ndarray:
    """`(T, T)` boolean: pairs with first <= t < t + tau <= last."""
    t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    return (t >= first) & (s > t) & (s <= last)


def fit_variance(log_var: np.ndarray, mask: np.ndarray) -> dict:
    """Least-squares fit of log variance = ln(alpha) + lambda (t + tau) over the pairs in `mask`.

    log_var `(T, T)` indexed `[t, t + tau]` (natural log, either convention). Returns alpha, lambda, r2
    of the fit, `arrival_r2` (share of the variance of log_var explained by the arrival layer alone,
    any function of it: 1 means "depends on t + tau only") and the number of pairs.
    """
    fits = fit_laws(log_var, mask)
    return {
        **{name: float(value) for name, value in fits.items()},
        "n_pairs": int(mask.sum()),
    }


def fit_laws(log_var: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """`fit_variance` for a stack of log variances `(..., T, T)` (e.g. one per bootstrap resample) at once:
    alpha, lambda, r2 and arrival_r2, each `(...)`."""
    t, arrival = np.nonzero(mask)
    y = log_var[..., t, arrival]  # (..., P)
    x = arrival - arrival.mean()
    slope = (y @ x) / (x @ x)
    intercept = y.mean(-1) - slope * arrival.mean()
    centered = y - y.mean(-1, keepdims=True)
    total = np.sum(centered**2, -1)
    r2 = 1.0 - np.sum((centered - slope[..., None] * x) ** 2, -1) / total
    # (P, G) one-hot
    groups = (arrival[:, None] == np.unique(arrival)[None]).astype(np.float64)
    group_mean = (y @ groups) / groups.sum(0)
    arrival_r2 = 1.0 - np.sum((y - group_mean @ groups.T) ** 2, -1) / total
    return {
        "alpha": np.exp(intercept),
        "lambda": slope,
        "r2": r2,
        "arrival_r2": arrival_r2,
    }


def fit_accumulated(log_var: np.ndarray, mask: np.ndarray) -> dict:
    """The law that the noise rate alpha lambda e^(lambda t), injected from the departure layer on, gives the
    residual of a map restarted at t: ln var = ln alpha + lambda (t + tau) + ln(1 - e^(-lambda tau)) (the noise
    accumulated over [t, t + tau] only), least squares over the pairs in `mask` of log_var `(T, T)`: alpha,
    lambda and r2, to set against `fit_variance` (Eq. 2, accumulated since the input)."""
    from scipy.optimize import least_squares

    t, arrival = np.nonzero(mask)
    y, tau = log_var[t, arrival], arrival - t
    start = fit_variance(log_var, mask)
    misfit = lambda p: p[0] + p[1] * arrival + np.log(-np.expm1(-p[1] * tau)) - y
    p = least_squares(
        misfit,
        [np.log(start["alpha"]), max(start["lambda"], 1e-3)],
        bounds=([-np.inf, 1e-6], [np.inf, np.inf]),
    ).x
    r2 = 1.0 - np.sum(misfit(p) ** 2) / np.sum((y - y.mean()) ** 2)
    return {"alpha": float(np.exp(p[0])), "lambda": float(p[1]), "r2": float(r2)}


@dataclass
class ResampledPairs:
    """Summaries of the Eq. 1 residual w(t, s) of every pair s = t + tau, on the whole sample of pilots and on
    each bootstrap resample: axis 0 is the row of the resampling weights (row 0: the sample itself), the last
    two `[t, s]` `(T, T)`, NaN outside the pairs computed.

    `trace`: tr Cov w, the total residual variance (the same in every orthonormal basis). `mean_log_var`:
    the mean over the k coordinates (aligned singular basis of s) of ln var w_i. `offset`: ```|E w|`^2 / tr Cov w``,
    the squared mean estimated from pairs of distinct pilots (about 0 for a residual of zero mean at any sample
    size).
    `kurtosis`: the coordinates' excess kurtosis (bias-corrected: `unbiased_excess_kurtosis`) weighted by their
    variance, sum_i var_i kappa_i / tr Cov w (0 for a Gaussian residual, isotropic or not; large when the
    coordinates that carry the variance have heavy tails). `spread` `(B, T)`: tr Cov x(t), the total variance of the ensemble at each layer.

    These summaries are chosen so that a resample estimates the same thing as the sample (an offset from
    pairs of distinct pilots, a signed kurtosis): mean abs(mu / sigma) and mean abs(kurtosis) grow under
    resampling (duplicated pilots add sampling noise), and `PairStatistics` keeps them for the figures only.
    """

    trace: np.ndarray
    mean_log_var: np.ndarray
    offset: np.ndarray
    kurtosis: np.ndarray
    spread: np.ndarray
    k: int

    def log_mean_var(self) -> np.ndarray:
        """ln(mean variance over the k coordinates), B4's first convention: `(B, T, T)`."""
        return np.log(self.trace / self.k)

    def log_relative_var(self) -> np.ndarray:
        """ln(tr Cov w(t, s) / tr Cov x(s)): the residual variance relative to the spread of the ensemble it
        should predict (ln 2 for a map that knows nothing, adding its own spread to the target's): `(B, T, T)`.
        The norm growth of the ensemble alone makes any residual variance grow with the arrival layer (a cloud
        of independent points whose spread grows gives a perfect "law"); this ratio divides it out."""
        return np.log(self.trace / self.spread[:, None, :])


def unbiased_excess_kurtosis(g2, n):
    """The sample excess kurtosis g2 = m4 / m2^2 - 3 of n draws corrected for its small-sample bias (G2, as
    MATLAB's `kurtosis(x, 0)` and the authors' code compute it): ((n + 1) g2 + 6) (n - 1) / ((n - 2)(n - 3)),
    unbiased for a Gaussian (plain g2 averages -6 / (n + 1))."""
    return ((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3))


def resampled_pairs(
    Y: np.ndarray,
    S: np.ndarray,
    layers,
    weights: np.ndarray,
    progress: bool = True,
    device: Device = "cpu",
) -> ResampledPairs:
    """`ResampledPairs` for every pair t < t + tau of `layers` (consecutive integers) from Y `(N, T, k)`
    (`singular_coordinates`) and aligned S `(T, k)`, for each row of `weights` `(B, N)` (how many times each
    pilot is drawn; row 0 all ones for the sample itself). The bases are held fixed; each resample's moments
    are weighted sums over pilots, one `(B, N) x (N, len(t) k)` product per power and tau, of coordinates
    centered on the whole sample's mean (numerically stable in float32), on `device` (`stats.backend`):
    products in Y's dtype, the moments in float64."""
    layers = np.asarray(layers)
    N, T, k = Y.shape
    Y, S = as_tensor(Y, device), as_tensor(S, device)
    weights = as_tensor(weights, device, torch.float64)
    rows = weights.float().to(Y.dtype)
    B = len(rows)
    n = weights.sum(1)  # (B,)
    distinct = n**2 - (weights**2).sum(1)  # ordered pairs of distinct draws
    # trace, mean_log_var, offset, kurtosis
    out = torch.full((4, B, T, T), np.nan, dtype=torch.float64, device=Y.device)
    with no_tf32():
        for tau, t in layer_offsets(layers, "resampled residuals", progress):
            W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
            center = W.mean(0)
            Wc = (W - center).reshape(N, -1)
            W2 = Wc * Wc
            s1, s2, s3, s4 = (
                (rows @ P).double() / n[:, None] for P in (Wc, W2, W2 * Wc, W2 * W2)
            )
            var = s2 - s1**2
            m4 = s4 - 4 * s1 * s3 + 6 * s1**2 * s2 - 3 * s1**4
            var, m4, s1 = (a.reshape(B, len(t), k) for a in (var, m4, s1))
            trace = var.sum(-1)
            mean = center.double()[None] + s1  # (B, len(t), k)
            self_pairs = (rows**2) @ (W * W).sum(
                -1
            )  # sum of c_n^2 |w_n|^2, (B, len(t))
            mean_sq = (n[:, None] ** 2 * (mean**2).sum(-1) - self_pairs) / distinct[
                :, None
            ]
            excess = unbiased_excess_kurtosis(m4 / var**2 - 3.0, n[:, None, None])
            out[:, :, t, t + tau] = torch.stack(
                [
                    trace,
                    var.log().mean(-1),
                    mean_sq / trace,
                    (var * excess).sum(-1) / trace,
                ]
            )
        Yc = Y - Y.mean(0)
        s1 = (rows @ Yc.reshape(N, -1)).double().reshape(B, T, k) / n[:, None, None]
        s2 = (rows @ (Yc * Yc).sum(-1)).double() / n[:, None]
    trace, mean_log_var, offset, kurtosis = to_numpy(out)
    return ResampledPairs(
        trace=trace,
        mean_log_var=mean_log_var,
        offset=offset,
        kurtosis=kurtosis,
        spread=to_numpy(s2 - (s1**2).sum(-1)),
        k=k,
    )


@dataclass
class PairLayers:
    """B4's layers: block outputs 1..L (`layers`), T = L + 1, and the pairs `[t, t + tau]` `(T, T)` it
    summarizes: `all` (1 <= t), `late` (t >= early_layers), `early` (the rest) and `fit` (fit_first <= t,
    t + tau <= fit_last); `t_pdf` is the departure of the noise PDFs and correlations."""

    L: int
    fit_first: int
    fit_last: int
    early_layers: int
    t_pdf: int

    @classmethod
    def of(
        cls,
        L: int,
        model: str,
        fit_first=1,
        fit_last=None,
        early_layers=None,
        t_pdf=None,
    ):
        """Checked layer parameters (`lotlib.models.bounds.layer_index`); None: L, L // 4, L // 2."""

        def check(value, name, default):
            return default if value is None else layer_index(value, L, name, model)

        return cls(
            L,
            check(fit_first, "fit_first", 1),
            check(fit_last, "fit_last", L),
            check(early_layers, "early_layers", L // 4),
            check(t_pdf, "t_pdf", L // 2),
        )

    @property
    def T(self) -> int:
        return self.L + 1

    @property
    def layers(self) -> np.ndarray:
        return np.arange(1, self.L + 1)

    @property
    def all(self) -> np.ndarray:
        return pair_mask(self.T, 1, self.L)

    @property
    def late(self) -> np.ndarray:
        return pair_mask(self.T, self.early_layers, self.L)

    @property
    def early(self) -> np.ndarray:
        return self.all & ~self.late

    @property
    def fit(self) -> np.ndarray:
        return pair_mask(self.T, self.fit_first, self.fit_last)

    def subsets(self) -> dict[str, tuple[str, int, int]]:
        """The layer subsets the law is refit on: key -> (description, first t, last t + tau)."""
        L, early = self.L, self.early_layers
        return {
            "default": (
                f"t >= {self.fit_first}, t+tau <= {self.fit_last}",
                self.fit_first,
                self.fit_last,
            ),
            "all": (f"all layers 1..{L}", 1, L),
            "no_last": (f"without the last layer (t+tau <= {L - 1})", 1, L - 1),
            "no_early": (f"without early departures (t >= {early})", early, L),
            "no_both": ("without both", early, L - 1),
        }


def split_for_bases(
    N: int, D: int, held_out: float, seed: int, model: str = "the model"
) -> tuple[np.ndarray, np.ndarray]:
    """The seeded split (held, fitted) of N pilots: bases fitted on one share, residuals scored on the other
    (`held_out` of them). Raises `ParameterError` when the fitted share has fewer than D pilots (the bases
    would not span the space the residual lives in)."""

    held, fitted = split_pilots(N, round(held_out * N), np.random.default_rng(seed))
    if len(fitted) < D or len(held) < 4:
        raise ParameterError(
            f"parameter n_s: the bases are fitted on {len(fitted)} of the {N} pilots of {model} and the "
            f"residuals scored on {len(held)}; the fit needs at least D = {D} and the scoring 4: raise n_s "
            f"to {int(np.ceil(D / (1 - held_out)))} or more"
        )
    return held, fitted


def pair_frame(values: np.ndarray, pairs) -> pd.DataFrame:
    """B4: a `(T, T)` pair statistic over `PairLayers.all` as a heatmap table: departure t in rows (top:
    last), arrival t + tau in columns."""
    layers = pairs.layers
    shown = np.where(pairs.all, values, np.nan)[1 : pairs.L, 1:]
    return pd.DataFrame(
        shown,
        index=pd.Index(layers[:-1], name="departure layer t"),
        columns=pd.Index(layers, name="arrival layer t + τ"),
    ).iloc[::-1]
