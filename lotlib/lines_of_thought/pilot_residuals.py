"""The noise law's total variances pilot by pilot: a resample of the pilots costs one weighted mean."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from .ensemble import stored_alignment
from .residuals import residual_coordinates, singular_coordinates

# the summary key of alpha relative to the arrival layer's spread: B4's claim, on C5's rows
ALPHA_RELATIVE = "alpha_relative"


@dataclass(frozen=True)
class PilotResiduals:
    """The noise law's total variances pilot by pilot, so that a resample of the pilots costs one weighted mean.

    `energy` `(N, T, T)`: `||w_n(t, s) - mean w(t, s)||`^2, each pilot's squared distance from the mean residual
    of Eq. 1 for the pair (t, s = t + tau), NaN outside first <= t < s <= L; `spread` `(N, T)`:
    `||x_n(t) - mean x(t)||`^2; `k`: the number of residual coordinates. The means over pilots are tr Cov w and
    tr Cov x(t) of `lotlib.lines_of_thought.residuals.resampled_pairs`, which also resamples every coordinate's
    moments (kurtosis, offsets) at about k times the cost.
    """

    energy: np.ndarray
    spread: np.ndarray
    k: int

    def means(self, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Weighted means over pilots of `energy` and `spread`: `(B, T, T)` and `(B, T)` for `weights` `(B, N)`
        (`resampling_weights`), `(T, T)` and `(T,)` without. Deviations are taken from the whole sample's
        means: exact for the sample; on a resample they leave out its own shift of the mean, which lowers
        every variance by a factor of about 1 - 1/N alike."""
        N, T = self.spread.shape
        rows = np.ones((1, N)) if weights is None else weights
        energy = (rows @ np.nan_to_num(self.energy.reshape(N, -1))) / N
        energy[:, np.isnan(self.energy[0].ravel())] = np.nan
        spread = rows @ self.spread / N
        energy = energy.reshape(len(rows), T, T)
        return (energy[0], spread[0]) if weights is None else (energy, spread)

    def log_mean_var(self, weights: np.ndarray | None = None) -> np.ndarray:
        """ln(mean variance over coordinates) of every pair, indexed `[..., t, s]`: chapter B4's quantity."""
        energy, _ = self.means(weights)
        return np.log(energy / self.k)

    def log_relative_var(self, weights: np.ndarray | None = None) -> np.ndarray:
        """ln(tr Cov w(t, s) / tr Cov x(s)), `[..., t, s]`: the residual variance relative to the spread of the
        states it should predict, the norm growth of the ensemble divided out (ln 2 for a map that knows
        nothing)."""
        energy, spread = self.means(weights)
        return np.log(energy / spread[..., None, :])


def pilot_residuals(
    X: np.ndarray, U: np.ndarray, S: np.ndarray, first: int = 1, progress: bool = True
) -> PilotResiduals:
    """`PilotResiduals` of trajectories X `(N, L+1, D)` for every pair first <= t < t + tau <= L, with U
    `(L+1, D, k)`, S `(L+1, k)` from `ensemble_svd` (sorted, not aligned: aligned here from layer 0, as in
    B4, and kept: `stored_alignment`)."""
    U, S = stored_alignment(U, S)
    Y = singular_coordinates(X, U)
    N, T, k = Y.shape
    energy = np.full((N, T, T), np.nan)
    for tau in tqdm(
        range(1, T - first), desc="pilot residuals", unit="tau", disable=not progress
    ):
        t = np.arange(first, T - tau)
        W = residual_coordinates(Y, S, t, tau)  # (N, len(t), k)
        energy[:, t, t + tau] = ((W - W.mean(0)) ** 2).sum(-1)
    Xc = X.astype(np.float64) - X.mean(0, dtype=np.float64)
    return PilotResiduals(energy, np.einsum("ntd,ntd->nt", Xc, Xc), k)
