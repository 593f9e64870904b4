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
# decomposition. Each of the top singular directions becomes a pair of three-token lists: the
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
# :::{dropdown} How it is computed
# Following the authors' `svd_analysis.py`. The SVD is exact and cheap: with
# W = A B^T (A, B of shape d × d_head), QR factorizations A = Q_a R_a, B = Q_b R_b leave only a
# d_head × d_head core to decompose; the other d − d_head singular values are exactly zero.
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
# **Where a model differs from GPT-2** (d = 768, d_head = 64, twelve heads with their own keys and
# values, LayerNorm). Grouped-query attention (this model: {glue:text}`n_kv_heads` key/value heads
# for {glue:text}`n_heads` query heads) is expanded by the model view: query heads in a group share W_K and W_V, so their W_QK^h share the right
# singular space and their W_VO^h the left one. RMSNorm does not center, so block_norm(W_E) lies on
# the sphere but not on the hyperplane orthogonal to the ones vector. Gemma 3's per-head q/k norms
# make the query-key score nonlinear; W_QK^h then describes the score only up to those norms.
#
# **Code:** `lotlib.traveling_words.head_svd` (`head_svd`, `svd_tables`, `spectra`, `null_space_check`);
# the chapter's values, `lotlib.chapters.a6_svd_tables.svd_values`.
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks (None: first, (L - 1) // 2, last)
n_dirs: int = 20  # singular directions per head in the tables
k: int = 3  # tokens per side of each direction
show_heads: list[int] = [0, 3]  # heads whose tables are shown in full
seed: int = 0  # the bootstrap resamples
n_boot: "Count" = 1000  # bootstrap resamples of the heads for every interval

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display
from lotlib import plots
from lotlib.chapters import a6_svd_tables as a6
from lotlib.models.bounds import block_indices
from lotlib.summary import glue
from lotlib.traveling_words import head_svd, vocabulary
from lotlib.verdicts import conclude

plots.apply_theme()
pd.set_option("display.max_colwidth", None)
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
L, H, d, dh = view.n_layers, view.n_heads, view.d_model, view.d_head
layers = block_indices(blocks or ["first", "middle", "last"], L, "blocks", lm.name)
vocab = vocabulary.vocab_strings(lm.tokenizer, view.vocab_size)
glue("model_text", repr(lm))
glue("n_kv_heads", view.heads(0).n_kv_heads)
glue("n_heads", H)
glue("readout", view.facts()["readout_text"])

# %% [markdown]
# **The model.** {glue:text}`model_text`: d = {glue:text}`d_model`, d_head =
# {glue:text}`d_head`, {glue:text}`n_kv_heads` key/value heads for {glue:text}`n_heads` query
# heads; the VO right side is read against {glue:text}`readout`. Probed blocks:
# {glue:text}`blocks`. For the heads of `show_heads`, the top {glue:text}`n_dirs` directions of
# both matrices side by side: sigma, then the top-{glue:text}`k` tokens of each side.

# %%
tables = head_svd.svd_tables(view, vocab, layers, n_dirs, k)
a6.svd_side_by_side(tables, layers, show_heads)

# %% [markdown]
# **What to notice.** Each row is one singular direction, strongest first. A readable direction
# has three tokens that belong together (one word in several forms, a topic, a syntactic class) on
# one side or both; an unreadable one lists rare or broken tokens. For VO, the left side says what
# the head reads and the right side what it writes: when both sides show the same word, the
# direction copies; when they differ, it maps one kind of token to another.
#
# How often do the two sides share a token (up to case and spaces)? For QK that is a direction
# along which a token attends to itself; for VO, a direction that copies what it reads. The share
# over all heads of each block, then every head's directions folded away (also in the DataFrame
# `tables`):

# %%
display(tables.groupby(["block", "matrix"])["shared"].mean().unstack().round(3))
a6.svd_all_heads(tables)

# %% [markdown]
# **What to notice.** The copying share of the last block's W_VO, {glue:text}`vo_shared_last`
# (interval over heads), against {glue:text}`vo_shared_first` at the first block; for W_QK,
# {glue:text}`qk_shared_first` at the first block and {glue:text}`qk_shared_last` at the last.
#
# ## Singular-value coverage and the null space
#
# Under the figure, per block and matrix, the rank that reaches 90% of the singular-value sum in
# each head and the median rank that reaches 99%.

# %%
spec = head_svd.spectra(view, layers)
title = (
    f"Cumulative singular-value coverage per head, {model} (dashed: d_head = {dh}; "
    "the null space starts there)"
)
a6.svd_coverage(spec.coverage_frame(), dh, title)
plt.show()
spec.rank_table()

# %% [markdown]
# The exact SVD above has exactly d_head nonzero singular values by construction. To check the
# shortcut, the full d × d matrix of every head of the probed blocks is formed in float64 from the
# stored factors and decomposed directly; its numerical rank counts the singular values above d times
# float64's epsilon (relative to the largest), the tolerance of numpy's `matrix_rank`:

# %%
gaps = head_svd.null_space_check(view, layers)
glue("n_matrices", len(gaps))
glue("min_s_d_head", gaps.s_d_head.min())
gaps.groupby(["block", "matrix"]).agg(
    max_rank=("rank", "max"),
    min_s_d_head=("s_d_head", "min"),
    max_gap=("gap", "max"),
)

# %% [markdown]
# **What to notice.** Every curve reaches 1 at rank d_head (dashed line) and stays flat: the other
# d − d_head = {glue:text}`null_space_dim` directions are the head's null space. Over the
# {glue:text}`n_matrices` head matrices of {glue:text}`d_model` × {glue:text}`d_model`, the
# numerical rank is at most {glue:text}`max_numerical_rank` (d_head = {glue:text}`d_head`); the
# first singular value past d_head is at most {glue:text}`max_gap_after_d_head` of the largest,
# and the d_head-th at least {glue:text}`min_s_d_head:.1e`. How fast a curve rises before d_head
# tells how many directions a head really uses: a curve that reaches 90% at a small rank is a head
# with a few dominant directions, the ones worth reading in the tables. The median rank for 90% is
# {glue:text}`qk_rank90_median_first:g` (W_QK) and {glue:text}`vo_rank90_median_first:g` (W_VO) at
# the first block, {glue:text}`qk_rank90_median_last:g` and {glue:text}`vo_rank90_median_last:g` at
# the last.
#
# ## Does the claim hold on this model?
#
# Two kinds of claim. **The null space is an identity**: W_QK^h = W_Q^h W_K^h^T and W_VO^h = W_V^h
# W_O^h factor through d_head for any weights, so rank ≤ d_head < d holds on a random model as on a
# trained one; the two checks (numerical rank ≤ d_head for every head; largest s_(d_head+1) / s_1 at
# most 1e-6) test that our head matrices are the products the model computes, not the paper. **The
# coverage and copying values describe the trained heads** and carry no verdict: the paper shows them
# as curves and tables without a number to hold them against.
#
# Their intervals resample the heads of
# the probed blocks (`n_boot` bootstrap resamples, seeded): how much the median or the share would
# move with other heads like these. The median rank for 99% coverage as a share of d_head is
# {glue:text}`qk_rank99_over_d_head` for W_QK and {glue:text}`vo_rank99_over_d_head` for W_VO.

# %%
values = {
    "model": model,
    "blocks": ", ".join(map(str, layers)),
    "n_dirs": n_dirs,
    "k": k,
    **a6.svd_values(tables, spec, gaps, dh, n_boot, seed),
}

# %% tags=["remove-input"]
conclude("a6_svd_tables", values, model, "an identity: it holds for any weights")
