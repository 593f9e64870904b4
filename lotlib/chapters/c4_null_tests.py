"""Chapter C4's study: the null tests of the Lines of Thought (gibberish, re-initialised weights, path shapes, separability)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from tqdm.auto import tqdm

from .. import plots
from ..lines_of_thought.authors_protocol import weighted_bases
from ..lines_of_thought.ensemble import align_bases, ensemble_svd
from ..lines_of_thought.null_tests import (
    PathShapes,
    layer_separability,
    relative_steps,
    step_coherence,
    step_cosines,
    straightness,
)
from ..lines_of_thought.residuals import (
    fit_laws,
    fit_variance,
    pair_mask,
    pair_statistics,
    singular_coordinates,
    unbiased_excess_kurtosis,
)
from ..models.bounds import pilot_count
from ..models.corpus import walden
from ..models.loading import load_model
from ..models.trajectories import trajectories
from ..stats import (
    Estimate,
    centered_percentile,
    draw_pilots,
    over_seeds,
    resampled_estimate,
    resampling_weights,
    side_word,
)
from ..stats.backend import Device
from ..storage.checkpoints import resumable


def stalling(X: np.ndarray, split: int, first: int = 1) -> dict:
    """Do paths stall after layer `split`? Steps x(t) -> x(t+1) with first <= t < split are "before", with
    t >= split "after" (cosines: both steps on the same side). Returns the median relative step length before
    and after and their ratio (`step_ratio`, 1 = no change, near 0 = stalled), and the mean cosine between
    consecutive steps before and after (NaN for a side with a single step)."""
    # cosines[:, t - 1] pairs steps t-1 and t
    steps, cosines = (
        relative_steps(X),
        step_cosines(X),
    )
    before, after = np.median(steps[:, first:split]), np.median(steps[:, split:])
    # empty when a side has one step
    cos_before, cos_after = (
        cosines[:, first : split - 1],
        cosines[:, split:],
    )
    return {
        "step_before": float(before),
        "step_after": float(after),
        "step_ratio": float(after / before),
        "cos_before": float(cos_before.mean()) if cos_before.size else np.nan,
        "cos_after": float(cos_after.mean()) if cos_after.size else np.nan,
    }


@dataclass
class Separability:
    """Test accuracy of the classifier at every layer per pair of ensembles, by name: on the sample's own
    splits (`accuracy`, `(n_splits, T)`) and on the bootstrap repetitions (`resampled`, `(n_boot, T)`: each
    draws the pseudo-sentences of each class with replacement, splits them and refits, `split_rows`; pairs of
    the same sizes share the draw of each repetition), with the number of pseudo-sentences of each pair
    (`n`)."""

    accuracy: dict[str, np.ndarray]
    resampled: dict[str, np.ndarray]
    n: dict[str, int]

    def table(self) -> pd.DataFrame:
        """One row per pair, split of the sample and layer."""
        return pd.DataFrame(
            [
                {"layer t": t, "test accuracy": a, "pilots": name, "split": i}
                for name, acc in self.accuracy.items()
                for i, row in enumerate(acc)
                for t, a in enumerate(row)
            ]
        )

    def estimate(self, statistic: Callable[..., np.ndarray], *names: str) -> Estimate:
        """`statistic` of the accuracies of the pairs `names` (each `(rows, T)` -> `(rows,)`): the mean of its
        values on the sample's splits, and the percentile interval of its values on the bootstrap repetitions,
        computed repetition by repetition (the same rows for pairs of the same sizes, independent draws
        otherwise), re-centered on the value (`extrapolation.centered_percentile`): a repetition tests on about
        63% distinct pseudo-sentences, each layer's accuracy is noisier and its minimum over layers lower, so
        the repetitions are shifted as a whole; their spread is kept, their shift is not."""

        value = statistic(*(self.accuracy[name] for name in names)).mean()
        draws = statistic(*(self.resampled[name] for name in names))
        n = min(self.n[name] for name in names)
        return centered_percentile(np.r_[value, draws], n, unit="pseudo-sentences")

    def min_over_blocks(self) -> dict[str, Estimate]:
        """The minimum over the block outputs t = 1..L per pair (`estimate`)."""
        return {name: self.estimate(_lowest_block, name) for name in self.accuracy}

    def summary(self) -> dict:
        """Under the chapter's summary keys, for the pairs in the order finding, control, untrained model: the
        minimum over blocks of each, the untrained model's minus the finding's (`gap`), the finding's accuracy at
        the embedding and its mean accuracy by layer over the sample's splits."""
        finding, _, untrained = self.accuracy
        keys = (
            "separability_min",
            "separability_control_min",
            "untrained_separability_min",
        )
        return {
            **dict(zip(keys, self.min_over_blocks().values())),
            "untrained_separability_gap": self.gap(untrained, finding),
            "separability_embedding": self.at_embedding(finding),
            "separability_by_layer": self.accuracy[finding].mean(0),
        }

    def gap(self, first: str, second: str) -> Estimate:
        """The minimum over blocks t = 1..L of pair `first` minus that of pair `second`, split by split and
        repetition by repetition (`estimate`)."""
        return self.estimate(
            lambda a, b: _lowest_block(a) - _lowest_block(b), first, second
        )

    def at_embedding(self, name: str) -> Estimate:
        """The accuracy at t = 0 (the input embedding) (`estimate`)."""
        return self.estimate(lambda a: a[:, 0], name)


def _lowest_block(accuracy: np.ndarray) -> np.ndarray:
    """The minimum over the block outputs t = 1..L of accuracies `(rows, T)`: `(rows,)`."""
    return accuracy[:, 1:].min(1)


def gibberish_pairs(
    lm, untrained, language, noise, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The ensembles `(n, L+1, D)` of the separability test, by name: Walden vs gibberish through `lm`, two seeded
    random halves of Walden (the control) and Walden vs gibberish through the `untrained` model."""

    X_lang = trajectories(lm, language)
    order, half = (
        np.random.default_rng(seed).permutation(language.n_s),
        language.n_s // 2,
    )
    return {
        "Walden vs gibberish": (X_lang, trajectories(lm, noise)),
        "Walden vs Walden (two halves)": (
            X_lang[order[:half]],
            X_lang[order[half : 2 * half]],
        ),
        "untrained model: Walden vs gibberish": (
            trajectories(untrained, language),
            trajectories(untrained, noise),
        ),
    }


def separability_by_split(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]],
    splits,
    train_fraction: float = 0.7,
    classifier: str = "perceptron",
    n_boot: int = 0,
    seed: int = 0,
    progress: bool = True,
) -> Separability:
    """`layer_separability` of each pair of ensembles `(n_a, T, D)`, `(n_b, T, D)` for each split seed in
    `splits` (the sample's own splits) and on `n_boot` bootstrap repetitions (repetition r: seed + r, each
    class resampled, split and refitted; pairs of the same sizes get the same rows)."""
    jobs = [(s, False) for s in splits] + [(seed + r, True) for r in range(n_boot)]
    bar = tqdm(
        total=len(pairs) * len(jobs),
        desc="separability (splits, then bootstrap repetitions)",
        unit="fit",
        disable=not progress,
    )
    # fits kept for a resumed run
    rows, steps, step = (
        {},
        resumable("separability"),
        itertools.count(),
    )
    for name, (A, B) in pairs.items():
        rows[name] = np.empty((len(jobs), A.shape[1]))
        for i, (s, resample) in enumerate(jobs):
            rows[name][i] = steps(
                next(step),
                partial(
                    layer_separability,
                    A,
                    B,
                    train_fraction,
                    s,
                    classifier,
                    False,
                    resample,
                ),
            )
            bar.update()
    bar.close()
    return Separability(
        {name: acc[: len(splits)] for name, acc in rows.items()},
        {name: acc[len(splits) :] for name, acc in rows.items()},
        {name: len(A) + len(B) for name, (A, B) in pairs.items()},
    )


def last_layer_view(X: np.ndarray, pilots: np.ndarray) -> np.ndarray:
    """The states t = 1..L of the `pilots` (indices) on u1..u3 of the ensemble's last layer (uncentered SVD of
    all pilots): X `(N, L+1, D)` -> `(n_pilots, L, 3)`."""
    U, _ = ensemble_svd(X[:, -1:, :])
    return X[pilots][:, 1:].astype(np.float64) @ U[0][:, :3]


def path_shapes(
    models: dict[str, np.ndarray], pilots: np.ndarray, weights: np.ndarray
) -> PathShapes:
    """`PathShapes` of each model's trajectories `(N, L+1, D)`, bootstrapped with `weights` `(1 + n_boot, N)`."""
    N = len(weights[0])
    straight = {name: straightness(X[:, 1:]) for name, X in models.items()}
    coherence = {name: step_coherence(X, weights)[:, 1:] for name, X in models.items()}
    return PathShapes(
        straight,
        {name: straightness(last_layer_view(X, pilots)) for name, X in models.items()},
        coherence,
        {
            name: resampled_estimate(weights @ s / N, N, unit="pilots")
            for name, s in straight.items()
        },
        {
            name: resampled_estimate(c.mean(1), N, unit="pilots")
            for name, c in coherence.items()
        },
    )


def refitted_pairs(
    X: np.ndarray, weights: np.ndarray, progress: bool = True, device: Device = "cpu"
) -> dict[str, np.ndarray]:
    """Chapter B4's residual moments of trajectories X `(N, L+1, D)` for every pair 1 <= t < t + tau <= L on each
    row of `weights` `(B, N)` (how many times each pilot is drawn; row 0 all ones: the sample), each row
    refitting every fitted step on its own draw: the uncentered SVD per layer of the drawn pilots with their
    repeats (`authors_protocol.weighted_bases`, k = min(distinct pilots, D)) and their alignment, on the
    block outputs x(1)..x(L) (the pairs' layers: the same pairs of columns as aligned from layer 0), then Eq. 1
    and the moments over the drawn pilots, each distinct one weighted by its count (`pair_statistics`). Returns `trace` (tr Cov w) and `kurtosis`
    (the coordinates' bias-corrected excess kurtosis weighted by their variance, as `residuals.resampled_pairs`) `(B, T, T)`
    indexed [t, t + tau], `spread` (tr Cov x(t)) `(B, T)` and `k` `(B,)`. Bases and moments run on `device`."""

    blocks = X[:, 1:]  # the pairs' layers; x(0) repeats tokens (a rank-deficient layer)

    def moments(w: np.ndarray) -> dict[str, np.ndarray | int]:
        drawn = np.flatnonzero(w)
        counts = w[drawn].astype(int)
        layers_first = np.ascontiguousarray(
            blocks[drawn].transpose(1, 0, 2), np.float32
        )
        U, S = align_bases(*weighted_bases(layers_first, counts, device))
        Y = singular_coordinates(blocks[drawn], U, device)
        share = counts / counts.sum()  # each drawn pilot's weight in the draw
        centered = X[drawn].astype(np.float64)
        centered -= np.einsum("n,ntd->td", share, centered)
        stats = pair_statistics(Y, S, np.arange(len(U)), counts=counts, device=device)
        var = np.pad(stats.var, ((1, 0), (1, 0), (0, 0)), constant_values=np.nan)
        kurtosis = np.pad(
            unbiased_excess_kurtosis(stats.kurtosis, counts.sum()),
            ((1, 0), (1, 0), (0, 0)),
            constant_values=np.nan,
        )
        return {
            "trace": var.sum(-1),
            "kurtosis": (var * kurtosis).sum(-1) / var.sum(-1),
            "spread": np.einsum("n,ntd,ntd->t", share, centered, centered),
            "k": U.shape[-1],
        }

    desc = "residuals (bases refitted per resample)"
    steps = resumable(desc)  # each resample kept for a resumed run
    rows = [
        steps(i, partial(moments, w))
        for i, w in enumerate(
            tqdm(weights, desc=desc, unit="resample", disable=not progress)
        )
    ]
    return {name: np.array([row[name] for row in rows]) for name in rows[0]}


def residual_law(
    X: np.ndarray, weights: np.ndarray, n_boot_refit: int = 0, device: Device = "cpu"
) -> dict:
    """Chapter B4's residual statistics of trajectories X `(N, L+1, D)` over all pairs 1 <= t < t + tau <= L on
    the sample and the first `n_boot_refit` resamples of `weights` `(1 + n_boot, N)`, each refitting the bases
    (`refitted_pairs`): ln(mean variance) and ln(relative variance) of the sample `(T, T)`, the fit of Eq. 2 to
    the first (`fit_variance`, a point value), the arrival R^2 of the relative variance on every row
    `(1 + n_boot_refit,)` and as an `Estimate`, and the variance-weighted excess kurtosis (median over pairs).
    The refits run on `device`."""

    N, T = weights.shape[1], X.shape[1]
    all_pairs = pair_mask(T, 1, T - 1)
    rows = refitted_pairs(X, weights[: 1 + n_boot_refit], device=device)
    log_var = np.log(rows["trace"][0] / rows["k"][0])
    log_rel = np.log(rows["trace"] / rows["spread"][:, None, :])
    arrival = fit_laws(log_rel, all_pairs)["arrival_r2"]
    return {
        "log_var": log_var,
        "log_rel": log_rel[0],
        "fit": fit_variance(log_var, all_pairs),
        "arrival_r2_rows": arrival,
        "kurtosis": resampled_estimate(
            np.median(rows["kurtosis"][:, all_pairs], axis=1), N, unit="pilots"
        ),
        "relative_arrival_r2": resampled_estimate(arrival, N, unit="pilots"),
    }


def arrival_r2_gap(first: dict, second: dict) -> Estimate:
    """The relative variance's arrival R^2 of `residual_law` `first` minus `second`'s, row by row of their
    bootstrap weights (the same resamples when both were given the same weights; independent ones otherwise)."""
    n = min(first["relative_arrival_r2"].n, second["relative_arrival_r2"].n)
    return resampled_estimate(
        first["arrival_r2_rows"] - second["arrival_r2_rows"], n, unit="pilots"
    )


def compare_noise_laws(
    models: dict[str, np.ndarray],
    weights: np.ndarray,
    n_boot_refit: int,
    device: Device = "cpu",
) -> tuple[dict[str, dict], Estimate]:
    """`residual_law` of each model's trajectories `(N, L+1, D)` on the same `weights` and the same first
    `n_boot_refit` resamples. Returns the dict per model and the arrival R^2 of the first model minus the
    second's (`arrival_r2_gap`: the same resamples, so the difference is paired when the models read the same
    pilots). The refits run on `device`."""
    law = {
        name: residual_law(X, weights, n_boot_refit, device)
        for name, X in models.items()
    }
    first, second = (law[name] for name in list(models)[:2])
    return law, arrival_r2_gap(first, second)


def noise_law_summary(law: dict[str, dict]) -> dict:
    """`compare_noise_laws`'s per-model dict under the chapter's summary keys: kurtosis, the fit's alpha, lambda and
    arrival R^2, and the relative variance's arrival R^2, each prefixed by the model's name."""
    return {
        **{f"{name}_kurtosis": entry["kurtosis"] for name, entry in law.items()},
        **{
            f"{name}_{key}": entry["fit"][key]
            for name, entry in law.items()
            for key in ("alpha", "lambda", "arrival_r2")
        },
        **{
            f"{name}_relative_arrival_r2": entry["relative_arrival_r2"]
            for name, entry in law.items()
        },
    }


def range_word(estimate: Estimate, lo: float, hi: float) -> str:
    """ "below", "within" or "above" [lo, hi] when the whole interval of `estimate` is, "straddling" otherwise."""
    if estimate.hi < lo:
        return "below"
    if estimate.lo > hi:
        return "above"
    return "within" if lo <= estimate.lo and estimate.hi <= hi else "straddling"


PAPER_ARCH = "_paper_arch"


PAPER_KURTOSIS = (1.0, 1.5)


@dataclass
class ArchitectureNull:
    """The untrained-model null controls measured on the untrained model of another architecture (the paper's
    GPT-2 medium) on Walden cut by its own tokenizer: its `name`, shape and number of pilots `n_s`, the drawn
    pilots on u1..u3 of its last layer (`view`, `(n_pilots, L, 3)`), `PathShapes`, `residual_law` and the book's
    trained model's relative arrival R^2 minus this model's (`arrival_r2_gap`). Fields are None when skipped."""

    name: str
    n_layers: int | None = None
    d_model: int | None = None
    n_s: int | None = None
    view: np.ndarray | None = None
    shapes: PathShapes | None = None
    law: dict | None = None
    arrival_r2_gap: Estimate | None = None

    KEYS = (
        "n_layers",
        "d_model",
        "n_s",
        "untrained_straightness",
        "untrained_straightness_3d",
        "untrained_step_coherence",
        "straightness_random_walk",
        "coherence_independent",
        "untrained_kurtosis",
        "untrained_alpha",
        "untrained_lambda",
        "untrained_arrival_r2",
        "untrained_relative_arrival_r2",
        "untrained_arrival_r2_gap",
    )

    def summary(self, skipped: object = None) -> dict:
        """The values under the chapter's keys of the book's untrained model plus `PAPER_ARCH`; `skipped` for
        each when skipped."""
        if self.law is None:
            return {f"{key}{PAPER_ARCH}": skipped for key in self.KEYS}
        values = {
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_s": self.n_s,
            **self.shapes.summary(),
            **noise_law_summary({"untrained": self.law}),
            "untrained_arrival_r2_gap": self.arrival_r2_gap,
        }
        return {f"{key}{PAPER_ARCH}": values[key] for key in self.KEYS}

    def words(self, skipped: str = "not measured") -> dict[str, str]:
        """Words for the prose, from the run: the straightness against a random walk's, the step coherence against
        independent directions', the kurtosis against the paper's `PAPER_KURTOSIS`, and whether the arrival layer
        explains "less", "about as much" or "more" of the relative variance than in the book's trained model;
        `skipped` for each when skipped."""
        keys = ("straight", "parallel", "kurtosis", "arrival")
        if self.law is None:
            return {f"paper_{key}_word": skipped for key in keys}
        s = {key.removesuffix(PAPER_ARCH): v for key, v in self.summary().items()}
        words = (
            side_word(
                s["untrained_straightness"], than=s["straightness_random_walk"].value
            ),
            side_word(
                s["untrained_step_coherence"], than=s["coherence_independent"].value
            ),
            range_word(s["untrained_kurtosis"], *PAPER_KURTOSIS),
            side_word(s["untrained_arrival_r2_gap"], ("more", "about as much", "less")),
        )
        return {f"paper_{key}_word": word for key, word in zip(keys, words)}

    def views(self, seed: int) -> dict[str, np.ndarray]:
        """{title: view} for `figures`-style side-by-side paths; empty when skipped."""
        if self.view is None:
            return {}
        title = f"untrained {self.name} (seed {seed}), L = {self.n_layers}, D = {self.d_model}"
        return {title: self.view}


def architecture_null(
    architecture: str,
    trained_law: dict,
    n_k: int,
    n_s,
    n_pilots: int,
    n_boot: int,
    seed: int = 0,
    device: str = "auto",
    dtype: str = "float32",
) -> ArchitectureNull:
    """The untrained-model null controls on `untrained:<architecture>` (seeded with `seed`; "" skips): the first
    `n_s` pseudo-sentences of `n_k` tokens of Walden in its own tokenizer (`pilot_count` rules on its width),
    `n_pilots` drawn pilots, path shapes bootstrapped over its pilots (`n_boot` resamples, seeded `seed`) and
    `residual_law` on as many of those resamples as `trained_law` has (the book's trained model's, its resamples
    seeded `seed`), each refitting the bases, and the arrival R^2 gap of `trained_law` minus this model's: the
    same resamples when both have as many pilots, independent ones otherwise."""

    if not architecture:
        return ArchitectureNull(name="")
    lm = load_model(architecture, untrained=True, seed=seed, device=device, dtype=dtype)
    L, D = lm.view.n_layers, lm.view.d_model
    corpus = walden(lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, D, "n_s_paper"))
    X = trajectories(lm, corpus)  # (N, L+1, D)
    where = lm.device
    del lm
    n_refit = len(trained_law["arrival_r2_rows"]) - 1
    pilots = draw_pilots(len(X), n_pilots, np.random.default_rng(seed))
    weights = resampling_weights(len(X), max(n_boot, n_refit), seed)
    law = residual_law(X, weights, n_refit, where)
    return ArchitectureNull(
        name=architecture,
        n_layers=L,
        d_model=D,
        n_s=len(X),
        view=last_layer_view(X, pilots),
        shapes=path_shapes({"untrained": X}, pilots, weights[: 1 + n_boot]),
        law=law,
        arrival_r2_gap=arrival_r2_gap(trained_law, law),
    )


def reinitialised_trajectories(
    model: str,
    corpus,
    first_block: int,
    seeds,
    device: str = "auto",
    dtype: str = "float32",
) -> dict[int, np.ndarray]:
    """Trajectories `(N, L+1, D)` of `corpus` through `model` with blocks `first_block`.. drawn afresh, per seed."""

    out = {}
    for s in seeds:
        reinit = load_model(
            model, reinit_from=first_block, seed=s, device=device, dtype=dtype
        )
        out[s] = trajectories(reinit, corpus)
        del reinit
    return out


def stalling_table(models: dict[str, np.ndarray], split: int) -> pd.DataFrame:
    """`stalling` of each model's trajectories after layer `split`, one row per model."""
    return pd.DataFrame({name: stalling(X, split) for name, X in models.items()}).T


def reinit_stalling(
    stall: pd.DataFrame,
    reference: str = "trained",
    reinit_from_row: int = 2,
    skipped: object = None,
) -> dict[str, Estimate | object]:
    """From `stalling_table` whose rows `reinit_from_row`.. are re-initialisation seeds: their median relative step
    after the split over the `reference` model's (`reinit_step_ratio`) and their mean cosine of consecutive steps
    after it (`reinit_cos_after`), mean and t-interval over seeds. Without such rows (an untrained model has
    nothing to re-initialise) both are `skipped`."""

    reinit, unit = stall.iloc[reinit_from_row:], "re-initialisation seeds"
    if reinit.empty:
        return dict.fromkeys(("reinit_step_ratio", "reinit_cos_after"), skipped)
    return {
        "reinit_step_ratio": over_seeds(
            reinit["step_after"] / stall.loc[reference, "step_after"], unit=unit
        ),
        "reinit_cos_after": over_seeds(reinit["cos_after"], unit=unit),
    }


def separability_figure(table: pd.DataFrame, title: str):
    """Test accuracy against the layer per pair of ensembles (`Separability.table`), band: 95% CI over splits."""
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.lineplot(
        table,
        x="layer t",
        y="test accuracy",
        hue="pilots",
        style="pilots",
        markers=True,
        errorbar=("ci", 95),
        ax=ax,
    )
    ax.axhline(0.5, color="grey", ls=":")
    ax.legend(loc="lower right", fontsize=8)
    ax.set(ylim=(0.15, 1.03), title=title)
    return fig


def path_shapes_figure(shapes, title: str):
    """Histogram of the straightness per model and the coherence of steps per layer with its bootstrap band, from
    `lotlib.lines_of_thought.null_tests.PathShapes`; dotted: a random walk and independent directions."""
    N, L = (
        len(next(iter(shapes.straight.values()))),
        next(iter(shapes.coherence.values())).shape[1] + 1,
    )
    step_layers = np.arange(1, L)
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    rows = [
        {"straightness": v, "model": name}
        for name, s in shapes.straight.items()
        for v in s
    ]
    sns.histplot(
        pd.DataFrame(rows),
        x="straightness",
        hue="model",
        bins=40,
        binrange=(0, 1),
        ax=axes[0],
    )
    axes[0].axvline(
        1 / np.sqrt(L - 1), color="grey", ls=":", label="random walk, 1/√(L−1)"
    )
    for name, c in shapes.coherence.items():
        axes[1].plot(step_layers, c[0], marker="o", label=name)
        axes[1].fill_between(
            step_layers, *np.quantile(c[1:], [0.025, 0.975], axis=0), alpha=0.25
        )
    axes[1].axhline(
        1 / np.sqrt(N), color="grey", ls=":", label="independent directions, 1/√N"
    )
    axes[0].set(
        xlabel="‖x(L) − x(1)‖ / path length",
        ylabel="pilots",
        title="Straightness (full space)",
    )
    axes[1].set(
        xlabel="step t → t+1",
        ylabel="‖mean unit step‖",
        title="Parallel steps (band: 95% bootstrap over pilots)",
        ylim=(0, 1.02),
    )
    axes[1].legend(fontsize=8)
    fig.suptitle(title)
    return fig


def noise_law_pairs_figure(law: dict[str, dict], model: str):
    """ln(mean variance) with the fit of Eq. 2 (top) and ln(relative variance) (bottom) of every pair against the
    arrival layer, colored by departure, one column per model (`compare_noise_laws`)."""

    T = next(iter(law.values()))["log_var"].shape[0]
    L = T - 1
    t_idx, s_idx = np.nonzero(pair_mask(T, 1, L))
    fig, axes = plt.subplots(
        2, len(law), figsize=(6.5 * len(law), 8), sharex=True, squeeze=False
    )
    for col, (name, entry) in enumerate(law.items()):
        for row, (key, label) in enumerate(
            [
                ("log_var", "ln(mean variance)"),
                ("log_rel", "ln(tr Cov w / tr Cov x(t+τ))"),
            ]
        ):
            ax = axes[row, col]
            points = ax.scatter(
                s_idx, entry[key][t_idx, s_idx], c=t_idx, cmap="viridis", s=10
            )
            ax.set(ylabel=label, title=f"{name} {model}")
        f, grid = entry["fit"], np.linspace(1, L, 50)
        axes[0, col].plot(
            grid,
            np.log(f["alpha"]) + f["lambda"] * grid,
            color="crimson",
            label=f"α e^(λ(t+τ)): λ = {f['lambda']:.3f}, arrival R² = {f['arrival_r2']:.2f}",
        )
        axes[0, col].legend(fontsize=8)
        axes[1, col].axhline(np.log(2), color="grey", ls="--", lw=0.8)
        axes[1, col].set(xlabel="arrival layer t + τ")
        axes[1, col].text(
            0.98,
            0.04,
            f"arrival R² {entry['relative_arrival_r2']:.2f}",
            transform=axes[1, col].transAxes,
            ha="right",
            va="bottom",
            fontsize=9,
        )
    fig.colorbar(points, ax=axes, label="departure layer t")
    return fig


def stalling_figure(steps: pd.DataFrame, split: int, title: str):
    """Relative step length (median, quartiles) and cosine of consecutive steps (mean, 95% CI) against the layer
    per model (`lotlib.lines_of_thought.null_tests.step_table`); dashed: the first re-initialised block."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    sns.lineplot(
        steps.dropna(subset=["relative step"]),
        x="t",
        y="relative step",
        hue="model",
        estimator="median",
        errorbar=("pi", 50),
        ax=axes[0],
    )
    sns.lineplot(
        steps.dropna(subset=["cos"]),
        x="t",
        y="cos",
        hue="model",
        errorbar=("ci", 95),
        ax=axes[1],
        legend=False,
    )
    axes[0].set(
        yscale="log",
        xlabel="step t → t+1",
        ylabel="‖x(t+1) − x(t)‖ / ‖x(t)‖",
        title="Relative step length (median, band: quartiles over pilots)",
    )
    axes[1].set(
        xlabel="layer t",
        ylabel="cos(consecutive steps)",
        title="Change of direction (mean, 95% CI)",
        ylim=(-0.2, 1.02),
    )
    for ax in axes:
        ax.axvline(split, color="grey", ls="--")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    return fig


def paths_side_by_side(views: dict[str, np.ndarray], layers: np.ndarray):
    """Static 3-D pictures of paths `(n, len(layers), 3)` side by side, titled by their keys."""

    fig = plt.figure(figsize=(6.5 * len(views), 5.5))
    for i, (title, P) in enumerate(views.items()):
        plots.paths_static(
            P, layers, title, ax=fig.add_subplot(1, len(views), i + 1, projection="3d")
        )
    return fig
