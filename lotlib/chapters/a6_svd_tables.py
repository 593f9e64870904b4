"""Chapter A6's values and figures: the SVD tables of every head, their coverage and the null-space check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import HTML

from ..plots import block_tables, folded
from ..stats import Estimate, bootstrap, bootstrap_mean, exact
from ..traveling_words import head_svd
from ..traveling_words.head_svd import Spectra


def svd_values(
    tables: pd.DataFrame,
    spec: Spectra,
    gaps: pd.DataFrame,
    d_head: int,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, object]:
    """The chapter's measured values: the null-space identity (largest numerical rank, whether it is at
    most d_head, the largest gap), the median rank for 99% coverage (over d_head: a bootstrap over the
    heads of the probed blocks), the median rank for 90% at the first and last block, and the share of
    copying directions (`shared`) at the first and last block, a bootstrap over heads."""
    first, last = spec.layers[0], spec.layers[-1]

    def median_share(ranks: np.ndarray) -> Estimate:
        return bootstrap(
            lambda i: np.median(ranks[i]) / d_head,
            len(ranks),
            unit="heads",
            n_boot=n_boot,
            seed=seed,
        )

    def shared_share(block: int, matrix: str) -> Estimate:
        part = tables[(tables.block == block) & (tables.matrix == matrix)]
        per_head = part.groupby("head")["shared"].mean().to_numpy()
        return bootstrap_mean(per_head, unit="heads", n_boot=n_boot, seed=seed)

    qk, vo = (
        np.concatenate([spec.rank_at(0.99, layer, kind) for layer in spec.layers])
        for kind in ("qk", "vo")
    )
    return {
        "d_model": spec.d,
        "d_head": d_head,
        "null_space_dim": spec.d - d_head,
        "max_numerical_rank": int(gaps["rank"].max()),
        "null_space_verified": bool(gaps["rank"].max() <= d_head),
        "max_gap_after_d_head": exact(gaps.gap.max(), len(gaps), "head matrices"),
        "qk_rank99_median": np.median(qk),
        "vo_rank99_median": np.median(vo),
        "qk_rank99_over_d_head": median_share(qk),
        "vo_rank99_over_d_head": median_share(vo),
        "qk_rank90_median_first": np.median(spec.rank_at(0.9, first, "qk")),
        "vo_rank90_median_first": np.median(spec.rank_at(0.9, first, "vo")),
        "qk_rank90_median_last": np.median(spec.rank_at(0.9, last, "qk")),
        "vo_rank90_median_last": np.median(spec.rank_at(0.9, last, "vo")),
        "qk_shared_first": shared_share(first, "QK"),
        "vo_shared_first": shared_share(first, "VO"),
        "qk_shared_last": shared_share(last, "QK"),
        "vo_shared_last": shared_share(last, "VO"),
    }


def svd_side_by_side(tables: pd.DataFrame, layers: list[int], heads: list[int]) -> HTML:
    """A6: for each block and each of `heads`, its QK and VO directions side by side
    (`head_svd.side_by_side`)."""
    sigma = {("QK", "sigma"): "{:.3g}", ("VO", "sigma"): "{:.3g}"}
    n_heads = tables["head"].max() + 1
    return block_tables(
        {
            f"Block {b}, head {h}": head_svd.side_by_side(tables, b, h).style.format(
                sigma
            )
            for b in layers
            for h in heads
            if h < n_heads
        }
    )


def svd_all_heads(tables: pd.DataFrame) -> HTML:
    """A6: every head's directions (`head_svd.all_heads`), one folded table per block and matrix."""
    n_dirs, n_heads = tables.direction.max() + 1, tables["head"].max() + 1
    return HTML(
        "".join(
            folded(
                f"Block {b}, W_{m}: top-{n_dirs} directions of all {n_heads} heads "
                "(left | right)",
                head_svd.all_heads(tables, b, m),
            ).data
            for b in tables.block.unique()
            for m in ("QK", "VO")
        )
    )


def svd_coverage(curves: pd.DataFrame, d_head: int, title: str):
    """A6: cumulative singular-value coverage per head (`head_svd.Spectra.coverage_frame`), one panel per matrix
    and block, log rank axis, dashed at d_head where the null space starts."""
    grid = sns.relplot(
        curves,
        kind="line",
        x="rank",
        y="coverage",
        hue="head",
        row="matrix",
        col="block",
        palette="viridis",
        legend="full",
        height=3,
        aspect=1.3,
        lw=1,
    )
    for ax in grid.axes.flat:
        ax.axvline(d_head, color="k", ls="--", lw=0.8)
        ax.set(xscale="log")
    grid.set_titles("block {col_name}, {row_name}")
    grid.figure.suptitle(title, y=1.02)
    return grid.figure
