"""Chapter B4 by the authors' protocol: Eq. 2's alpha and lambda and Fig. B4's statistics as the authors compute
them (their pilots, bases refitted in every resample, moments per raw coordinate), the claim values, and the
figure of the residual statistics by pair of layers."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib.figure import Figure

from ..lines_of_thought.authors_protocol import (
    AuthorsPairs,
    authors_pairs,
    coordinate_summaries,
)
from ..lines_of_thought.nulls import structureless_cloud
from ..lines_of_thought.residuals import PairLayers, fit_laws, pair_frame, pair_mask
from ..stats import Estimate, centered_percentile, resampling_weights
from ..stats.backend import Device

ENSEMBLES = ("model", "after the final norm", "structureless cloud")
"""The ensembles of `authors_ensembles`: x(L) before the final norm, after it, and the structureless cloud."""


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


@dataclass(frozen=True)
class GaussianFloor:
    """What "about zero" means for the paper's statistics on an i.i.d. Gaussian residual of the same size:
    mean abs(m) / sqrt(v) and mean abs(k) - 3, each the median with the 2.5% and 97.5% quantiles."""

    mean_abs_z: Estimate
    kurtosis: Estimate


def gaussian_floor(n: int, d: int, n_draws: int = 200, seed: int = 0) -> GaussianFloor:
    """`GaussianFloor` at n pilots and d coordinates: the statistics of one pair whose residual is an i.i.d.
    standard Gaussian `(n, d)` sample, over `n_draws` seeded samples."""
    rng = np.random.default_rng(seed)
    z, kurtosis = [], []
    for _ in range(n_draws):
        x = torch.from_numpy(rng.standard_normal((n, d), dtype=np.float32))
        mean = x.mean(0)
        squares = (x - mean) ** 2
        found = coordinate_summaries(mean, squares.mean(0), (squares**2).mean(0), n)
        z.append(float(found["mean_abs_z"]))
        kurtosis.append(float(found["mean_abs_kurtosis"]) - 3.0)

    def reference(v: list[float]) -> Estimate:
        lo, hi = np.quantile(v, [0.025, 0.975])
        return Estimate(
            float(np.median(v)),
            float(lo),
            float(hi),
            n=n_draws,
            unit="Gaussian samples",
            method="reference",
        )

    return GaussianFloor(reference(z), reference(kurtosis))


@dataclass(frozen=True)
class AuthorsSummary:
    """The authors' statistics of one ensemble with their intervals over the resamples (`authors_summary`):
    Eq. 2's lambda and alpha fitted to ln(mean v) (`*_log_mean`) and to mean(ln v) (`*_mean_log`), mean
    abs(m) / sqrt(v), mean abs(m / v) and mean abs(k) - 3 of the late pairs."""

    lambda_log_mean: Estimate
    alpha_log_mean: Estimate
    lambda_mean_log: Estimate
    alpha_mean_log: Estimate
    mean_abs_z: Estimate
    mean_abs_m_over_v: Estimate
    kurtosis_late: Estimate


def authors_summary(pairs: AuthorsPairs, layers: PairLayers) -> AuthorsSummary:
    """The `AuthorsSummary` of `AuthorsPairs`: Eq. 2 fitted on `layers.fit` pairs (fit_first <= t < t + tau <=
    fit_last), mean abs(m) / sqrt(v) and mean abs(m / v) over those pairs, and mean abs(k) - 3 over pairs
    departing at t >= `layers.early_layers`. The intervals come from the resamples' percentile interval
    (`stats.centered_percentile`): for the last three moved to the sample's value, for Eq. 2's four
    the smallest interval that holds it both moved and unmoved.

    Why moved: a repeated pilot adds sampling noise and tails, so these three sit higher in every resample
    than in the sample; the paper's "~0" is judged against the same statistic on Gaussian samples of
    the sample's size (`gaussian_floor`), and a raw interval, lifted by that noise, would sit above it.

    Why both for Eq. 2: the bases are refitted on resamples that hold about 63% distinct pilots, and the
    resamples of alpha move away from the sample's value in a direction that depends on the residual's law: the
    sample cannot tell which applies, so the interval holds both (`benchmarks/coverage.py` measures its coverage)."""
    T = pairs.T
    fit = pair_mask(T + 1, layers.fit_first, layers.fit_last)
    late = pair_mask(T + 1, layers.early_layers, T)
    log_mean = fit_laws(np.log(pairs.mean_var), fit)
    mean_log = fit_laws(pairs.mean_log_var, fit)

    def law(values: np.ndarray) -> Estimate:
        return centered_percentile(values, pairs.n, unit="pilots", with_raw=True)

    def moved(values: np.ndarray, least: float = 0.0) -> Estimate:
        bounds = (least, np.inf)
        return centered_percentile(values, pairs.n, unit="pilots", bounds=bounds)

    return AuthorsSummary(
        lambda_log_mean=law(log_mean["lambda"]),
        alpha_log_mean=law(log_mean["alpha"]),
        lambda_mean_log=law(mean_log["lambda"]),
        alpha_mean_log=law(mean_log["alpha"]),
        mean_abs_z=moved(pairs.mean_abs_z[:, fit].mean(1)),
        mean_abs_m_over_v=moved(pairs.mean_abs_m_over_v[:, fit].mean(1)),
        kurtosis_late=moved(pairs.mean_abs_kurtosis[:, late].mean(1) - 3.0, -3.0),
    )


def authors_residual_statistics(
    X: np.ndarray,
    layers: PairLayers | None = None,
    n_boot: int = 100,
    seed: int = 0,
    progress: bool = True,
    device: Device = "cpu",
) -> AuthorsSummary:
    """Fig. B4 and Eq. 2 by the authors' protocol on layer outputs X `(N, T, D)`, t = 1..T (no embedding):
    `authors_summary` of `authors_pairs` over the sample and `n_boot` bootstrap resamples of the pilots
    (`resampling_weights`, seeded), each refitting the bases and their alignment. `layers`: the fitted and
    late pairs (None: fit over 1..T, late from max(T // 4, 1)). Computed on `device` (`authors_pairs`)."""
    N, T, _ = X.shape
    layers = layers or PairLayers(T, 1, T, max(T // 4, 1), T // 2)
    for name, value, lo, hi in (
        ("fit_first", layers.fit_first, 1, T - 1),
        ("fit_last", layers.fit_last, layers.fit_first + 1, T),
        ("late_from", layers.early_layers, 1, T - 1),
    ):
        if not lo <= value <= hi:
            raise ValueError(
                f"{name} = {value} must be in {lo}..{hi} for T = {T} layers"
            )
    if N < 4:
        raise ValueError(
            f"the bias-corrected kurtosis needs at least 4 pilots, got {N}"
        )
    weights = resampling_weights(N, n_boot, seed)
    pairs = authors_pairs(X, weights, progress, device=device)[0]
    return authors_summary(pairs, layers)


@dataclass(frozen=True)
class PaperProtocol:
    """The chapter's choices for the authors' protocol: `n_s_paper` pilots ("2.8D": the paper's ratio) drawn
    under the chapter's own count `cap`, `n_boot` resamples each refitting every basis, the `seed` of the
    pilots, resamples, cloud and floor, and the `device` the statistics run on."""

    n_s_paper: int | str
    n_boot: int
    seed: int
    cap: int | str | None
    device: Device = "cpu"


@dataclass
class AuthorsProtocol:
    """Eq. 2 and Fig. B4 by the authors' protocol on one ensemble: the paper's pilots (`n_s` of them,
    `authors_pilots`), `authors_ensembles` (`runs`) with their `AuthorsSummary` (by `ENSEMBLES` name), the
    Gaussian floor of the "~0" statistics at that size, and the sample's law at D pilots (`at_d`) and at every
    pilot read (`at_every_pilot`)."""

    n_s: int
    d_model: int
    runs: dict[str, AuthorsPairs]
    summaries: dict[str, AuthorsSummary]
    floor: GaussianFloor
    at_d: AuthorsSummary
    at_every_pilot: AuthorsSummary

    @classmethod
    def run(cls, ens, layers: PairLayers, protocol: PaperProtocol) -> AuthorsProtocol:
        """The protocol on `ens` (`ensemble.Ensemble`) over the pairs of `layers`, as `protocol` chooses."""
        p = protocol
        picked = ens.authors_pilots(p.n_s_paper, p.seed, cap=p.cap)
        runs = authors_ensembles(
            ens.X[picked], ens.lm.view, p.n_boot, p.seed, device=p.device
        )
        summaries = {k: authors_summary(r, layers) for k, r in runs.items()}
        every = authors_trajectories(ens.X)

        def sample_law(pilots: np.ndarray) -> AuthorsSummary:
            """The sample's law of the `pilots` (indices): the model's run's sample row when they are the
            picked ones (every pilot, where the corpus ran out before the paper's count), else computed."""
            if np.array_equal(pilots, picked):
                return authors_summary(runs["model"].sample(), layers)
            return authors_residual_statistics(
                every[pilots], layers, 0, device=p.device
            )

        floor = gaussian_floor(len(picked), ens.D, seed=p.seed)
        return cls(
            len(picked),
            ens.D,
            runs,
            summaries,
            floor,
            sample_law(ens.authors_pilots("D", p.seed, cap=p.cap)),
            sample_law(np.arange(ens.n_s)),
        )

    def law_table(self) -> pd.DataFrame:
        """The sample's alpha and lambda in both conventions (ln of the mean variance, mean of the ln
        variance) at D pilots, at the paper's ratio and at every pilot read, with N_s and N_s / D."""
        by_count = {
            "N_s = D": self.at_d,
            "paper's ratio": self.summaries["model"],
            "every pilot read": self.at_every_pilot,
        }
        return pd.DataFrame(
            [
                {
                    "pilots": label,
                    "N_s": s.alpha_log_mean.n,
                    "N_s / D": s.alpha_log_mean.n / self.d_model,
                    "α, ln(mean v)": s.alpha_log_mean.value,
                    "λ, ln(mean v)": s.lambda_log_mean.value,
                    "α, mean(ln v)": s.alpha_mean_log.value,
                    "λ, mean(ln v)": s.lambda_mean_log.value,
                }
                for label, s in by_count.items()
            ]
        ).set_index("pilots")

    def claim_values(self) -> dict[str, object]:
        """The values the chapter records: the pilot count, every ensemble's `AuthorsSummary` (Estimates), the
        Gaussian floors, the sample's law at D pilots and at every pilot read (point values), the cloud's
        lambda as a share of the model's and alpha at D pilots over alpha at the paper's count."""
        model, hf, cloud = (self.summaries[name] for name in ENSEMBLES)
        d, every = self.at_d, self.at_every_pilot
        return {
            "paper_n_s": self.n_s,
            "paper_lambda_log_mean": model.lambda_log_mean,
            "paper_alpha_log_mean": model.alpha_log_mean,
            "paper_lambda_mean_log": model.lambda_mean_log,
            "paper_alpha_mean_log": model.alpha_mean_log,
            "paper_mean_abs_z": model.mean_abs_z,
            "paper_mean_abs_m_over_v": model.mean_abs_m_over_v,
            "paper_kurtosis_late": model.kurtosis_late,
            "paper_lambda_log_mean_hf": hf.lambda_log_mean,
            "paper_alpha_log_mean_hf": hf.alpha_log_mean,
            "paper_lambda_mean_log_hf": hf.lambda_mean_log,
            "paper_alpha_mean_log_hf": hf.alpha_mean_log,
            "paper_mean_abs_z_hf": hf.mean_abs_z,
            "paper_mean_abs_m_over_v_hf": hf.mean_abs_m_over_v,
            "paper_kurtosis_late_hf": hf.kurtosis_late,
            "paper_lambda_log_mean_cloud": cloud.lambda_log_mean,
            "paper_alpha_log_mean_cloud": cloud.alpha_log_mean,
            "paper_lambda_mean_log_cloud": cloud.lambda_mean_log,
            "paper_alpha_mean_log_cloud": cloud.alpha_mean_log,
            "paper_mean_abs_z_cloud": cloud.mean_abs_z,
            "paper_mean_abs_m_over_v_cloud": cloud.mean_abs_m_over_v,
            "paper_kurtosis_late_cloud": cloud.kurtosis_late,
            "paper_mean_abs_z_gaussian": self.floor.mean_abs_z,
            "paper_kurtosis_gaussian": self.floor.kurtosis,
            "paper_lambda_log_mean_at_d": d.lambda_log_mean.value,
            "paper_alpha_log_mean_at_d": d.alpha_log_mean.value,
            "paper_lambda_mean_log_at_d": d.lambda_mean_log.value,
            "paper_alpha_mean_log_at_d": d.alpha_mean_log.value,
            "paper_mean_abs_z_at_d": d.mean_abs_z.value,
            "paper_mean_abs_m_over_v_at_d": d.mean_abs_m_over_v.value,
            "paper_kurtosis_late_at_d": d.kurtosis_late.value,
            "paper_lambda_log_mean_at_n_s": every.lambda_log_mean.value,
            "paper_alpha_log_mean_at_n_s": every.alpha_log_mean.value,
            "paper_lambda_mean_log_at_n_s": every.lambda_mean_log.value,
            "paper_alpha_mean_log_at_n_s": every.alpha_mean_log.value,
            "paper_mean_abs_z_at_n_s": every.mean_abs_z.value,
            "paper_mean_abs_m_over_v_at_n_s": every.mean_abs_m_over_v.value,
            "paper_kurtosis_late_at_n_s": every.kurtosis_late.value,
            "lambda_cloud_share": cloud.lambda_log_mean.value
            / model.lambda_log_mean.value,
            "alpha_count_ratio": d.alpha_log_mean.value / model.alpha_log_mean.value,
        }


def authors_heatmaps(ensembles: dict, layers: PairLayers, title: str) -> Figure:
    """B4: the paper's three panels (Fig. 4, `figA_llama2_7B.m`) for the sample of each `AuthorsPairs` of
    `ensembles` (name -> pairs, one row each): mean abs(μ/σ) over raw coordinates, log10 of the mean variance and
    mean abs(κ) − 3 (bias-corrected kurtosis) per pair (t, t + τ), on the paper's color scales where it gives them
    (0-0.5 and 0-0.8, arrows where values run past)."""
    panels = [
        ("mean_abs_z", "⟨|μ/σ|⟩", "viridis", (0.0, 0.5), lambda v: v),
        ("mean_var", "log10 ⟨σ²⟩", "magma", (None, None), np.log10),
        ("mean_abs_kurtosis", "⟨|κ|⟩ − 3", "viridis", (0.0, 0.8), lambda v: v - 3.0),
    ]
    fig, axes = plt.subplots(
        len(ensembles),
        len(panels),
        figsize=(5.2 * len(panels), 4.0 * len(ensembles)),
        squeeze=False,
    )
    for row, (name, pairs) in zip(axes, ensembles.items()):
        for ax, (attr, label, cmap, (lo, hi), show) in zip(row, panels):
            frame = pair_frame(show(getattr(pairs, attr)[0]), layers)
            sns.heatmap(
                frame,
                cmap=cmap,
                vmin=lo,
                vmax=hi,
                ax=ax,
                xticklabels=4,
                yticklabels=4,
                cbar_kws={"extend": "both" if lo is not None else "neither"},
            )
            ax.set(title=f"{label}, {name}")
            ax.grid(False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
