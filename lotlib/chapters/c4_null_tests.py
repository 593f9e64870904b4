"""Chapter C4's study: the null tests of the Lines of Thought (gibberish, re-initialised weights, path shapes, separability)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from .. import plots
from ..lines_of_thought.null_tests import (
    PathShapes,
    Separability,
    arrival_r2_gap,
    path_shapes,
    relative_steps,
    residual_law,
    step_cosines,
)
from ..lines_of_thought.residuals import pair_mask
from ..models.bounds import pilot_count
from ..models.corpus import Corpus, walden
from ..models.devices import DeviceRequest
from ..models.loading import Model, load_model
from ..models.trajectories import trajectories
from ..stats import (
    Estimate,
    draw_pilots,
    exact,
    over_seeds,
    resampling_weights,
    side_word,
)


def stalling(X: np.ndarray, split: int, first: int = 1) -> dict:
    """Do paths stall after layer `split`? Steps x(t) -> x(t+1) with first <= t < split are "before", with
    t >= split "after" (cosines: both steps on the same side). Returns the median relative step length before
    and after and their ratio (`step_ratio`, 1 = no change, near 0 = stalled), and the mean cosine between
    consecutive steps before and after (NaN for a side with a single step)."""
    # cosines[:, t - 1] pairs steps t-1 and t
    steps, cosines = relative_steps(X), step_cosines(X)
    before, after = np.median(steps[:, first:split]), np.median(steps[:, split:])
    # empty when a side has one step
    cos_before, cos_after = cosines[:, first : split - 1], cosines[:, split:]
    return {
        "step_before": float(before),
        "step_after": float(after),
        "step_ratio": float(after / before),
        "cos_before": float(cos_before.mean()) if cos_before.size else np.nan,
        "cos_after": float(cos_after.mean()) if cos_after.size else np.nan,
    }


def same_weights(lm: Model, untrained: Model) -> bool:
    """Whether `untrained` is the book's model `lm` itself (an untrained null book's), by their identities,
    which change whenever the weights do."""
    return untrained.identity == lm.identity


def through_both(
    lm: Model, untrained: Model, corpus: Corpus
) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories `(N, L+1, D)` of `corpus` through `lm` and through `untrained`: one array for both when
    they are one model (`same_weights`)."""
    X = trajectories(lm, corpus)
    return X, (X if same_weights(lm, untrained) else trajectories(untrained, corpus))


def gibberish_pairs(
    lm: Model, untrained: Model, language: Corpus, noise: Corpus, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The ensembles `(n, L+1, D)` of the separability test, by name: Walden vs gibberish through `lm`, two seeded
    random halves of Walden (the control) and Walden vs gibberish through the `untrained` model."""

    X_lang, U_lang = through_both(lm, untrained, language)
    X_noise, U_noise = through_both(lm, untrained, noise)
    order = np.random.default_rng(seed).permutation(language.n_s)
    half = language.n_s // 2
    return {
        "Walden vs gibberish": (X_lang, X_noise),
        "Walden vs Walden (two halves)": (
            X_lang[order[:half]],
            X_lang[order[half : 2 * half]],
        ),
        "untrained model: Walden vs gibberish": (U_lang, U_noise),
    }


def separability_summary(separable: Separability) -> dict:
    """Under the chapter's summary keys, for the pairs in the order finding, control, untrained model: the
    minimum over blocks of each, the untrained model's minus the finding's (`gap`), the finding's accuracy at
    the embedding and its mean accuracy by layer over the sample's splits."""
    finding, control, untrained = separable.accuracy
    lowest = separable.min_over_blocks()
    return {
        "separability_min": lowest[finding],
        "separability_control_min": lowest[control],
        "untrained_separability_min": lowest[untrained],
        "untrained_separability_gap": separable.gap(untrained, finding),
        "separability_embedding": separable.at_embedding(finding),
        "separability_by_layer": separable.accuracy[finding].mean(0),
    }


# each compared model's summary key per measure
MODEL_KEYS = {
    "trained": {
        "straightness": "trained_straightness",
        "straightness_3d": "trained_straightness_3d",
        "step_coherence": "trained_step_coherence",
        "kurtosis": "trained_kurtosis",
        "alpha": "trained_alpha",
        "lambda": "trained_lambda",
        "arrival_r2": "trained_arrival_r2",
        "relative_arrival_r2": "trained_relative_arrival_r2",
        "step_before": "trained_step_before",
        "step_after": "trained_step_after",
        "step_ratio": "trained_step_ratio",
        "cos_before": "trained_cos_before",
        "cos_after": "trained_cos_after",
    },
    "untrained": {
        "straightness": "untrained_straightness",
        "straightness_3d": "untrained_straightness_3d",
        "step_coherence": "untrained_step_coherence",
        "kurtosis": "untrained_kurtosis",
        "alpha": "untrained_alpha",
        "lambda": "untrained_lambda",
        "arrival_r2": "untrained_arrival_r2",
        "relative_arrival_r2": "untrained_relative_arrival_r2",
        "step_before": "untrained_step_before",
        "step_after": "untrained_step_after",
        "step_ratio": "untrained_step_ratio",
        "cos_before": "untrained_cos_before",
        "cos_after": "untrained_cos_after",
    },
}


def shapes_summary(shapes: PathShapes) -> dict:
    """`PathShapes` of the models "trained" and "untrained" under `MODEL_KEYS`: per model its straightness (full
    space, and mean on u1..u3) and step coherence, and the levels of a random walk and of independent
    directions."""
    N = len(next(iter(shapes.straight.values())))
    steps = next(iter(shapes.coherence.values())).shape[1]
    out = {}
    for name, straight in shapes.straightness.items():
        keys = MODEL_KEYS[name]
        out[keys["straightness"]] = straight
        out[keys["straightness_3d"]] = float(np.mean(shapes.straight_3d[name]))
        out[keys["step_coherence"]] = shapes.step_coherence[name]
    return {
        **out,
        "straightness_random_walk": exact(1 / np.sqrt(steps)),
        "coherence_independent": exact(1 / np.sqrt(N)),
    }


def noise_law_summary(law: dict[str, dict]) -> dict:
    """`compare_noise_laws`'s per-model dict (models "trained" and "untrained") under `MODEL_KEYS`: kurtosis,
    the fit's alpha, lambda and arrival R^2, and the relative variance's arrival R^2."""
    out = {}
    for name, entry in law.items():
        keys = MODEL_KEYS[name]
        out[keys["kurtosis"]] = entry["kurtosis"]
        for measure in ("alpha", "lambda", "arrival_r2"):
            out[keys[measure]] = entry["fit"][measure]
        out[keys["relative_arrival_r2"]] = entry["relative_arrival_r2"]
    return out


def range_word(estimate: Estimate, lo: float, hi: float) -> str:
    """ "below", "within" or "above" [lo, hi] when the whole interval of `estimate` is, "straddling" otherwise."""
    if estimate.hi < lo:
        return "below"
    if estimate.lo > hi:
        return "above"
    return "within" if lo <= estimate.lo and estimate.hi <= hi else "straddling"


# the paper's excess kurtosis of an untrained GPT-2 medium's residuals ("about 1-1.5")
PAPER_KURTOSIS = (1.0, 1.5)

# the untrained model's measures as `ArchitectureNull.summary` records them for the paper's architecture
PAPER_ARCH_KEYS = {
    "n_layers": "n_layers_paper_arch",
    "d_model": "d_model_paper_arch",
    "n_s": "n_s_paper_arch",
    "untrained_straightness": "untrained_straightness_paper_arch",
    "untrained_straightness_3d": "untrained_straightness_3d_paper_arch",
    "untrained_step_coherence": "untrained_step_coherence_paper_arch",
    "straightness_random_walk": "straightness_random_walk_paper_arch",
    "coherence_independent": "coherence_independent_paper_arch",
    "untrained_kurtosis": "untrained_kurtosis_paper_arch",
    "untrained_alpha": "untrained_alpha_paper_arch",
    "untrained_lambda": "untrained_lambda_paper_arch",
    "untrained_arrival_r2": "untrained_arrival_r2_paper_arch",
    "untrained_relative_arrival_r2": "untrained_relative_arrival_r2_paper_arch",
    "untrained_arrival_r2_gap": "untrained_arrival_r2_gap_paper_arch",
}


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

    def measures(self) -> dict:
        """Its values under the book's untrained model's keys (the keys of `PAPER_ARCH_KEYS`)."""
        measured = {
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_s": self.n_s,
            **shapes_summary(self.shapes),
            **noise_law_summary({"untrained": self.law}),
            "untrained_arrival_r2_gap": self.arrival_r2_gap,
        }
        return {key: measured[key] for key in PAPER_ARCH_KEYS}

    def summary(self, skipped: object = None) -> dict:
        """Its values under the keys of the paper's architecture (`PAPER_ARCH_KEYS`); `skipped` for each when
        skipped."""
        if self.law is None:
            return dict.fromkeys(PAPER_ARCH_KEYS.values(), skipped)
        return {PAPER_ARCH_KEYS[key]: v for key, v in self.measures().items()}

    def words(self, skipped: str = "not measured") -> dict[str, str]:
        """Words for the prose, from the run: the straightness against a random walk's, the step coherence against
        independent directions', the kurtosis against the paper's `PAPER_KURTOSIS`, and whether the arrival layer
        explains "less", "about as much" or "more" of the relative variance than in the book's trained model;
        `skipped` for each when skipped."""
        keys = ("straight", "parallel", "kurtosis", "arrival")
        if self.law is None:
            return {f"paper_{key}_word": skipped for key in keys}
        s = self.measures()
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


@dataclass(frozen=True)
class PaperNullSample:
    """What the untrained model of the paper's architecture reads: `n_s` pseudo-sentences of `n_k` tokens of
    Walden in its own tokenizer (`pilot_count` rules on its width), `n_pilots` drawn pilots, `n_boot` bootstrap
    resamples of its pilots, and the `seed` of its weights, pilots and resamples."""

    n_k: int
    n_s: int | str | None
    n_pilots: int
    n_boot: int
    seed: int = 0


def architecture_null(
    architecture: str,
    trained_law: dict,
    sample: PaperNullSample,
    device: DeviceRequest = "auto",
    dtype: str = "float32",
) -> ArchitectureNull:
    """The untrained-model null controls on `untrained:<architecture>` ("" skips) reading `sample`: path shapes
    bootstrapped over its pilots and `residual_law` on as many of those resamples as `trained_law` has (the
    book's trained model's, its resamples seeded `sample.seed`), each refitting the bases, and the arrival R^2
    gap of `trained_law` minus this model's: the same resamples when both have as many pilots, independent
    ones otherwise."""

    if not architecture:
        return ArchitectureNull(name="")
    seed = sample.seed
    lm = load_model(architecture, untrained=True, seed=seed, device=device, dtype=dtype)
    L, D = lm.view.n_layers, lm.view.d_model
    n_s = pilot_count(sample.n_s, D, "n_s_paper")
    X = trajectories(lm, walden(lm.tokenizer, n_k=sample.n_k, n_s=n_s))  # (N, L+1, D)
    where = lm.device
    del lm
    n_refit = len(trained_law["arrival_r2_rows"]) - 1
    pilots = draw_pilots(len(X), sample.n_pilots, np.random.default_rng(seed))
    weights = resampling_weights(len(X), max(sample.n_boot, n_refit), seed)
    law = residual_law(X, weights, n_refit, where)
    shapes = path_shapes({"untrained": X}, pilots, weights[: 1 + sample.n_boot])
    return ArchitectureNull(
        name=architecture,
        n_layers=L,
        d_model=D,
        n_s=len(X),
        view=shapes.views["untrained"],
        shapes=shapes,
        law=law,
        arrival_r2_gap=arrival_r2_gap(trained_law, law),
    )


def reinitialised_trajectories(
    model: str,
    corpus,
    first_block: int,
    seeds,
    device: DeviceRequest = "auto",
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
    """`stalling` of each model's trajectories `(N, L+1, D)` after layer `split`, one row per model; once per
    array (a null book's "trained" and "untrained" are one)."""
    measured = {}
    for X in models.values():
        if id(X) not in measured:
            measured[id(X)] = stalling(X, split)
    return pd.DataFrame({name: measured[id(X)] for name, X in models.items()}).T


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


@dataclass(frozen=True)
class NullTests:
    """What C4 measured: the separability of its pairs, the path shapes and noise laws of the models "trained"
    and "untrained" (`compare_noise_laws`, with their `arrival_r2_gap`), the `stalling_table` of those models
    followed by the re-initialised ones, and the untrained model of the paper's architecture (`paper`)."""

    separable: Separability
    shapes: PathShapes
    law: dict[str, dict]
    arrival_r2_gap: Estimate
    stall: pd.DataFrame
    paper: ArchitectureNull

    def claim_values(
        self, same_weights: bool, untrained_itself: object, paper_skipped: object
    ) -> dict[str, object]:
        """The measured values under the chapter's keys. With `same_weights` (the book's model is its own
        untrained variant) the comparisons with the trained model are `untrained_itself`, as are the
        re-initialisation's values when nothing was re-initialised; the paper architecture's values are
        `paper_skipped` when it was skipped."""
        paper = self.paper.summary(skipped=paper_skipped)
        stall = {
            MODEL_KEYS[name][key]: self.stall.loc[name, key]
            for name in MODEL_KEYS
            for key in self.stall
        }
        gaps = {
            "untrained_arrival_r2_gap": self.arrival_r2_gap,
            "untrained_arrival_r2_gap_paper_arch": paper[
                "untrained_arrival_r2_gap_paper_arch"
            ],
        }
        if same_weights:
            gaps = dict.fromkeys(gaps, untrained_itself)
        return {
            **separability_summary(self.separable),
            **shapes_summary(self.shapes),
            **noise_law_summary(self.law),
            **stall,
            **paper,
            **gaps,
            **reinit_stalling(self.stall, skipped=untrained_itself),
        }


def separability_figure(table: pd.DataFrame, title: str) -> Figure:
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


def path_shapes_figure(shapes: PathShapes, title: str) -> Figure:
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


def noise_law_pairs_figure(law: dict[str, dict], model: str) -> Figure:
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


def stalling_figure(steps: pd.DataFrame, split: int, title: str) -> Figure:
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


def paths_side_by_side(views: dict[str, np.ndarray], layers: np.ndarray) -> Figure:
    """Static 3-D pictures of paths `(n, len(layers), 3)` side by side, titled by their keys."""

    fig = plt.figure(figsize=(6.5 * len(views), 5.5))
    for i, (title, P) in enumerate(views.items()):
        plots.paths_static(
            P, layers, title, ax=fig.add_subplot(1, len(views), i + 1, projection="3d")
        )
    return fig
