"""The residual statistic of Fig. B4 and Eq. 2 as the authors compute it (`dx_calculate.m`,
`figA_llama2_7B.m`): bases refitted on the pilots they score, moments per raw coordinate, every pair of layers
on every resample. Chapter `b4_authors_protocol` runs the protocol; C4 reuses `weighted_bases`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from ..stats.backend import Device, as_tensor, no_tf32, to_numpy
from .ensemble import align_bases

# the figure's panels, averages over coordinates: abs(m) / sqrt(v) (the title's abs(mu / sigma)), abs(m) / v
# (what the authors' code divides by), v, ln v and abs(k), MATLAB's `kurtosis(x, 0, 2)` (bias-corrected, not excess)
SUMMARIES = (
    "mean_abs_z",
    "mean_abs_m_over_v",
    "mean_var",
    "mean_log_var",
    "mean_abs_kurtosis",
)


def weighted_bases(
    X: np.ndarray | torch.Tensor,
    counts: np.ndarray | torch.Tensor,
    device: Device = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-layer uncentered SVD of the `(D, n)` matrix in which pilot j of X `(T, N, D)` (layer first)
    appears `counts[j]` times (all > 0), from the smaller Gram matrix in float64: U `(T, D, k)` float32,
    S `(T, k)` float64 sorted decreasing, k = min(N, D). The bases of `ensemble_svd` of the repeated
    pilots, up to signs. Computed on `device` (`stats.backend.stats_device`)."""
    X, counts = as_tensor(X, device), as_tensor(counts, device)
    T, N, D = X.shape
    k, wide, root = min(N, D), N >= D, counts.double().sqrt()[:, None]
    gram = torch.empty(
        (T, D, D) if wide else (T, N, N), dtype=torch.float64, device=X.device
    )
    for t in range(T):
        Z = X[t].double() * root
        gram[t] = Z.T @ Z if wide else Z @ Z.T
    lam, vec = torch.linalg.eigh(gram)
    S = lam.flip(-1)[:, :k].clamp(min=0.0).sqrt()
    vec = vec.flip(-1)[..., :k]
    if not wide:
        vec = (X.double() * root).mT @ vec / S[:, None, :]
    return to_numpy(vec.float()), to_numpy(S)


def coordinate_summaries(
    mean: torch.Tensor, m2: torch.Tensor, m4: torch.Tensor, n: int
) -> dict[str, torch.Tensor]:
    """`SUMMARIES` from the mean and the biased central moments m2, m4 of n draws `(..., D)`: averages over
    the last axis of abs(m) / sqrt(v), abs(m) / v, v, ln v and abs(k) with v = m2 n / (n - 1) (ddof 1) and MATLAB's
    bias-corrected kurtosis k = 3 + (n - 1) ((n + 1) g2 + 6) / ((n - 2)(n - 3)), g2 = m4 / m2^2 - 3. `(...)`
    float64.

    ln v is corrected for its small-sample bias, `log_variance_bias`: v is unbiased but ln v is not (Jensen),
    and mean(ln v) averages D coordinates that all err the same way, so at a fixed N / D the bias stays a fixed
    share of the standard error whatever D (`benchmarks/coverage.py` measures the coverage of alpha with and
    without it). The correction is about 1 / N for a Gaussian: negligible at the paper's pilot count."""
    mean, m2, m4 = mean.double(), m2.double(), m4.double()
    var = m2 * n / (n - 1)
    g2 = m4 / m2**2 - 3.0
    kurt = 3.0 + (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * g2 + 6.0)
    values = {
        "mean_abs_z": mean.abs() / var.sqrt(),
        "mean_abs_m_over_v": mean.abs() / var,
        "mean_var": var,
        "mean_log_var": var.log() - log_variance_bias(kurt - 3.0, n),
        "mean_abs_kurtosis": kurt.abs(),
    }
    return {name: v.mean(-1) for name, v in values.items()}


def log_variance_bias(excess: torch.Tensor, n: int) -> torch.Tensor:
    """E[ln v] - ln sigma^2 to second order (delta method) for the ddof-1 variance v of n draws of excess
    kurtosis `excess` (the bias-corrected estimate, clipped at its least possible value, -2):
    -Var(v) / (2 sigma^4) with Var(v) / sigma^4 = 2 / (n - 1) + excess / n. For a Gaussian, -1 / (n - 1), the
    first term of psi((n - 1) / 2) - ln((n - 1) / 2). Same shape as `excess`."""
    return -(2.0 / (n - 1) + excess.clamp(min=-2.0) / n) / 2.0


def pair_moments(
    X: np.ndarray | torch.Tensor,
    U: np.ndarray,
    S: np.ndarray,
    counts: np.ndarray | torch.Tensor,
    n: int,
    first_arrival: int = 1,
    device: Device = "cpu",
) -> dict[str, np.ndarray]:
    """The coordinate averages `SUMMARIES` of the Eq. 1 residual's raw moments for every pair t < s of the
    layers of X `(T, N, D)` (layer first) with aligned bases U `(T, D, k)`, S `(T, k)`, pilot j counted
    `counts[j]` times among `n`: each `(T, T)` indexed [t, s], NaN elsewhere and for s < first_arrival.

    The residual is Eq. 1's at full rank k = min(D, N), dx = x(s) - U(s) Sigma(s) Sigma(t)^-1 U(t)^T x(t), with
    its moments **per raw coordinate** across pilots. With U(t) square (N >= D), x(t) = U(t) Sigma(t) v(t)
    where v(t) = Sigma(t)^-1 U(t)^T x(t) are the pilots' right singular coordinates, so the extrapolation is
    v(t) Sigma(s) U(s)^T: one `(N, k) x (k, D)` product per pair, batched over departures. Products in float32 on `device`
    (`stats.backend`), the moments' summaries in float64."""
    X = as_tensor(X, device, torch.float32)
    T, N, D = X.shape
    U32, S32 = as_tensor(U, device, torch.float32), as_tensor(S, device, torch.float32)
    c = as_tensor(counts, device, torch.float32)
    out = torch.full(
        (len(SUMMARIES), T, T), np.nan, dtype=torch.float64, device=X.device
    )
    with no_tf32():
        V = (X @ U32) / S32[:, None, :]  # (T, N, k) right singular coordinates
        for s in range(max(first_arrival, 1), T):
            dx = (V[:s].reshape(-1, V.shape[-1]) @ (S32[s][:, None] * U32[s].T)).view(
                s, N, D
            )
            dx.neg_().add_(X[s])  # x(s) minus its extrapolation from each t < s
            mean = (c @ dx) / n  # (s, D)
            dx.sub_(mean[:, None]).square_()
            m2 = (c @ dx) / n
            summaries = coordinate_summaries(mean, m2, (c @ dx.square_()) / n, n)
            out[:, :s, s] = torch.stack([summaries[name] for name in SUMMARIES])
    return dict(zip(SUMMARIES, to_numpy(out)))


@dataclass
class AuthorsPairs:
    """The per-pair summaries `SUMMARIES` of the authors' protocol on the sample (row 0) and on each
    bootstrap resample of the pilots, each `(B, T+1, T+1)` indexed [row, t, t + tau] by layer number
    1..T (row and column 0 unused, NaN off the pairs), over `n` pilots."""

    mean_abs_z: np.ndarray
    mean_abs_m_over_v: np.ndarray
    mean_var: np.ndarray
    mean_log_var: np.ndarray
    mean_abs_kurtosis: np.ndarray
    n: int

    @property
    def T(self) -> int:
        return self.mean_var.shape[-1] - 1

    def sample(self) -> AuthorsPairs:
        """The sample's row alone `(1, T+1, T+1)`: what `authors_pairs` gives for the weights' first row."""
        return AuthorsPairs(**{k: getattr(self, k)[:1] for k in SUMMARIES}, n=self.n)


def authors_pairs(
    X: np.ndarray,
    weights: np.ndarray,
    progress: bool = True,
    last_readings: tuple[np.ndarray, ...] = (),
    device: Device = "cpu",
) -> list[AuthorsPairs]:
    """`AuthorsPairs` of layer outputs X `(N, T, D)` (t = 1..T) for each row of `weights` `(B, N)` (how many
    times each pilot is drawn; row 0 all ones: the sample). Every row refits the bases (`weighted_bases`:
    per layer an uncentered thin SVD of the `(D, N)` matrix of the pilots, from a weighted Gram matrix of the
    distinct pilots drawn, the same SVD as the matrix with its repeated columns) and their alignment
    (`align_bases`, from the first layer on) before its residuals (`pair_moments`, moments weighted by how
    often each pilot was drawn).
    Then one `AuthorsPairs` per other reading of the last layer in `last_readings` (each `(N, D)`, e.g. after
    the final norm), on the same resamples: only its basis and the pairs arriving at T are recomputed (the
    earlier layers and their alignment do not depend on it). The pilots stay on `device` (`stats.backend`)
    for every row; the alignment runs on the host."""
    Xt = as_tensor(np.ascontiguousarray(X.transpose(1, 0, 2), dtype=np.float32), device)
    lasts = [as_tensor(np.asarray(x, dtype=np.float32), device) for x in last_readings]
    T, N, _ = Xt.shape
    rows = [[] for _ in range(1 + len(lasts))]
    for w in tqdm(
        weights,
        desc="authors' protocol (refit bases)",
        unit="resample",
        disable=not progress,
    ):
        drawn = np.flatnonzero(w)
        index = as_tensor(drawn, device)
        Xw, counts, n = (
            Xt[:, index],
            as_tensor(w[drawn], device, torch.float64),
            int(w.sum()),
        )
        U, S = align_bases(*weighted_bases(Xw, counts, device))
        rows[0].append(pair_moments(Xw, U, S, counts, n, device=device))
        for j, last in enumerate(lasts, start=1):
            Xw[-1] = last[index]
            u, s = weighted_bases(Xw[-1:], counts, device)
            u, s = align_bases(np.stack([U[-2], u[0]]), np.stack([S[-2], s[0]]))
            U[-1], S[-1] = u[1], s[1]
            arriving = pair_moments(
                Xw, U, S, counts, n, first_arrival=T - 1, device=device
            )
            rows[j].append(
                {
                    k: np.where(np.isnan(v), rows[0][-1][k], v)
                    for k, v in arriving.items()
                }
            )
    return [
        AuthorsPairs(
            **{k: _by_layer_number(np.stack([r[k] for r in rs])) for k in SUMMARIES},
            n=N,
        )
        for rs in rows
    ]


def _by_layer_number(a: np.ndarray) -> np.ndarray:
    """`(B, T, T)` indexed from 0 -> `(B, T+1, T+1)` indexed by layer number 1..T (row and column 0 NaN)."""
    return np.pad(a, ((0, 0), (1, 0), (1, 0)), constant_values=np.nan)
