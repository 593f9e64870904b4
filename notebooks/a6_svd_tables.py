# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A6 · What the heads' singular directions say in words
#
# **What you will see.** Each attention head's two matrices, W_QK^h (which query aligns with which
# key) and W_VO^h (what a head writes for what it reads), taken apart by singular value
# decomposition. Each of the top 20 singular directions becomes a pair of three-token lists: the
# tokens closest to its input side and to its output side. Then, for every head, the cumulative
# share of the singular values, which shows that each matrix lives in at most d_head of the d
# dimensions: the rest is a null space.
#
# **Why it matters.** "Traveling Words" (Molina, 2023) argues that attention acts on the sphere of
# normalized embeddings through these two d × d matrices. Their SVD lists the few directions a head
# cares about: W = Σ_i s_i u_i v_i^T, so a state x contributes (x · u_i) s_i along v_i. If the
# geometric reading holds, the u_i and v_i should be readable as tokens. Because W_QK^h = W_Q^h
# W_K^h^T and W_VO^h = W_V^h W_O^h factor through d_head, their rank is at most d_head < d: a head
# ignores every direction in its null space.
#
# **How it is computed** (`lotlib.traveling_words.head_svd.head_svd`, `svd_table`, following the authors'
# `svd_analysis.py`). The SVD is exact and cheap: with W = A B^T (A, B of shape d × d_head), QR
# factorizations A = Q_a R_a, B = Q_b R_b leave only a d_head × d_head core to decompose; the
# other d − d_head singular values are exactly zero.
#
# - **Token sides.** QK: left (query side) and right (key side) are both scored against
#   block_norm(W_E), the embeddings on the block's sphere. VO: left (what the head reads) against
#   block_norm(W_E), right (what it writes) against the raw readout rows: W_E when the embeddings
#   are tied (the paper), W_U when they are not. Top-3 tokens by dot product on each side.
# - **Signs.** A singular pair (u_i, v_i) is defined up to a common sign. As in the authors' code,
#   each pair is flipped so that the right vector's best token match is on its positive side
#   (max_v v_i · row_v ≥ max_v −v_i · row_v); the left vector flips with it, so W is unchanged.
# - **Coverage.** cumsum(s) / sum(s) over ranks 1..d (singular values, not their squares, as the
#   authors plot them).
#
# **This model is not GPT-2** (d = 768, d_head = 64, twelve heads with their own keys and values,
# LayerNorm). Grouped-query attention (SmolLM2: 3 key/value heads for 9 query heads) is expanded by
# the model view: query heads in a group share W_K and W_V, so their W_QK^h share the right
# singular space and their W_VO^h the left one. RMSNorm does not center, so block_norm(W_E) lies on
# the sphere but not on the hyperplane orthogonal to the ones vector. Gemma 3's per-head q/k norms
# make the query-key score nonlinear; W_QK^h then describes the score only up to those norms.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks (None: first, (L - 1) // 2, last)
n_dirs: int = 20  # singular directions per head in the tables
k: int = 3  # tokens per side of each direction
show_heads: list[int] = [
    0,
    3,
]  # heads whose tables are shown in full (the rest are folded away)
seed: int = 0  # the bootstrap resamples
n_boot: int = 1000  # bootstrap resamples of the heads for every interval

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import HTML, display

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes
from lotlib.book.summary import record
from lotlib.intervals import bootstrap, bootstrap_mean, exact
from lotlib.models.bounds import block_indices
from lotlib.traveling_words import head_svd, probes

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
L, H, d, dh = view.n_layers, view.n_heads, view.d_model, view.d_head
layers = (
    [0, (L - 1) // 2, L - 1]
    if blocks is None
    else block_indices(blocks, L, "blocks", lm.name)
)
vocab = probes.vocab_strings(lm.tokenizer, view.vocab_size)
readout = "W_E (tied)" if view.tied else "W_U (untied)"
print(
    f"{lm!r}: d = {d}, d_head = {dh}, {view.heads(0).n_kv_heads} key/value heads for {H} query heads; "
    f"VO right side read against {readout}; blocks {layers}"
)

# %%
tables = pd.concat(
    [
        head_svd.svd_table(view, vocab, layer, kind, n_dirs, k)
        for layer in layers
        for kind in ("qk", "vo")
    ],
    ignore_index=True,
)


def side_by_side(block: int, head: int) -> pd.DataFrame:
    """QK and VO directions of one head next to each other: sigma, left tokens, right tokens."""
    part = tables[(tables.block == block) & (tables["head"] == head)]
    wide = part.pivot_table(
        index="direction",
        columns="matrix",
        values=["sigma", "left", "right"],
        aggfunc="first",
    )
    return wide.swaplevel(axis=1).sort_index(axis=1, level=0)[
        [(m, c) for m in ("QK", "VO") for c in ("sigma", "left", "right")]
    ]


pd.set_option("display.max_colwidth", None)
for block in layers:
    for head in [h for h in show_heads if h < H]:
        display(HTML(f"<h4>Block {block}, head {head}</h4>"))
        display(
            side_by_side(block, head).style.format(
                {("QK", "sigma"): "{:.3g}", ("VO", "sigma"): "{:.3g}"}
            )
        )

# %% [markdown]
# **What to notice.** Each row is one singular direction, strongest first. A readable direction
# has three tokens that belong together (one word in several forms, a topic, a syntactic class) on
# one side or both; an unreadable one lists rare or broken tokens. For VO, the left side says what
# the head reads and the right side what it writes: when both sides show the same word, the
# direction copies; when they differ, it maps one kind of token to another.
#
# How often do the two sides share a token (up to case and spaces)? For QK that is a direction
# along which a token attends to itself; for VO, a direction that copies what it reads:

# %%
shared = tables.groupby(["block", "matrix"])["shared"].mean().unstack()
display(shared.round(3))
print(
    f"share of the top-{n_dirs} directions whose two sides share a token, over all heads: "
    + ", ".join(
        f"block {b}: QK {shared.loc[b, 'QK']:.2f}, VO {shared.loc[b, 'VO']:.2f}"
        for b in layers
    )
)

# %% [markdown]
# Every head of the probed blocks (also in the DataFrame `tables`):

# %%
for block in layers:
    for kind in ("QK", "VO"):
        part = tables[(tables.block == block) & (tables.matrix == kind)]
        wide = part.pivot_table(
            index="direction", columns="head", values=["left", "right"], aggfunc="first"
        )
        wide = wide.swaplevel(axis=1).sort_index(axis=1, level=0)
        display(
            HTML(
                f"<details><summary>Block {block}, W_{kind}: top-{n_dirs} directions of all {H} heads "
                f"(left | right)</summary>{wide.to_html()}</details>"
            )
        )

# %% [markdown]
# ## Singular-value coverage and the null space

# %%
S = {
    (layer, kind): head_svd.head_svd(view, layer, kind)[1]
    for layer in layers
    for kind in ("qk", "vo")
}
ranks = np.arange(1, d + 1)
curves = pd.concat(
    [
        pd.DataFrame(
            {
                "rank": np.tile(ranks, H),
                "coverage": head_svd.coverage(S[layer, kind], d).ravel(),
                "head": np.repeat(np.arange(H), d),
                "block": layer,
                "matrix": f"W_{kind.upper()}",
            }
        )
        for layer in layers
        for kind in ("qk", "vo")
    ],
    ignore_index=True,
)
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
    ax.axvline(dh, color="k", ls="--", lw=0.8)
    ax.set(xscale="log")
grid.set_titles("block {col_name}, {row_name}")
grid.figure.suptitle(
    f"Cumulative singular-value coverage per head, {model} (dashed: d_head = {dh}; the null "
    f"space starts there)",
    y=1.02,
)
plt.show()


def rank_at(share: float, layer: int, kind: str) -> np.ndarray:
    """Smallest rank whose coverage reaches `share`, per head."""
    return 1 + np.argmax(head_svd.coverage(S[layer, kind], d) >= share - 1e-12, axis=1)


for layer in layers:
    for kind in ("qk", "vo"):
        r90, r99 = rank_at(0.9, layer, kind), rank_at(0.99, layer, kind)
        print(
            f"block {layer:>2} W_{kind.upper()}: rank for 90% of the singular-value sum, per head {r90.tolist()}; "
            f"for 99%: median {int(np.median(r99))} of d_head = {dh}"
        )

# %% [markdown]
# The exact SVD above has exactly d_head nonzero singular values by construction. To check the
# shortcut, the full d × d matrix of every head of the probed blocks is formed in float64 from the
# stored factors and decomposed directly; its numerical rank counts the singular values above d times
# float64's epsilon (relative to the largest), the tolerance of numpy's `matrix_rank`:

# %%
rows = []
for layer in layers:
    for kind in ("qk", "vo"):
        s = head_svd.direct_singular_values(
            view, layer, kind
        )  # (H, d), over the largest
        rows += [
            {
                "block": layer,
                "matrix": f"W_{kind.upper()}",
                "head": h,
                "rank": int(r),
                "s_d_head": s[h, dh - 1].item(),
                "gap": s[h, dh].item(),
            }
            for h, r in enumerate(head_svd.numerical_rank(s))
        ]
gaps = pd.DataFrame(rows)
display(
    gaps.groupby(["block", "matrix"]).agg(
        max_rank=("rank", "max"),
        min_s_d_head=("s_d_head", "min"),
        max_gap=("gap", "max"),
    )
)
print(
    f"{len(gaps)} head matrices of {d} x {d}: numerical rank at most {gaps['rank'].max()} (d_head = {dh}); "
    f"largest s_(d_head+1) / s_1 = {gaps.gap.max():.1e}, smallest s_(d_head) / s_1 = {gaps.s_d_head.min():.1e}"
)

# %% [markdown]
# **What to notice.** Every curve reaches 1 at rank d_head (dashed line) and stays flat: the other
# d − d_head directions are the head's null space, and the direct decomposition puts the first
# singular value past d_head at round-off level while the d_head-th is far above it. How fast a
# curve rises before d_head tells how many directions a head really uses: a curve that reaches 90%
# at a small rank is a head with a few dominant directions, the ones worth reading in the tables.
#
# ## Does the claim hold on this model?
#
# Two kinds of claim. **The null space is an identity**: W_QK^h = W_Q^h W_K^h^T and W_VO^h = W_V^h
# W_O^h factor through d_head for any weights, so rank ≤ d_head < d holds on a random model as on a
# trained one; the two checks (numerical rank ≤ d_head for every head; largest s_(d_head+1) / s_1 at
# most 1e-6) test that our head matrices are the products the model computes, not the paper. **The
# coverage and copying values describe the trained heads** and carry no verdict: the paper shows them
# as curves and tables without a number to hold them against. Their intervals resample the heads of
# the probed blocks (`n_boot` bootstrap resamples, seeded): how much the median or the share would
# move with other heads like these.

# %%
r99 = {
    kind: np.concatenate([rank_at(0.99, layer, kind) for layer in layers])
    for kind in ("qk", "vo")
}


def median_share(ranks: np.ndarray):
    """Median rank over heads as a share of d_head, bootstrap over heads."""
    return bootstrap(
        lambda i: np.median(ranks[i]) / dh,
        len(ranks),
        unit="heads",
        n_boot=n_boot,
        seed=seed,
    )


def shared_share(block: int, matrix: str):
    """Share of a block's top directions whose two sides share a token, bootstrap over heads."""
    per_head = (
        tables[(tables.block == block) & (tables.matrix == matrix)]
        .groupby("head")["shared"]
        .mean()
    )
    return bootstrap_mean(per_head.to_numpy(), unit="heads", n_boot=n_boot, seed=seed)


values = {
    "model": model,
    "blocks": ", ".join(map(str, layers)),
    "d_model": d,
    "d_head": dh,
    "n_dirs": n_dirs,
    "k": k,
    "null_space_dim": d - dh,
    "max_numerical_rank": int(gaps["rank"].max()),
    "null_space_verified": bool(gaps["rank"].max() <= dh),
    "max_gap_after_d_head": exact(gaps.gap.max(), len(gaps), "head matrices"),
    "qk_rank99_median": np.median(r99["qk"]),
    "vo_rank99_median": np.median(r99["vo"]),
    "qk_rank99_over_d_head": median_share(r99["qk"]),
    "vo_rank99_over_d_head": median_share(r99["vo"]),
    "qk_rank90_median_first": np.median(rank_at(0.9, layers[0], "qk")),
    "vo_rank90_median_first": np.median(rank_at(0.9, layers[0], "vo")),
    "qk_rank90_median_last": np.median(rank_at(0.9, layers[-1], "qk")),
    "vo_rank90_median_last": np.median(rank_at(0.9, layers[-1], "vo")),
    "qk_shared_first": shared_share(layers[0], "QK"),
    "qk_shared_last": shared_share(layers[-1], "QK"),
    "vo_shared_first": shared_share(layers[0], "VO"),
    "vo_shared_last": shared_share(layers[-1], "VO"),
}
print(
    f"rank <= d_head = {dh} < d = {d}: numerical rank at most {values['max_numerical_rank']} over {len(gaps)} "
    f"head matrices, null space of dimension {d - dh} in every head -> the identity "
    f"{'holds' if values['null_space_verified'] else 'fails'}"
)
print(
    f"median rank for 99% coverage as a share of d_head: W_QK {values['qk_rank99_over_d_head']:.2f}, "
    f"W_VO {values['vo_rank99_over_d_head']:.2f}; copying VO directions in the last block: "
    f"{values['vo_shared_last']:.2f}"
)
display(chapter_outcomes("a6_svd_tables", values))
record(values)
