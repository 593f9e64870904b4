"""Chapter A4/A5's study and figure: what heads seek and write for common nouns, against random words."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import seaborn as sns
import torch
from torch import Tensor

from ..models.view import ModelView
from ..traveling_words.probes import (
    key_specificity,
    noun_table,
    probe_tops,
    query_estimate,
    variant_rates,
)
from ..traveling_words.vocabulary import NounQueries


def _by_block(values: dict[int, float], layers: list[int]) -> dict[str, float]:
    """The first and the last probed block's value, as `{"first": ..., "last": ...}`."""
    return {"first": values[layers[0]], "last": values[layers[-1]]}


@dataclass(frozen=True)
class NounProbes:
    """A4/A5 over a query set at the probed `layers`: the top-k ids of the three probes for every query
    (`tops`, as `probe_tops`), the nouns' `table` (`noun_table`), the variant `rates` `(B, H(+1), n + m)`
    per probe, the key `specificity` `(B, H, m)` per group of queries, and the mean `||e||` of the nouns."""

    queries: NounQueries
    layers: list[int]
    k: int
    n_heads: int
    tops: dict[str, Tensor]
    table: pd.DataFrame
    rates: dict[str, np.ndarray]
    specificity: dict[str, np.ndarray]
    embedding_norm: float

    def measures(self) -> dict[str, dict[str, np.ndarray]]:
        """Per group of queries, the three per-head measures `(B, H, m)`."""
        H = self.n_heads
        return {
            group: {
                "QK variant rate": self.rates["qk"][:, :, part],
                "QK key specificity": self.specificity[group],
                "VO update variant rate": self.rates["vo_update"][:, :H, part],
            }
            for group, part in self.queries.groups.items()
        }

    def per_head(self) -> pd.DataFrame:
        """The measures in long form: block, head, query, value, queries (group), measure."""
        frames = []
        for group, by_measure in self.measures().items():
            for measure, x in by_measure.items():
                b, h, q = np.meshgrid(
                    self.layers,
                    np.arange(x.shape[1]),
                    np.arange(x.shape[-1]),
                    indexing="ij",
                )
                frames.append(
                    pd.DataFrame(
                        {
                            "block": b.ravel(),
                            "head": h.ravel(),
                            "query": q.ravel(),
                            "value": x.ravel(),
                            "queries": group,
                            "measure": measure,
                        }
                    )
                )
        return pd.concat(frames, ignore_index=True)

    def measure_means(self) -> pd.DataFrame:
        """Each measure's mean over heads and queries: (measure, queries) x block."""
        frame = self.per_head()
        return (
            frame.groupby(["measure", "queries", "block"])["value"]
            .mean()
            .unstack("block")
        )

    def readable(self, block: int, shown: list[str]) -> pd.DataFrame:
        """The `shown` nouns (those that are queries) x every head and the sum of one block: the top-k
        tokens of each probe and `||u_h||`."""
        shown = [w for w in shown if w in self.queries.nouns.words]
        part = self.table[(self.table.block == block) & self.table.noun.isin(shown)]
        wide = part.pivot_table(
            index=["noun", "head"], columns="probe", values="tokens", aggfunc="first"
        )
        norms = part[part.probe == "VO"].set_index(["noun", "head"])["norm"]
        order = pd.MultiIndex.from_product(
            [shown, [str(h) for h in range(self.n_heads)] + ["sum"]],
            names=["noun", "head"],
        )
        return (
            wide.join(norms.rename("||u_h||"))
            .reindex(order)
            .fillna({"QK": ""})[["QK", "VO", "VO update", "||u_h||"]]
        )

    def wide(self, probe: str) -> pd.DataFrame:
        """The full table of one probe ("QK", "VO", "VO update"): (block, noun) x head."""
        part = self.table[self.table.probe == probe]
        wide = part.pivot_table(
            index=["block", "noun"],
            columns="head",
            values="tokens",
            aggfunc="first",
            sort=False,
        )
        extra = ["sum"] if probe != "QK" else []
        return wide[[str(h) for h in range(self.n_heads)] + extra]

    def head_summary(self) -> pd.DataFrame:
        """Per block, probe and head: the most common top-1 token over the nouns, the share of nouns
        with it, the number of distinct top-1 tokens, the self rate (variants among the top-k) and the
        mean `||u_h||`."""
        grouped = self.table.groupby(["block", "probe", "head"], sort=False)
        return pd.DataFrame(
            {
                "most common top-1": grouped["top1"].agg(lambda s: s.mode().iloc[0]),
                "share with it": grouped["top1"].agg(
                    lambda s: s.value_counts(normalize=True).iloc[0]
                ),
                "distinct top-1": grouped["top1"].nunique(),
                "self rate": grouped["matches"].mean() / self.k,
                "mean ||u_h||": grouped["norm"].mean(),
            }
        ).reset_index()

    def common_key_share(self) -> pd.Series:
        """Per block, the share of nouns whose top key is the head's most common one, mean over heads."""
        summary = self.head_summary()
        qk = summary[(summary["head"] != "sum") & (summary.probe == "QK")]
        return qk.groupby("block")["share with it"].mean()

    def sum_self_rate(self) -> pd.Series:
        """Per block, the self rate of the sum over heads read with the residual (VO, head "sum")."""
        summary = self.head_summary()
        rows = summary[(summary["head"] == "sum") & (summary.probe == "VO")]
        return rows.set_index("block")["self rate"]

    def best_vo_update_head(self) -> tuple[int, int]:
        """(block, head) of the head with the largest VO update variant rate over the nouns."""
        noun_rates = self.rates["vo_update"][:, : self.n_heads, : self.queries.n]
        b, h = np.unravel_index(noun_rates.mean(-1).argmax(), noun_rates.shape[:2])
        return self.layers[int(b)], int(h)

    def estimates(self, n_boot: int = 1000, seed: int = 0) -> dict[str, object]:
        """The chapter's measured values: each claim's value on the nouns and on the random words
        (`query_estimate`, bootstrap over queries), and the first and last block's common-key share
        and self rate of the sum over heads."""
        H, groups = self.n_heads, self.queries.groups
        noun_q, random_q = groups["nouns"], groups["random words"]
        estimate = partial(query_estimate, n_boot=n_boot, seed=seed)
        qk, update, spec = self.rates["qk"], self.rates["vo_update"], self.specificity
        share = _by_block(self.common_key_share(), self.layers)
        sum_rate = _by_block(self.sum_self_rate(), self.layers)
        return {
            "qk_rate_best_head_first": estimate(qk[0, :, noun_q], best_head=True),
            "qk_rate_best_head_first_random": estimate(
                qk[0, :, random_q], best_head=True, unit="random words"
            ),
            "qk_rate_first": estimate(qk[0, :, noun_q]),
            "qk_rate_last": estimate(qk[-1, :, noun_q]),
            "qk_specificity_first": estimate(spec["nouns"][0]),
            "qk_specificity_first_random": estimate(
                spec["random words"][0], unit="random words"
            ),
            "qk_specificity_last": estimate(spec["nouns"][-1]),
            "qk_specificity_last_random": estimate(
                spec["random words"][-1], unit="random words"
            ),
            "vo_update_best_head_rate": estimate(update[:, :H, noun_q], best_head=True),
            "vo_update_best_head_rate_random": estimate(
                update[:, :H, random_q], best_head=True, unit="random words"
            ),
            "qk_common_key_share_first": share["first"],
            "qk_common_key_share_last": share["last"],
            "vo_sum_self_rate_first": sum_rate["first"],
            "vo_sum_self_rate_last": sum_rate["last"],
        }


@torch.no_grad()
def noun_probes(
    view: ModelView, queries: NounQueries, layers: list[int], k: int = 5
) -> NounProbes:
    """A4/A5: the three probes of every query (nouns and random words) at `layers`, the nouns' table,
    the variant rates and the key specificity of each group (`NounProbes`)."""
    ids, n = queries.ids, queries.n
    tops = probe_tops(view, layers, ids, k)
    nouns_only = {name: top[:, :, :n] for name, top in tops.items()}
    specificity = {
        group: np.stack(
            [
                key_specificity(view, layer, ids[part], tops["qk"][b][:, part])
                for b, layer in enumerate(layers)
            ]
        )
        for group, part in queries.groups.items()
    }
    return NounProbes(
        queries=queries,
        layers=list(layers),
        k=k,
        n_heads=view.n_heads,
        tops=tops,
        table=noun_table(view, queries.vocab, queries.nouns, layers, k, nouns_only),
        rates={name: variant_rates(queries.mask, top) for name, top in tops.items()},
        specificity=specificity,
        embedding_norm=view.embed(queries.nouns.ids).norm(dim=-1).mean().item(),
    )


def noun_measures(result: NounProbes, n_boot: int, seed: int, title: str):
    """A4/A5: the three per-head measures (rows) at each probed block (columns), bars for the nouns and
    the random words with 95% bootstrap intervals over queries; dashed: specificity 0.5."""
    grid = sns.catplot(
        result.per_head(),
        kind="bar",
        x="head",
        y="value",
        hue="queries",
        row="measure",
        col="block",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        height=2.6,
        aspect=1.9,
        sharey="row",
    )
    grid.set_titles("block {col_name}")
    for (measure, block), ax in grid.axes_dict.items():
        ax.set_ylabel(measure if block == result.layers[0] else "")
        if measure == "QK key specificity":
            ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    grid.figure.suptitle(title, y=1.02)
    return grid.figure
