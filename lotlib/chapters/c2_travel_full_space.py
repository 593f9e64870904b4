"""Chapter C2's study and figure: whether each block moves a token's normalized state toward the next word, in the full space."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..models.loading import Model
from ..stats import Estimate
from ..traveling_words.travel import (
    Travel,
    per_sentence_difference,
    positive_block_share,
    shuffled_next,
    travel_cosines,
    travel_summaries,
    trip_difference,
    win_share,
)


@dataclass(frozen=True)
class FullSpaceTravel:
    """Travel toward the next word measured over sampled pseudo-sentences `ids` `(n, T)` (the first `prefix`
    columns a BOS, context only), drawn from `n_corpus`: the cosines (`travel`, per target table), their
    paired summaries against each baseline (`steps` per block, `trips` for the whole way, keyed by
    (table, baseline)) and the chapter's estimates, each over pseudo-sentences:

    - `trip`: whole trip, raw W_E target, true − shuffled; `trip_within`: true − rival word of the same
      pseudo-sentence; `trip_normed`: final_norm(W_E) target; `passage_null`: the rival − shuffled;
    - `wins`, `passage_wins`: share of positions where the true word (the rival) beats the shuffle;
    - `block_share`: share of blocks whose mean update leans toward the true word more than the shuffle.
    """

    ids: np.ndarray
    prefix: int
    n_corpus: int
    d_model: int
    baselines: dict[str, np.ndarray]
    travel: dict[str, Travel]
    steps: dict[tuple[str, str], pd.DataFrame]
    trips: dict[tuple[str, str], pd.DataFrame]
    trip: Estimate
    trip_within: Estimate
    trip_normed: Estimate
    passage_null: Estimate
    wins: Estimate
    passage_wins: Estimate
    block_share: Estimate

    @property
    def text(self) -> np.ndarray:
        """The words `(n, T - prefix)`."""
        return self.ids[:, self.prefix :]

    @property
    def n_positions(self) -> int:
        return self.text[:, :-1].size

    def repeat_share(self, kind: str = "true") -> float:
        """Share of positions whose next token (`kind`: "true" or a baseline) is the current one."""
        following = self.text[:, 1:] if kind == "true" else self.baselines[kind]
        return float(np.mean(following == self.text[:, :-1]))

    @property
    def blocks(self) -> pd.DataFrame:
        """Per block (index 1..L): the raw W_E target against the whole-sample shuffle (`paired_summary`)."""
        table = self.steps["W_E", "shuffled"]
        return table.set_axis(pd.RangeIndex(1, len(table) + 1, name="block"))

    @property
    def trip_table(self) -> pd.DataFrame:
        """The whole trip's `paired_summary`, one row per (target table, baseline)."""
        rows = {key: s.iloc[0] for key, s in self.trips.items()}
        return pd.DataFrame(rows).T.rename_axis(["target", "baseline"])

    def summary(self) -> dict:
        """The measured values by name: sample sizes, the whole trip (raw W_E target) against each baseline
        and the passage null, the per-block differences (against the whole-sample shuffle: mean, largest,
        blocks whose 95% interval lies above / below zero, `block_share`) and the scale 1/sqrt(D)."""
        blocks, trip = self.blocks, self.trips["W_E", "shuffled"].iloc[0]
        return {
            "n_sentences": len(self.ids),
            "n_positions": self.n_positions,
            "n_layers": len(blocks),
            "d_model": self.d_model,
            "target": "W_E",
            "trip_true": trip["true"],
            "trip_shuffled": trip["shuffled"],
            "trip_difference": self.trip,
            "trip_difference_se": trip["se"],
            "trip_difference_passage_null": self.passage_null,
            "trip_true_wins": self.wins,
            "trip_passage_null_wins": self.passage_wins,
            "trip_difference_normed_target": self.trip_normed,
            "trip_difference_within_sentence": self.trip_within,
            "block_difference_mean": blocks["difference"].mean(),
            "block_difference_max": blocks["difference"].max(),
            "blocks_positive": int((blocks["ci_lo"] > 0).sum()),
            "blocks_negative": int((blocks["ci_hi"] < 0).sum()),
            "share_blocks_positive": self.block_share,
            "block1_true": blocks["true"].iloc[0],
            "block1_shuffled": blocks["shuffled"].iloc[0],
            "inv_sqrt_d": self.d_model**-0.5,
        }

    def facts(self) -> dict:
        """What the prose quotes beyond `summary`: the corpus size, the shares of positions whose next token
        (true, or each baseline's) is the current one, the blocks whose interval lies below zero, the block
        of the largest difference and the whole trip's lean in units of a chance alignment 1/sqrt(D)."""
        blocks = self.blocks
        below = blocks.index[blocks["ci_hi"] < 0].tolist()
        return {
            "n_corpus": self.n_corpus,
            "repeat_share": self.repeat_share(),
            "repeat_share_shuffled": self.repeat_share("shuffled"),
            "repeat_share_within": self.repeat_share("shuffled within sentence"),
            "blocks_below_list": str(below) if below else "none",
            "block_difference_argmax": int(blocks["difference"].idxmax()),
            "trip_in_chance_units": self.trip.value * self.d_model**0.5,
        }


def travel_in_full_space(
    model: Model,
    corpus,
    *,
    n_sentences: int,
    seed: int = 0,
    n_boot: int = 2000,
    batch_size: int = 16,
) -> FullSpaceTravel:
    """`travel_cosines` on `n_sentences` pseudo-sentences of `corpus` (a `Corpus`) drawn with `seed`, against
    the next tokens shuffled over the whole sample and within each pseudo-sentence (same seed), with the
    bootstrap (`n_boot` resamples of pseudo-sentences, same seed) of every estimate."""
    rng = np.random.default_rng(seed)
    chosen = rng.choice(corpus.n_s, size=min(n_sentences, corpus.n_s), replace=False)
    ids = corpus.ids[np.sort(chosen)]
    following = ids[:, corpus.prefix + 1 :]
    baselines = {
        "shuffled": shuffled_next(following, seed),
        "shuffled within sentence": shuffled_next(following, seed, within_rows=True),
    }
    travel = travel_cosines(
        model, ids, baselines, first=corpus.prefix, batch_size=batch_size
    )
    boot = {"n_boot": n_boot, "seed": seed}
    raw, normed = travel["W_E"], travel["final_norm(W_E)"]
    true, shuffled = raw.trip["true"], raw.trip["shuffled"]
    within = raw.trip["shuffled within sentence"]
    return FullSpaceTravel(
        ids=ids,
        prefix=corpus.prefix,
        n_corpus=corpus.n_s,
        d_model=model.view.d_model,
        baselines=baselines,
        travel=travel,
        steps=travel_summaries(travel, "steps", **boot),
        trips=travel_summaries(travel, "trip", **boot),
        trip=trip_difference(true, shuffled, **boot),
        trip_within=trip_difference(true, within, **boot),
        trip_normed=trip_difference(
            normed.trip["true"], normed.trip["shuffled"], **boot
        ),
        passage_null=trip_difference(within, shuffled, **boot),
        wins=win_share(true, shuffled, **boot),
        passage_wins=win_share(within, shuffled, **boot),
        block_share=positive_block_share(
            raw.steps["true"], raw.steps["shuffled"], **boot
        ),
    )


# (target table, baseline) of each difference curve of `block_travel_figure`
BLOCK_CURVES = {
    "raw W_E, shuffled": ("W_E", "shuffled"),
    "final_norm(W_E), shuffled": ("final_norm(W_E)", "shuffled"),
    "raw W_E, shuffled within sentence": ("W_E", "shuffled within sentence"),
}


def block_travel_figure(study: FullSpaceTravel, *, n_boot: int, seed: int):
    """Left: each block's mean cosine with e(next) − e(current), true and shuffled next token (raw W_E).
    Right: true − baseline per block for `BLOCK_CURVES`, with a 95% bootstrap band over pseudo-sentences
    (seaborn, `n_boot` resamples, `seed`)."""
    raw = study.blocks
    per_block = pd.concat(
        pd.DataFrame(
            {
                "block": np.tile(raw.index, len(study.ids)),
                "true − baseline": per_sentence_difference(
                    study.travel[table].steps["true"], study.travel[table].steps[kind]
                ).ravel(),
                "target, baseline": name,
            }
        )
        for name, (table, kind) in BLOCK_CURVES.items()
    )
    fig, (ax_cos, ax_diff) = plt.subplots(1, 2, figsize=(12, 4))
    ax_cos.plot(raw.index, raw["true"], marker="o", label="true next token")
    ax_cos.plot(raw.index, raw["shuffled"], marker="o", label="shuffled next token")
    ax_cos.set_yscale("symlog", linthresh=0.02)
    ax_cos.set(
        xlabel="block t+1 (update y(t) → y(t+1))",
        ylabel="mean cosine",
        title="cos(update, e(next) − e(current)), raw W_E",
    )
    ax_cos.legend()
    sns.lineplot(
        per_block,
        x="block",
        y="true − baseline",
        hue="target, baseline",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        marker="o",
        markersize=3,
        ax=ax_diff,
    )
    ax_diff.axhline(0, color="black", lw=0.8)
    ax_diff.set(
        xlabel="block t+1", title="difference, 95% bootstrap band over pseudo-sentences"
    )
    ax_diff.legend(fontsize=8)
    fig.tight_layout()
    return fig
