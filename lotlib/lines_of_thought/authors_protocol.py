"""The residual statistics of Fig. B4 and Eq. 2 as the authors compute them (`dx_calculate.m`,
`figA_llama2_7B.m`), so that the paper's numbers are judged by their own statistic and protocol."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..stats import Estimate, centered_percentile, resampling_weights
from ..stats.backend import Device, as_tensor, no_tf32, to_numpy
from .ensemble import align_bases
from .nulls import structureless_cloud
from .residuals import fit_laws, pair_mask

ENSEMBLES = {
    "model": "",
    "after the final norm": "_hf",
    "structureless cloud": "_cloud",
}
"""The ensembles of `authors_ensembles` and the suffix of their summary keys."""
# the figure's panels, averages over coordinates: abs(m) / sqrt(v) (the title's abs(mu / sigma)), abs(m) / v
# (what the authors' code divides by), v, ln v and abs(k), MATLAB's `kurtosis(x, 0, 2)` (bias-corrected, not excess)
SUMMARIES = (
    "mean_abs_z",
    "mean_abs_m_over_v",
    "mean_var",
    "mean_log_var",
    "mean_abs_kurtosis",
)


@torch.inference_mode()
def authors_trajectories(
    X: np.ndarray, view=None, batch_size: int = 4096
) -> np.ndarray:
    """The block outputs t = 1..L of X `(N, L+1, D)` (x(0), the embedding, dropped): `(N, L, D)` float32.
    With a `view` (`lotlib.models.view.ModelView`), x(L) is read after the final norm, as Hugging Face's
    `output_hidden_states` (the authors' extraction) reports it."""
    out = np.array(X[:, 1:], dtype=np.float32)
    if view is not None:
        for start in range(0, len(out), batch_size):
            rows = torch.as_tensor(
                out[start : start + batch_size, -1], device=view.device
            )
            out[start : start + batch_size, -1] = (
                view.final_norm(rows).float().cpu().numpy()
            )
    return out


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


def authors_ensembles(
    X: np.ndarray,
    view,
    n_boot: int,
    seed: int = 0,
    progress: bool = True,
    device: Device = "cpu",
) -> dict[str, AuthorsPairs]:
    """The authors' protocol (`authors_pairs`) on the trajectories X `(N, L+1, D)` of the chosen pilots, with
    the same `n_boot` resamples (`resampling_weights`, seeded) for each of `ENSEMBLES`: the block outputs
    1..L with x(L) before the final norm ("model"), after it (`view`: `ModelView`), and the structureless
    cloud of the first (`structureless_cloud`, seeded), each on `device`."""
    layers = authors_trajectories(X)
    after = authors_trajectories(X[:, -2:], view)[:, -1]
    weights = resampling_weights(len(X), n_boot, seed)
    model, hf = authors_pairs(
        layers, weights, progress, last_readings=(after,), device=device
    )
    cloud = authors_pairs(
        structureless_cloud(layers, seed), weights, progress, device=device
    )[0]
    return dict(zip(ENSEMBLES, (model, hf, cloud)))


def gaussian_floor(
    n: int, d: int, n_draws: int = 200, seed: int = 0
) -> dict[str, Estimate]:
    """What "about zero" means for the paper's statistics at n pilots and d coordinates: mean abs(m) / sqrt(v)
    (`mean_abs_z`) and mean abs(k) - 3 (`kurtosis`) of one pair whose residual is an i.i.d. standard Gaussian
    `(n, d)` sample, over `n_draws` seeded samples: the median with the 2.5% and 97.5% quantiles."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_draws):
        z = torch.from_numpy(rng.standard_normal((n, d), dtype=np.float32))
        mean = z.mean(0)
        squares = (z - mean) ** 2
        draws.append(
            coordinate_summaries(mean, squares.mean(0), (squares**2).mean(0), n)
        )
    values = {
        "mean_abs_z": [float(x["mean_abs_z"]) for x in draws],
        "kurtosis": [float(x["mean_abs_kurtosis"]) - 3.0 for x in draws],
    }
    return {
        key: Estimate(
            float(np.median(v)),
            *map(float, np.quantile(v, [0.025, 0.975])),
            n=n_draws,
            unit="Gaussian samples",
            method="reference",
        )
        for key, v in values.items()
    }


def authors_summary(
    pairs: AuthorsPairs, fit_first: int, fit_last: int, late_from: int
) -> dict[str, Estimate]:
    """The authors' statistics of `AuthorsPairs` with intervals over the resamples: Eq. 2 fitted on the pairs
    fit_first <= t < t + tau <= fit_last as ln(mean v) (`lambda_log_mean`, `alpha_log_mean`) and mean(ln v)
    (`lambda_mean_log`, `alpha_mean_log`); the mean over those pairs of mean abs(m) / sqrt(v) (`mean_abs_z`)
    and of mean abs(m / v) (`mean_abs_m_over_v`), and the mean over pairs departing at t >= late_from of
    mean abs(k) - 3 (`kurtosis_late`). The intervals come from the resamples' percentile interval
    (`stats.centered_percentile`): for the last three moved to the sample's value, for Eq. 2's four
    the smallest interval that holds it both moved and unmoved.

    Why moved: a repeated pilot adds sampling noise and tails, so these three sit higher in every resample
    than in the sample; the paper's "~0" is judged against the same statistic on Gaussian samples of
    the sample's size (`gaussian_floor`), and a raw interval, lifted by that noise, would sit above it.

    Why both for Eq. 2: the bases are refitted on resamples that hold about 63% distinct pilots, and the
    resamples of alpha move away from the sample's value in a direction that depends on the residual's law: the
    sample cannot tell which applies, so the interval holds both (`benchmarks/coverage.py` measures its coverage)."""
    T = pairs.T
    fit, late = pair_mask(T + 1, fit_first, fit_last), pair_mask(T + 1, late_from, T)
    log_mean = fit_laws(np.log(pairs.mean_var), fit)
    mean_log = fit_laws(pairs.mean_log_var, fit)
    laws = {
        "lambda_log_mean": log_mean["lambda"],
        "alpha_log_mean": log_mean["alpha"],
        "lambda_mean_log": mean_log["lambda"],
        "alpha_mean_log": mean_log["alpha"],
    }
    noisy = {
        "mean_abs_z": (pairs.mean_abs_z[:, fit].mean(1), (0.0, np.inf)),
        "mean_abs_m_over_v": (pairs.mean_abs_m_over_v[:, fit].mean(1), (0.0, np.inf)),
        "kurtosis_late": (
            pairs.mean_abs_kurtosis[:, late].mean(1) - 3.0,
            (-3.0, np.inf),
        ),
    }
    return {
        **{
            k: centered_percentile(v, pairs.n, unit="pilots", with_raw=True)
            for k, v in laws.items()
        },
        **{
            k: centered_percentile(v, pairs.n, unit="pilots", bounds=bounds)
            for k, (v, bounds) in noisy.items()
        },
    }


def authors_residual_statistics(
    X: np.ndarray,
    *,
    fit_first: int = 1,
    fit_last: int | None = None,
    late_from: int | None = None,
    n_boot: int = 100,
    seed: int = 0,
    progress: bool = True,
    device: Device = "cpu",
) -> dict[str, Estimate]:
    """Fig. B4 and Eq. 2 by the authors' protocol on layer outputs X `(N, T, D)`, t = 1..T (no embedding):
    `authors_summary` of `authors_pairs` over the sample and `n_boot` bootstrap resamples of the pilots
    (`resampling_weights`, seeded), each refitting the bases and their alignment. fit_last: None = T;
    late_from: None = T // 4. Mean abs(m) / sqrt(v) and mean abs(k) - 3 move under resampling (a repeated pilot
    adds sampling noise and tails): their intervals are moved to the sample's value (`authors_summary`).
    Computed on `device` (`authors_pairs`)."""
    N, T, _ = X.shape
    fit_last = T if fit_last is None else fit_last
    late_from = max(T // 4, 1) if late_from is None else late_from
    for name, value, lo, hi in (
        ("fit_first", fit_first, 1, T - 1),
        ("fit_last", fit_last, fit_first + 1, T),
        ("late_from", late_from, 1, T - 1),
    ):
        if not lo <= value <= hi:
            raise ValueError(
                f"{name} = {value} must be in {lo}..{hi} for T = {T} layers"
            )
    if N < 4:
        raise ValueError(
            f"the bias-corrected kurtosis needs at least 4 pilots, got {N}"
        )
    pairs = authors_pairs(
        X, resampling_weights(N, n_boot, seed), progress, device=device
    )[0]
    return authors_summary(pairs, fit_first, fit_last, late_from)


def law_table(results: dict[str, dict[str, Estimate]], d_model: int) -> pd.DataFrame:
    """Eq. 2 by the authors' protocol at several pilot counts: one row per label of `results` (label ->
    `authors_residual_statistics` or `authors_summary`), the pilots N_s and N_s / `d_model`, and the sample's
    alpha and lambda in both conventions (ln of the mean variance, mean of the ln variance)."""
    return pd.DataFrame(
        [
            {
                "pilots": label,
                "N_s": est["alpha_log_mean"].n,
                "N_s / D": est["alpha_log_mean"].n / d_model,
                "α, ln(mean v)": est["alpha_log_mean"].value,
                "λ, ln(mean v)": est["lambda_log_mean"].value,
                "α, mean(ln v)": est["alpha_mean_log"].value,
                "λ, mean(ln v)": est["lambda_mean_log"].value,
            }
            for label, est in results.items()
        ]
    ).set_index("pilots")


@dataclass
class AuthorsProtocol:
    """Eq. 2 and Fig. B4 by the authors' protocol on one ensemble (chapter `b4_authors_protocol`): the paper's
    pilots (`authors_pilots`), `authors_ensembles` with their `authors_summary` (by `ENSEMBLES` suffix), the
    Gaussian floor of the "~0" statistics at that size, and the sample's law at other pilot counts (label ->
    `authors_residual_statistics`)."""

    n_s: int
    d_model: int
    runs: dict[str, AuthorsPairs]
    summaries: dict[str, dict[str, Estimate]]
    floor: dict[str, Estimate]
    by_count: dict[str, dict[str, Estimate]]

    @classmethod
    def run(
        cls,
        ens,
        pairs,
        n_s_paper: int | str,
        n_boot: int,
        seed: int,
        cap,
        device: Device = "cpu",
    ) -> AuthorsProtocol:
        """The protocol on `ens` (`ensemble.Ensemble`) over the layers of `pairs` (`residuals.PairLayers`):
        `n_s_paper` pilots drawn under the chapter's count `cap`, `n_boot` resamples each refitting every
        basis; the sample's law also at D pilots and at every pilot read. The statistics run on `device`."""
        fit = {
            "fit_first": pairs.fit_first,
            "fit_last": pairs.fit_last,
            "late_from": pairs.early_layers,
        }
        at = {"n_boot": 0, "device": device, **fit}
        picked = ens.authors_pilots(n_s_paper, seed, cap=cap)
        runs = authors_ensembles(
            ens.X[picked], ens.lm.view, n_boot, seed, device=device
        )
        summaries = {ENSEMBLES[k]: authors_summary(p, **fit) for k, p in runs.items()}
        layers = authors_trajectories(ens.X)
        at_width = layers[ens.authors_pilots("D", seed, cap=cap)]
        by_count = {
            "N_s = D": authors_residual_statistics(at_width, **at),
            "paper's ratio": summaries[""],
            "every pilot read": authors_residual_statistics(layers, **at),
        }
        floor = gaussian_floor(len(picked), ens.D, seed=seed)
        return cls(len(picked), ens.D, runs, summaries, floor, by_count)

    def law_table(self) -> pd.DataFrame:
        """`law_table` of the sample's alpha and lambda at each pilot count."""
        return law_table(self.by_count, self.d_model)

    def words(self, bands: dict[str, tuple[float, float]]) -> dict[str, object]:
        """What the chapter's prose says beside the values, for `bands` ("lambda", "alpha" -> the printed
        number's band under the book's tolerance rule): each band as text (`lambda_band`, `alpha_band`),
        whether alpha and lambda of ln(mean v) meet it before and after the final norm (`lambda_vs_paper`,
        `alpha_hf_vs_paper`, ...: "agrees with" / "differs from"), the cloud's lambda as a share of the
        model's and alpha at D pilots over alpha at the paper's count."""
        words: dict[str, object] = {}
        for name, (lo, hi) in bands.items():
            words[f"{name}_band"] = f"{lo:.3g} to {hi:.3g}"
            for suffix in ("", "_hf"):
                e = self.summaries[suffix][f"{name}_log_mean"]
                meets = e.lo <= hi and e.hi >= lo
                words[f"{name}{suffix}_vs_paper"] = (
                    "agrees with" if meets else "differs from"
                )
        lam = {s: self.summaries[s]["lambda_log_mean"].value for s in ("", "_cloud")}
        words["lambda_cloud_share"] = lam["_cloud"] / lam[""]
        alpha = {k: e["alpha_log_mean"].value for k, e in self.by_count.items()}
        words["alpha_count_ratio"] = alpha["N_s = D"] / alpha["paper's ratio"]
        return words

    def values(self) -> dict[str, object]:
        """The values the chapter records: `paper_<statistic><suffix>` (Estimates), the Gaussian floors
        `paper_mean_abs_z_gaussian` and `paper_kurtosis_gaussian`, `paper_<statistic>_at_d` and `_at_n_s`
        (the sample's law at D pilots and at every pilot read) and the pilot count `paper_n_s`."""
        at = {
            "_at_d": self.by_count["N_s = D"],
            "_at_n_s": self.by_count["every pilot read"],
        }
        return {
            "paper_n_s": self.n_s,
            **{
                f"paper_{k}{s}": e
                for s, est in self.summaries.items()
                for k, e in est.items()
            },
            "paper_mean_abs_z_gaussian": self.floor["mean_abs_z"],
            "paper_kurtosis_gaussian": self.floor["kurtosis"],
            **{
                f"paper_{k}{s}": e.value
                for s, est in at.items()
                for k, e in est.items()
            },
        }
