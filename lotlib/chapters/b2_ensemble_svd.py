"""Chapter B2's figures: the ensemble's spectra, the turning of its bases and the truncated next-token distributions."""

from __future__ import annotations

from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib import cm, colors
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from ..lines_of_thought.ensemble import Turning
from ..lines_of_thought.extrapolation import weighted_svd
from ..lines_of_thought.resampling import centered_estimates, resample_rows
from ..lines_of_thought.truncation import (
    Truncation,
    kl,
    next_token_logprobs,
    propagated_truncation,
    truncation_scores_of_bases,
)
from ..models.loading import Model
from ..models.view import ModelView
from ..stats import draw_pilots


def angle_maps(angles: np.ndarray, title: str) -> Figure:
    """B2: one L x L map per direction of the angles `(n, T, T)` (degrees) between layers t1 and t2."""
    T = angles.shape[1]
    fig, axes = plt.subplots(1, len(angles), figsize=(15, 3.8), constrained_layout=True)
    for i, ax in enumerate(axes):
        sns.heatmap(
            angles[i],
            vmin=0,
            vmax=90,
            cmap="magma",
            square=True,
            ax=ax,
            cbar=i == len(angles) - 1,
            cbar_kws={"label": "angle (degrees)"},
            xticklabels=max(1, T // 6),
            yticklabels=max(1, T // 6),
        )
        ax.invert_yaxis()
        ylabel = "layer t1" if i == 0 else None
        ax.set(title=f"u{i + 1}", xlabel="layer t2", ylabel=ylabel)
    fig.suptitle(title)
    return fig


def turning_table(turning) -> pd.DataFrame:
    """B2: the readings of a `Turning` (`ensemble.basis_turning`), one row per direction u_i, in degrees."""
    L = turning.angles.shape[1] - 1
    return pd.DataFrame(
        {
            f"largest rank, t = 1..{L}": turning.top,
            f"median angle t → t+1 (t = 1..{L - 1})": np.median(turning.step, axis=1),
            f"u_i({L // 2}) vs u_i({L})": turning.middle_to_last,
            "u_i(0) vs u_i(1) (embedding)": turning.embedding,
            f"u_i({L - 1}) vs u_i({L}) (last step)": turning.last_step,
        },
        index=[f"u{i + 1}" for i in range(len(turning.top))],
    ).round(1)


def spectra_figure(S: np.ndarray, title: str) -> Figure:
    """B2: the sorted singular values `(T, k)` of every layer on log-log axes, colored by layer."""
    T, k = S.shape
    index = np.arange(1, k + 1)
    spectra = pd.DataFrame(
        {
            "index i": np.tile(index, T),
            "singular value σ_i(t)": S.ravel(),
            "layer t": np.repeat(np.arange(T), k),
        }
    )
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(
        spectra,
        x="index i",
        y="singular value σ_i(t)",
        hue="layer t",
        palette="viridis",
        legend=False,
        lw=1,
        ax=ax,
    )
    ax.set(xscale="log", yscale="log", title=title)
    mappable = cm.ScalarMappable(norm=colors.Normalize(0, T - 1), cmap="viridis")
    fig.colorbar(mappable, ax=ax, label="layer t")
    return fig


PROTOCOL_LABELS = {
    "last layer": "last layer only",
    "every layer": "every layer, propagated",
}


def truncation_table(found: dict, random: dict, top: int = 5) -> pd.DataFrame:
    """B2: the authors' numbers per protocol (`found`: name -> `criteria` as `Estimate`s), for the
    random-directions null (`random`) and as the paper gives them for GPT-2 medium."""
    paper = {
        "kl_drop": "≈ 0.1",
        "kl_quarter_d": "≈ 0.5 nats",
        "overlap_quarter_d": "≈ 2.5 of 5",
        "k0_over_d": "0.25",
    }
    columns = {**found, "random directions (null)": random}
    table = pd.DataFrame(
        {
            **{n: {k: format(v) for k, v in c.items()} for n, c in columns.items()},
            "paper (GPT-2 medium)": paper,
        }
    )
    table.index = [
        "KL(D/4) / KL(1)",
        "KL at D/4 (nats)",
        f"top-{top} overlap at D/4",
        "K0 / D (KL down to a tenth)",
    ]
    return table


def truncation_bands(results: dict, d: int, model: str) -> Figure:
    """B2: mean KL(p_K || p) and top-`top` overlap against K (K = d left out) for each protocol of each
    `ResampledTruncation` of `results` (label -> result; a result shared by two labels is drawn
    once): the sample's curve with a 95% band from the repetitions that refit the basis (their percentile
    band moved onto the sample's curve, as the intervals are); the paper's K = d/4 and 2.5 of 5 marked."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    drawn = []
    for label, result in results.items():
        if any(result is seen for seen in drawn):
            continue
        drawn.append(result)
        for name, truncated in result.protocols.items():
            ks = np.array(truncated.ks[:-1])
            curve = np.stack([truncated.kl.mean(1), truncated.overlap.mean(1)])
            reps = result.curves[name]  # (n_rep, 2, len(ks))
            lo, hi = np.quantile(reps, [0.025, 0.975], axis=0) + curve - reps.mean(0)
            for i, ax in enumerate(axes):
                (line,) = ax.plot(
                    ks,
                    curve[i, :-1],
                    marker="o",
                    ms=3,
                    label=f"{PROTOCOL_LABELS[name]}, {label}",
                )
                ax.fill_between(
                    ks, lo[i, :-1], hi[i, :-1], color=line.get_color(), alpha=0.2
                )
    top = next(iter(results.values())).protocols["last layer"].top
    for ax, measure in zip(axes, ("KL(p_K ‖ p) (nats)", f"top-{top} shared with p")):
        ax.axvline(d // 4, color="grey", ls=":", label="K = D/4")
        ax.set(xscale="log", xlabel="K", ylabel=measure, title=f"{model}, D = {d}")
    axes[0].set_yscale("log")
    axes[1].axhline(2.5, color="k", ls="--", lw=1, label="paper: 2.5 of 5 at K = D/4")
    axes[1].legend(fontsize=8)
    return fig


@torch.inference_mode()
def consecutive_kl(
    view: ModelView, x: np.ndarray, batch_size: int = 256, progress: bool = True
) -> np.ndarray:
    """KL(p_{i+1} || p_i) between the true distributions of consecutive pseudo-sentences, `(n - 1,)`."""
    out = np.empty(len(x) - 1)
    for start in tqdm(
        range(0, len(x) - 1, batch_size), desc="consecutive KL", disable=not progress
    ):
        rows = torch.as_tensor(
            x[start : start + batch_size + 1], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        out[start : start + len(logp) - 1] = kl(logp[1:], logp[:-1]).cpu().numpy()
    return out


PAPER_DROP = 0.1  # the authors' criterion: the mean KL falls to about a tenth of its value at K = 1

# the two readings of the truncation (the paper leaves the choice open): `truncation_scores` and
# `propagated_truncation`
PROTOCOLS = ("last layer", "every layer")

RANDOM = "random directions"


@dataclass(frozen=True)
class TruncationStudy:
    """How B2 truncates: the grid `ks` (increasing, with 1 and D/4), the `top` next tokens compared, `n_rep`
    repetitions that refit the bases, the pilots each protocol scores per sample (`n_truncated` for the last
    layer, None: all; `n_propagated` for every layer, fewer than 2: left out) and the `seed` of the scored
    pilots, the random directions and the repetitions."""

    ks: list[int]
    n_rep: int
    n_truncated: int | None = None
    n_propagated: int = 128
    top: int = 5
    seed: int = 0


@dataclass(frozen=True)
class ScoredPilots:
    """The pilots each protocol of B2 scores, as indices into the sample: `last` (the last-layer protocol)
    and `every` (the every-layer protocol; left out with fewer than 2)."""

    last: np.ndarray
    every: np.ndarray


# each criterion's summary key per protocol, on the book's N_s and on the paper's (`ResampledTruncation.summary`)
CRITERION_KEYS = {
    ("last layer", "kl_drop"): ("kl_drop_last_layer", "kl_drop_last_layer_paper_ns"),
    ("last layer", "kl_quarter_d"): (
        "kl_quarter_d_last_layer",
        "kl_quarter_d_last_layer_paper_ns",
    ),
    ("last layer", "overlap_quarter_d"): (
        "overlap_quarter_d_last_layer",
        "overlap_quarter_d_last_layer_paper_ns",
    ),
    ("last layer", "k0_over_d"): (
        "k0_over_d_last_layer",
        "k0_over_d_last_layer_paper_ns",
    ),
    ("every layer", "kl_drop"): ("kl_drop_every_layer", "kl_drop_every_layer_paper_ns"),
    ("every layer", "kl_quarter_d"): (
        "kl_quarter_d_every_layer",
        "kl_quarter_d_every_layer_paper_ns",
    ),
    ("every layer", "overlap_quarter_d"): (
        "overlap_quarter_d_every_layer",
        "overlap_quarter_d_every_layer_paper_ns",
    ),
    ("every layer", "k0_over_d"): (
        "k0_over_d_every_layer",
        "k0_over_d_every_layer_paper_ns",
    ),
    (RANDOM, "kl_drop"): (
        "kl_drop_random_directions",
        "kl_drop_random_directions_paper_ns",
    ),
    (RANDOM, "kl_quarter_d"): (
        "kl_quarter_d_random_directions",
        "kl_quarter_d_random_directions_paper_ns",
    ),
    (RANDOM, "overlap_quarter_d"): (
        "overlap_quarter_d_random_directions",
        "overlap_quarter_d_random_directions_paper_ns",
    ),
}

# each protocol's mean curve's summary key, on the book's N_s and on the paper's
CURVE_KEYS = {
    ("last layer", "kl"): ("kl_last_layer_mean", "kl_last_layer_mean_paper_ns"),
    ("last layer", "overlap"): (
        "overlap_last_layer_mean",
        "overlap_last_layer_mean_paper_ns",
    ),
    ("every layer", "kl"): ("kl_every_layer_mean", "kl_every_layer_mean_paper_ns"),
    ("every layer", "overlap"): (
        "overlap_every_layer_mean",
        "overlap_every_layer_mean_paper_ns",
    ),
}


@dataclass
class ResampledTruncation:
    """B2's truncation on `n_s` pilots: `protocols` (name -> `Truncation` of the sample, `truncation_protocols`),
    `found` (name -> `criteria` as `Estimate`s, the random-directions null under `RANDOM`) and `curves`
    (name -> `(n_rep, 2, len(ks))`: each repetition's mean KL and mean overlap per K)."""

    n_s: int
    protocols: dict[str, Truncation]
    found: dict[str, dict]
    curves: dict[str, np.ndarray]

    def scored(self, name: str) -> int:
        """How many pilots protocol `name` scores on the sample (0 when it was not run)."""
        result = self.protocols.get(name)
        return 0 if result is None else result.kl.shape[1]

    def summary(self, paper: bool = False) -> dict:
        """Mean KL and overlap per K of each protocol (None for a protocol not run) and every criterion of
        every protocol run, under `CURVE_KEYS` and `CRITERION_KEYS`: the book's N_s keys, or with `paper`
        the paper's N_s keys."""
        out = {}
        for (name, score), keys in CURVE_KEYS.items():
            result = self.protocols.get(name)
            out[keys[paper]] = (
                None if result is None else getattr(result, score).mean(1)
            )
        for (name, criterion), keys in CRITERION_KEYS.items():
            if criterion in self.found.get(name, {}):
                out[keys[paper]] = self.found[name][criterion]
        return out


def random_orthonormal(d: int, seed: int = 0) -> np.ndarray:
    """`d` random orthonormal directions `(d, d)` (QR of a standard normal matrix): the null basis of B2."""
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))[0]


def truncation_protocols(
    model: Model,
    ids: np.ndarray,
    x_last: np.ndarray,
    bases: np.ndarray,
    scored: ScoredPilots,
    study: TruncationStudy,
    directions: np.ndarray | None = None,
) -> dict[str, Truncation]:
    """Both protocols of B2 on the grid `study.ks`: "last layer" (`truncation_scores` of the pilots
    `scored.last`, states `x_last` `(N, D)` on the basis `bases[-1]`) and "every layer"
    (`propagated_truncation` of the pseudo-sentences `ids[scored.every]` `(n, T)` with `bases` `(L+1, D, k)`;
    left out with fewer than 2 pilots); with `directions` `(D, D)`, the random-directions null under `RANDOM`
    (the last-layer protocol on them at K = 1 and D/4, reading p with "last layer": `truncation_scores_of_bases`)."""
    ks, top, D = study.ks, study.top, x_last.shape[1]
    grids = [(bases[-1], ks)]
    if directions is not None:
        grids.append((directions, [1, D // 4]))
    last = truncation_scores_of_bases(
        model.view, x_last[scored.last], grids, top=top, progress=False
    )
    out = {"last layer": last[0]}
    if len(scored.every) > 1:
        out["every layer"] = propagated_truncation(
            model, ids[scored.every], bases, ks, top=top, progress=False
        )
    if directions is not None:
        out[RANDOM] = last[1]
    return out


def criteria(
    result: Truncation, d: int, weights: np.ndarray | None = None, k0: bool = True
) -> dict[str, float]:
    """The authors' numbers from per-pilot scores, with pilot j of `result` counted `weights[j]` times
    (None: once): `kl_drop` KL(d/4) / KL(1) (means over pilots), `kl_quarter_d` and `overlap_quarter_d`
    (means at K = d/4) and, with `k0`, `k0_over_d`: the smallest K of the grid whose mean KL is at most
    `PAPER_DROP` x the mean KL at K = 1, over d. Needs K = 1 and d/4 in the grid."""
    w = np.ones(result.kl.shape[1]) if weights is None else np.asarray(weights, float)
    kl_mean, overlap_mean = result.kl @ w / w.sum(), result.overlap @ w / w.sum()
    one, quarter = result.ks.index(1), result.ks.index(d // 4)
    out = {
        "kl_drop": kl_mean[quarter] / kl_mean[one],
        "kl_quarter_d": kl_mean[quarter],
        "overlap_quarter_d": overlap_mean[quarter],
    }
    if k0:
        passed = np.argmax(kl_mean <= PAPER_DROP * kl_mean[one])
        out["k0_over_d"] = result.ks[int(passed)] / d
    return out


def resampled_truncation(
    model: Model,
    ids: np.ndarray,
    X: np.ndarray,
    scored: ScoredPilots,
    study: TruncationStudy,
) -> ResampledTruncation:
    """B2's truncation by the paper's protocol, the basis fit on the very pilots it truncates, with intervals
    that refit it.

    X `(N, L+1, D)`, ids `(N, T)`: the pilots. The sample: the uncentered per-layer bases of all N pilots
    (`weighted_svd`, sorted by decreasing singular value), both protocols (`truncation_protocols`: the last
    layer on `scored.last`, every layer on `scored.every`) and the random-directions null (the last-layer
    protocol of `scored.last` on D random orthonormal directions, seeded, K = 1 and D/4). Each of the
    `study.n_rep` repetitions (`resampling.resample_rows`, kept for a resumed run) draws N pilots with
    replacement, **refits the bases on the draw**, draws new random directions, and rescores the draw's
    pilots in the positions `scored` (as many as the sample scores; each distinct pilot once, weighted by
    its count). Criteria (`criteria`): the sample's values, percentile intervals over the repetitions
    re-centered on them (`extrapolation.centered_percentile`; K0's interval, moved like the others, need not
    fall on the grid, and stops at 1)."""

    N, D = len(X), X.shape[2]
    layers = X if len(scored.every) > 1 else X[:, -1:]

    def run(
        pilots: np.ndarray, rng: np.random.Generator
    ) -> dict[str, tuple[Truncation, np.ndarray]]:
        distinct, rows = np.unique(pilots, return_inverse=True)
        bases = weighted_svd(layers[distinct], np.bincount(rows))[0]
        (last, n_last), (every, n_every) = (
            np.unique(pilots[s], return_counts=True)
            for s in (scored.last, scored.every)
        )
        directions = random_orthonormal(D, int(rng.integers(2**31)))
        found = truncation_protocols(
            model, ids, X[:, -1], bases, ScoredPilots(last, every), study, directions
        )
        weights = {"last layer": n_last, "every layer": n_every, RANDOM: n_last}
        return {name: (result, weights[name]) for name, result in found.items()}

    runs = resample_rows(
        run,
        N,
        n_rep=study.n_rep,
        seed=study.seed,
        desc="truncation resamples (bases refit)",
    )
    return ResampledTruncation(
        N,
        {name: runs[0][name][0] for name in PROTOCOLS if name in runs[0]},
        _grouped_criteria(runs, N, D),
        {
            name: np.array(
                [
                    np.stack([r.kl @ w, r.overlap @ w]) / w.sum()
                    for r, w in (one[name] for one in runs[1:])
                ]
            )
            for name in runs[0]
        },
    )


def _grouped_criteria(runs: list[dict], N: int, D: int) -> dict[str, dict]:
    """The criteria of the sample (`runs[0]`) with their intervals over the repetitions, by protocol and
    criterion (`resampled_truncation`)."""
    values = [
        {
            f"{key}|{name}": value
            for name, (result, w) in one.items()
            for key, value in criteria(result, D, w, k0=name != RANDOM).items()
        }
        for one in runs
    ]
    found = centered_estimates(
        values, N, unit="pilots (bases refit)", bounds=(0.0, np.inf)
    )
    grouped: dict[str, dict] = {}
    for key, estimate in found.items():
        criterion, name = key.split("|")
        if criterion == "k0_over_d":  # a share of D: at most 1
            estimate = replace(estimate, hi=min(estimate.hi, 1.0))
        grouped.setdefault(name, {})[criterion] = estimate
    return grouped


def truncation_at_sizes(
    model: Model,
    ids: np.ndarray,
    X: np.ndarray,
    samples: dict[str, np.ndarray],
    study: TruncationStudy,
) -> dict[str, ResampledTruncation]:
    """`resampled_truncation` of each sample of pilots (label -> sorted indices into X `(N, L+1, D)` and ids
    `(N, T)`: the book's N_s, the paper's 2.8 D), its bases fit on that sample alone, scoring
    `study.n_truncated` (None: all) and `study.n_propagated` of its pilots (`stats.draw_pilots`, one generator
    seeded by `study.seed`). A sample equal to one already run shares its result."""

    out: dict[str, ResampledTruncation] = {}
    for label, pilots in samples.items():
        same = [r for lab, r in out.items() if np.array_equal(samples[lab], pilots)]
        if same:
            out[label] = same[0]
            continue
        sizes = [study.n_truncated or len(pilots), study.n_propagated]
        rng = np.random.default_rng(study.seed)
        last, every = (draw_pilots(len(pilots), size, rng) for size in sizes)
        out[label] = resampled_truncation(
            model, ids[pilots], X[pilots], ScoredPilots(last, every), study
        )
    return out


def turning_summary(turning: Turning) -> dict:
    """B2's summary of a `Turning` of at least 4 directions: median consecutive angles of u_1..u_4, u_1 and
    u_2 from the middle to the last layer, u_1's last step, and the largest rank of u_1..u_4."""
    medians = np.median(turning.step, axis=1)
    return {
        "median_consecutive_angle_u1": medians[0],
        "median_consecutive_angle_u2": medians[1],
        "median_consecutive_angle_u3": medians[2],
        "median_consecutive_angle_u4": medians[3],
        "angle_u1_middle_to_last": turning.middle_to_last[0],
        "angle_u2_middle_to_last": turning.middle_to_last[1],
        "angle_u1_last_step": turning.last_step[0],
        "max_rank_u1_to_u4": turning.top[:4].max(),
    }


def spectrum_slopes(S: np.ndarray, first: int = 10) -> np.ndarray:
    """Per layer, the slope of log sigma_i against log i over i = `first`..k/2 (a least-squares line):
    S `(T, k)` sorted decreasing -> `(T,)`."""
    index = np.arange(1, S.shape[1] + 1)
    mid = (index >= first) & (index <= S.shape[1] // 2)
    return np.array([np.polyfit(np.log(index[mid]), np.log(s[mid]), 1)[0] for s in S])


def claim_values(
    sizes: dict,
    turning: Turning,
    S: np.ndarray,
    runs: dict[str, ResampledTruncation],
    study: TruncationStudy,
    baseline: float,
) -> dict[str, object]:
    """B2's recorded values: the ensemble's `sizes`, the study's settings, `turning_summary`, the last
    layer's spectrum (S `(L+1, k)`, sorted), both samples' truncations (`runs`: the book's N_s, then the
    paper's; `ResampledTruncation.summary`) and the median KL between consecutive pseudo-sentences
    (`baseline`, nats) with the last-layer mean KL at K = 1 over it."""
    book, paper = runs.values()
    L = len(S) - 1
    slopes, gap = spectrum_slopes(S), S[:, 0] / S[:, 1]
    kl_k1 = book.protocols["last layer"].kl[0].mean()
    return {
        **sizes,
        "n_s_paper": paper.n_s,
        "n_rep": study.n_rep,
        "n_truncated": book.scored("last layer"),
        "n_propagated": book.scored("every layer"),
        "ks": study.ks,
        "top": study.top,
        **turning_summary(turning),
        "sigma1_over_sigma2_last": gap[L],
        "spectrum_slope_middle": slopes[L // 2],
        "spectrum_slope_last": slopes[L],
        **book.summary(),
        **paper.summary(paper=True),
        "kl_baseline_median": baseline,
        "kl_k1_over_baseline": kl_k1 / baseline,
    }
