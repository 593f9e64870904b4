"""Chapter A2's study and figures: the normalized states against sqrt(d) and the hyperplane, and the paper's table of the embeddings."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..models.loading import Model
from ..stats import bootstrap, exact
from ..traveling_words.norms import (
    REFERENCES,
    embedding_tables,
    norm_statistics,
    norm_table,
    random_cos_density,
    random_cos_to_ones,
)


@dataclass
class NormalizationStudy:
    """A2 on a sample of states (`norm_statistics`, each `(N, T, L+1)`, and its `norm_table`) and on the
    embedding matrix (`embedding_tables`): `sqrt_d`, `growth` and `plane` hold the measured facts of its
    three sections on states (`sqrt_d_checks`, `residual_growth`, `hyperplane_distance`)."""

    stats: dict
    table: pd.DataFrame
    sqrt_d: dict
    growth: dict
    plane: dict
    embeddings: dict
    kind: str
    centers: bool

    def table_of_embeddings(self) -> pd.DataFrame:
        """The paper's table: one row per (reference, variant), mean and std of the L2 and cosine
        distances to the reference."""
        return pd.concat(self.embeddings["tables"], names=["reference", "variant"])

    def identities(self) -> pd.DataFrame:
        """The table's identities (rows) per reference (columns): largest violations."""
        return pd.DataFrame(self.embeddings["identities"])

    def summary(self) -> dict:
        """The chapter's recorded values (the hyperplane's largest `|cos(x̂, 1)|` as an exact value, whether
        or not the norm centers)."""
        d, n = self.stats["d"], int(self.stats["normalized"].size)
        n_per_layer = int(self.stats["residual"][..., 0].size)
        e, s, g, p = self.embeddings, self.sqrt_d, self.growth, self.plane
        ln, rms = (e["tables"][name] for name in REFERENCES)
        return {
            "n_states_per_layer": n_per_layer,
            "d_model": d,
            "sqrt_d": d**0.5,
            "norm_kind": self.kind,
            "centers": self.centers,
            "normalized_norm_min": s["min"],
            "normalized_norm_max": s["max"],
            "max_shortfall_from_sqrt_d": exact(s["largest_gap"], n=n, unit="states"),
            "max_abs_measured_minus_eps_formula": s["worst"],
            "max_rel_measured_minus_eps_formula": exact(
                s["worst"] / d**0.5, n=n, unit="states"
            ),
            "residual_median_t0": float(g["median_by_layer"][0]),
            "residual_median_tL": float(g["median_by_layer"][-1]),
            "residual_growth_factor": g["factor"],
            "residual_layers_growing": g["increases"],
            "first_position_max_median_norm": float(g["first_median"].max()),
            "normalized_max_abs_cos_ones": exact(p["hat_max"], n=n, unit="states"),
            "mean_abs_cos_ones_by_layer": p["mean_abs_cos"].tolist(),
            "mean_abs_cos_ones": float(p["mean_abs_cos"].mean()),
            "random_direction_abs_cos": p["baseline"],
            "cos_ones_over_random": p["over_random"],
            "ln_table": ln.to_dict(orient="index"),
            "rms_table": rms.to_dict(orient="index"),
            "ln_identities": e["identities"][REFERENCES[0]],
            "rms_identities": e["identities"][REFERENCES[1]],
            "table_rows_left_out": e["skipped"],
            "table_identity_violation": exact(
                e["violation"], n=e["n_rows"] - max(e["skipped"].values()), unit="rows"
            ),
            "ln_cos_original_mean": float(ln.loc["Original E", "cosine mean"]),
            "ln_cos_centered_mean": float(ln.loc["Centered E-c", "cosine mean"]),
            "rms_cos_original_max": e["rms_cos_original_max"],
        }


def normalization_study(
    model: Model, ids: np.ndarray, first: int = 0, n_boot: int = 1000, seed: int = 0
) -> NormalizationStudy:
    """Run A2: the norm statistics of every state of `ids` `(N, T)` from position `first` on, their
    checks with bootstrap intervals over the N pseudo-sentences (`n_boot` resamples, `seed`), and the
    table of the embedding matrix against LayerNorm and RMSNorm references (the final norm's eps)."""
    view = model.view
    stats = norm_statistics(model, ids, first=first)
    return NormalizationStudy(
        stats=stats,
        table=norm_table(stats),
        sqrt_d=sqrt_d_checks(stats),
        growth=residual_growth(stats["residual"], n_boot, seed),
        plane=hyperplane_distance(stats, n_boot, seed),
        embeddings=embedding_tables(view.W_E, view.final_norm.eps),
        kind=view.reading_norms()[0].kind,
        centers=view.reading_norms()[0].centers,
    )


def sqrt_d_checks(stats: dict) -> dict:
    """How far the normalized states of `norm_statistics` are from sqrt(d): their range (`min`, `max`),
    the largest `|measured - eps formula|` (`worst`), the largest shortfall from sqrt(d) (`largest_gap`) and
    the layer where it occurs (`t_gap`)."""
    normalized = stats["normalized"]
    shortfall = (stats["d"] ** 0.5 - normalized).max((0, 1))  # (L+1,)
    return {
        "min": float(normalized.min()),
        "max": float(normalized.max()),
        "worst": float(np.abs(normalized - stats["predicted"]).max()),
        "largest_gap": float(shortfall.max()),
        "t_gap": int(np.argmax(shortfall)),
    }


def residual_growth(residual: np.ndarray, n_boot: int = 1000, seed: int = 0) -> dict:
    """Growth of `||x(t)||` `(N, T, L+1)` over layers: the median per layer over positions >= 1
    (`median_by_layer`, `(L+1,)`), the `factor` median `||x(L)||` / median `||x(0)||` with a bootstrap
    interval over the N pseudo-sentences, the number of layers where the median grows (`increases`) and
    the first position's median per layer (`first_median`, `(L+1,)`)."""
    rest = residual[:, 1:]

    def growth(rows: np.ndarray) -> float:
        return float(np.median(rest[rows, :, -1]) / np.median(rest[rows, :, 0]))

    median = np.median(rest.reshape(-1, rest.shape[-1]), 0)
    return {
        "median_by_layer": median,
        "factor": bootstrap(
            growth, len(residual), unit="pseudo-sentences", n_boot=n_boot, seed=seed
        ),
        "increases": int(np.sum(np.diff(median) > 0)),
        "first_median": np.median(residual[:, 0], 0),
    }


def hyperplane_distance(stats: dict, n_boot: int = 1000, seed: int = 0) -> dict:
    """How far states are from the hyperplane x . 1 = 0: the largest `|cos(x̂, 1)|` of the normalized
    states (`hat_max`), the mean `|cos(x, 1)|` of the incoming states per layer (`mean_abs_cos`, `(L+1,)`),
    a random direction's (`baseline`) and their ratio over every state and layer (`over_random`, with a
    bootstrap interval over the pseudo-sentences)."""
    cos, baseline = stats["cos_ones"], random_cos_to_ones(stats["d"])

    def off_plane(rows: np.ndarray) -> float:
        return float(np.abs(cos[rows]).mean() / baseline)

    return {
        "hat_max": float(np.abs(stats["cos_ones_normalized"]).max()),
        "mean_abs_cos": np.abs(cos).mean((0, 1)),
        "baseline": baseline,
        "over_random": bootstrap(
            off_plane, len(cos), unit="pseudo-sentences", n_boot=n_boot, seed=seed
        ),
    }


def sqrt_d_gaps(table: pd.DataFrame, d: int, title: str):
    """A2, section 1: per layer, sqrt(d) - `||x̂||` measured and eps-predicted, and the largest
    `|measured - predicted|` over states (columns of `norm_table`), on a log scale; returns the figure."""
    fig, ax = plt.subplots(figsize=(8, 3.5))
    measured = table["sqrt(d) - ||x̂|| measured"]
    predicted = table["sqrt(d) - ||x̂|| eps-predicted"]
    worst = table["max |measured - predicted|"]
    ax.semilogy(
        table.index, measured.abs(), "o-", label="√d − ||x̂||, measured (float32)"
    )
    ax.semilogy(table.index, predicted, "x--", label="√d − ||x̂||, eps-predicted")
    ax.semilogy(
        table.index,
        worst,
        ".:",
        color="grey",
        label="max |measured − predicted| over states",
    )
    ax.set(
        xlabel="layer t (norm reading x(t); t = L: final norm)",
        ylabel="gap",
        title=f"||x̂|| vs √d = {d**0.5:.3f}, {title}",
    )
    ax.legend(fontsize=8)
    return fig


def residual_norms(residual: np.ndarray, d: int, title: str):
    """A2, section 2: `||x(t)||` `(N, T, L+1)` by layer, median and 10-90% band, the first position apart
    from the others, on a log scale with sqrt(d) for reference; returns the figure."""
    _, position, t = np.indices(residual.shape).reshape(3, -1)
    where = np.where(position == 0, "first position", "positions ≥ 1")
    frame = pd.DataFrame({"t": t, "||x(t)||": residual.ravel(), "position": where})
    fig, ax = plt.subplots(figsize=(8, 3.5))
    sns.lineplot(
        frame,
        x="t",
        y="||x(t)||",
        hue="position",
        estimator="median",
        errorbar=("pi", 80),
        marker="o",
        ax=ax,
    )
    ax.axhline(d**0.5, color="grey", ls=":", label="√d (every normalized state)")
    ax.set(
        yscale="log",
        xlabel="layer t",
        title=f"Residual-stream norm before normalization (median, 10–90%), {title}",
    )
    ax.legend(fontsize=8)
    return fig


def hyperplane_figure(
    stats: dict, layers: list[int], n_boot: int = 1000, seed: int = 0
):
    """A2, section 3: left, mean `|cos(·, 1)|` per layer of the incoming and the normalized states
    (`norm_statistics`), means per pseudo-sentence with 95% bootstrap bands, against a random direction;
    right, histograms of cos(x, 1) of the incoming states at `layers` against a random direction's
    density. Returns the figure."""
    d, n_s, n_t = stats["d"], *stats["cos_ones"].shape[::2]
    baseline = random_cos_to_ones(d)
    per_sentence = pd.concat(
        pd.DataFrame(
            {
                "t": np.tile(np.arange(n_t), n_s),
                "mean |cos|": np.abs(stats[key]).mean(1).ravel(),
                "state": name,
            }
        )
        for key, name in (
            ("cos_ones", "states x(t) entering the norm"),
            ("cos_ones_normalized", "normalized states x̂(t)"),
        )
    )
    fig, (ax, hx) = plt.subplots(1, 2, figsize=(12, 3.8))
    sns.lineplot(
        per_sentence,
        x="t",
        y="mean |cos|",
        hue="state",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        marker="o",
        ax=ax,
    )
    ax.axhline(
        baseline, color="grey", ls="--", label=f"random direction ({baseline:.3f})"
    )
    ax.set(
        xlabel="layer t",
        ylabel="mean |cos(·, 1)|",
        title="Distance from the hyperplane x · 1 = 0, relative to the norm",
    )
    ax.legend(fontsize=8)
    cos = stats["cos_ones"]
    picked = pd.DataFrame(
        {
            "cos(x, 1)": cos[..., layers].reshape(-1),
            "t": np.tile(layers, cos[..., 0].size),
        }
    )
    sns.histplot(
        picked,
        x="cos(x, 1)",
        hue="t",
        stat="density",
        common_norm=False,
        element="step",
        fill=False,
        bins=60,
        palette="viridis",
        ax=hx,
    )
    grid = np.linspace(-4, 4, 200) / d**0.5
    hx.plot(grid, random_cos_density(grid, d), "k--", lw=1, label="random direction")
    hx.set(title="cos(x, 1) of the incoming states (dashed: a random direction)")
    return fig
