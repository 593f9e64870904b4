"""Chapter C1's study and figures: the probe rates of every head at every block."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from ..models.view import ModelView
from ..stats import Estimate
from ..traveling_words.probes import (
    peak_depth,
    probe_rates,
    query_estimate,
    update_norms,
)
from ..traveling_words.vocabulary import NounQueries

# the three probes, as the rate tables name them
PROBES = {"qk": "query-key", "vo_update": "update alone", "vo": "with residual"}


@dataclass(frozen=True)
class ProbeRates:
    """Probe rates over the blocks `layers`: the variant `rates` `(B, H(+1), n + m)` per probe ("qk",
    "vo_update", "vo"; row H: the sum over heads), a head's mean write against the nouns' embedding,
    mean `||u_h||` / mean `||e||` per block `(B,)`, and the seconds the probes took."""

    queries: NounQueries
    layers: list[int]
    n_heads: int
    rates: dict[str, np.ndarray]
    write: np.ndarray
    seconds: float

    @property
    def thirds(self) -> tuple[slice, slice]:
        """The first and the last third of the probed blocks (at least one block each)."""
        third = max(1, len(self.layers) // 3)
        return slice(0, third), slice(len(self.layers) - third, None)

    def per_query(self, probe: str, group: str = "nouns") -> np.ndarray:
        """`(B, H, m)`: one group's rates of every head (the sum over heads left out)."""
        return self.rates[probe][:, : self.n_heads, self.queries.groups[group]]

    def curve(self, probe: str, group: str = "nouns") -> np.ndarray:
        """`(B,)`: the rate per block, mean over heads and queries."""
        return self.per_query(probe, group).mean((1, 2))

    def head_rates(self, probe: str) -> pd.DataFrame:
        """The nouns' rate of every head: head x block."""
        return pd.DataFrame(
            self.per_query(probe).mean(2).T,
            index=pd.RangeIndex(self.n_heads, name="head"),
            columns=pd.Index(self.layers, name="block"),
        )

    def curves(self) -> pd.DataFrame:
        """Long form for the figure: probe, queries (group), block, query, rate (mean over heads)."""
        frames = []
        for probe in PROBES:
            for group in self.queries.groups:
                x = self.per_query(probe, group).mean(1)  # (B, m)
                b, q = np.meshgrid(self.layers, np.arange(x.shape[1]), indexing="ij")
                frames.append(
                    pd.DataFrame(
                        {
                            "block": b.ravel(),
                            "query": q.ravel(),
                            "rate": x.ravel(),
                            "queries": group,
                            "probe": probe,
                        }
                    )
                )
        return pd.concat(frames, ignore_index=True)

    def curve_table(self) -> pd.DataFrame:
        """Per probe, and for the sum over heads read with the residual: the nouns' rate at the first
        block, its peak and where, its means over the first and the last third of the blocks, and the
        random words' rate at the first block and over all blocks."""
        early, late = self.thirds
        # (B,) per group: the sum over heads, with the residual
        total = {
            group: self.rates["vo"][:, self.n_heads, part].mean(1)
            for group, part in self.queries.groups.items()
        }
        curves = {
            label: (self.curve(probe), self.curve(probe, "random words"))
            for probe, label in PROBES.items()
        }
        curves["sum over heads, with residual"] = tuple(total.values())
        rows = {
            label: {
                "nouns, first block": a[0],
                "nouns, peak": a.max(),
                "peak block": self.layers[int(np.argmax(a))],
                "nouns, first third": a[early].mean(),
                "nouns, last third": a[late].mean(),
                "random words, first block": b[0],
                "random words, mean": b.mean(),
            }
            for label, (a, b) in curves.items()
        }
        return pd.DataFrame(rows).T.astype({"peak block": int})

    def heads_above(self, bound: float = 0.2) -> pd.DataFrame:
        """How many heads of each block have a noun rate of at least `bound`: probe x block."""
        return pd.DataFrame(
            {
                PROBES[p]: (self.head_rates(p) >= bound).sum(axis=0)
                for p in ("qk", "vo_update")
            }
        ).T

    def estimates(
        self, n_layers: int, n_boot: int = 1000, seed: int = 0
    ) -> dict[str, object]:
        """The chapter's measured values (bootstrap intervals over the queries, `query_estimate`):
        query-key rates at the first block, over the first and last third and their difference, the
        peak (block, rate and depth over `n_layers`, `peak_depth`), the best head; the update-alone
        and with-residual rates; a head's write over the embedding."""
        estimate = partial(query_estimate, n_boot=n_boot, seed=seed)
        early, late = self.thirds
        qk, qk_random = self.per_query("qk"), self.per_query("qk", "random words")
        update = self.per_query("vo_update")
        peak = peak_depth(qk.mean(1), self.layers, n_layers, n_boot=n_boot, seed=seed)
        curve_qk, curve_update = self.curve("qk"), self.curve("vo_update")

        def contrast(x: np.ndarray, unit: str) -> Estimate:
            return estimate(x[early].mean((0, 1)) - x[late].mean((0, 1)), unit=unit)

        return {
            "qk_rate_first_block": estimate(qk[0]),
            "qk_baseline_first_block": estimate(qk_random[0], unit="random words"),
            "qk_rate_early": estimate(qk[early]),
            "qk_baseline_early": estimate(qk_random[early], unit="random words"),
            "qk_rate_late": estimate(qk[late]),
            "qk_early_minus_late": contrast(qk, "nouns"),
            "qk_early_minus_late_baseline": contrast(qk_random, "random words"),
            "qk_peak_block": self.layers[int(np.argmax(curve_qk))],
            "qk_peak_rate": curve_qk.max(),
            "qk_peak_depth": peak
            if np.isfinite(peak.value)
            else "no peak: the rate is zero at every probed block",
            "qk_best_head_rate": estimate(qk, best_head=True),
            "vo_update_rate_first_block": estimate(update[0]),
            "vo_update_peak_block": self.layers[int(np.argmax(curve_update))],
            "vo_update_peak_rate": curve_update.max(),
            "vo_update_best_head_rate_all_blocks": estimate(update, best_head=True),
            "vo_update_best_head_rate_baseline": estimate(
                self.per_query("vo_update", "random words"),
                best_head=True,
                unit="random words",
            ),
            "vo_residual_rate_mean": estimate(self.per_query("vo")),
            "vo_residual_baseline_mean": estimate(
                self.per_query("vo", "random words"), unit="random words"
            ),
            "write_over_embedding_first": self.write[0],
            "write_over_embedding_median": np.median(self.write),
        }


@torch.no_grad()
def probe_rates_by_block(
    view: ModelView, queries: NounQueries, layers: list[int], k: int = 5
) -> ProbeRates:
    """The probe rates of every query at every block of `layers` (`probe_rates`), timed, and a head's
    mean write `||u_h||` over the nouns' mean `||e||` per block (`ProbeRates`)."""
    start = time.perf_counter()
    rates = probe_rates(view, layers, queries.ids, queries.mask, k)
    seconds = time.perf_counter() - start
    e_norm = view.embed(queries.nouns.ids).norm(dim=-1).mean().item()
    H, nouns = view.n_heads, queries.nouns.ids
    write = np.array(
        [update_norms(view, layer, nouns)[:H].mean().item() for layer in layers]
    )
    return ProbeRates(queries, list(layers), H, rates, write / e_norm, seconds)


RATE_TITLES = {
    "qk": "query-key: keys a head seeks",
    "vo_update": "value: the head's update alone",
    "vo": "value: residual + update (paper's readout)",
}


def rate_curves(result: ProbeRates, n_boot: int, seed: int, title: str):
    """C1: one panel per probe, the rate per block for the nouns and the random words (bands: 95%
    bootstrap over queries), the nouns' best head (dotted) and chance (grey)."""
    curves = result.curves().replace({"probe": RATE_TITLES})
    grid = sns.relplot(
        curves,
        kind="line",
        x="block",
        y="rate",
        hue="queries",
        col="probe",
        marker="o",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        height=3.6,
        aspect=1.2,
        facet_kws={"sharey": False},
    )
    for probe, ax in zip(RATE_TITLES, grid.axes.flat):
        best = result.per_query(probe).mean(2).max(1)
        ax.plot(result.layers, best, ":", color="k", label="nouns, best head")
        ax.axhline(result.queries.chance, color="grey", lw=0.8, label="chance")
        ax.set(ylabel="rate")
    grid.axes.flat[0].legend(fontsize=8)
    grid.set_titles("{col_name}")
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


def head_rate_maps(result: ProbeRates):
    """C1: the nouns' rate of every head (rows) at every block (columns), query-key and update alone."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 0.35 * result.n_heads + 1.5))
    for ax, probe in zip(axes, ("qk", "vo_update")):
        sns.heatmap(
            result.head_rates(probe),
            ax=ax,
            cmap="viridis",
            vmin=0,
            cbar_kws={"label": "rate"},
        )
        ax.set(title=f"{PROBES[probe]}: noun rate per head")
    fig.tight_layout()
    return fig
