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
# # Open questions · Where the states are, and what a head cannot see
#
# **What you will see.** Three questions the papers left open, each answered on this model with a number, an
# interval and, in the report, the same number on the untrained model. Layer by layer, how large the states
# of the residual stream are against the sphere of radius √d that the norms project onto; whether each state
# already lies on the ellipsoid of the norm that reads it; and, for every attention head, the share of the
# normalized states' variance its queries can read, against the share of evenly spread directions.
#
# **Why it matters.** Traveling Words closes with checks it did not run. The first is how the norms of raw
# and normalized states are distributed across layers and models. The second is rank deficiency: a head reads
# d_head of the d coordinates of the state, so what does the rest cost it? The third is whether the
# sphere-and-ellipsoid reading, drawn for GPT-2's pre-norm blocks, carries to post-LN encoders (BERT,
# MPNet), where every state of the stream is a LayerNorm's output. The model atlas sets the three numbers of
# every model side by side.
#
# :::{dropdown} How it is computed
#
# 1. *Where the states are* (`lotlib.chapters.c7_open_questions.state_norms`). The states are the last
#    tokens of Walden's pseudo-sentences at every layer t (the Lines of Thought trajectories). For each: the
#    raw norm ‖x(t)‖ / √d, and the ellipsoid ratio ‖(x(t) − β) / γ‖ / √d of the norm that reads x(t) (block
#    t's input norm; the final norm at t = L). The ratio is 1 when x(t) lies on that norm's ellipsoid, as it
#    must for a post-LN encoder, whose states are that norm's outputs; a pre-norm decoder's stream is not
#    normalized, so the ratio says how much work the norm does.
#
#    Summaries: the growth of the median raw norm from the first
#    block's output to the last, and the median over layers of the gap |ratio − 1|, with bootstrap intervals
#    over the pseudo-sentences.
# 2. *What a head cannot see* (`lotlib.chapters.c7_open_questions.read_shares`). Head h of block t forms
#    its query from the normalized state z = block_norm(t)(x(t)) as z W_Q^h, a map from d to d_head
#    dimensions. Two states whose difference is orthogonal to the columns of W_Q^h give the head the same
#    query, so the head cannot tell them apart.
#
#    Over the ensemble of states, with covariance C, the head reads the share
#    tr(P_h C) / tr(C) of their variance, P_h the projector onto the columns of W_Q^h. Directions spread
#    evenly, or a subspace placed at random, read d_head / d on average; the ratio to it is 1 for them. The
#    interval is a bootstrap over the pseudo-sentences: the covariance is re-estimated on each resample (the
#    heads are the model's and are not resampled).
#
# What truncation costs the next token, the fourth open question, needs an LM head: chapter C8.
# :::
#
# **No verdict.** Neither paper gives a number for these questions, and no bound for them comes from outside
# our results, so the claims below are shown with their intervals and judged by nothing (test kind none). The
# report sets each beside the untrained model's value.

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "FullBasis" = "2D"  # pseudo-sentences of Walden read (the first ones)
seed: int = 0  # the bootstrap resamples
n_boot: "Count" = 1000  # bootstrap resamples of the pseudo-sentences

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters import c7_open_questions as c7
from lotlib.lines_of_thought.ensemble import open_ensemble
from lotlib.stats import side_word
from lotlib.summary import glue
from lotlib.verdicts import conclude

plots.apply_theme()
ens = open_ensemble(model, n_k=n_k, n_s=n_s, device=device, dtype=dtype)
glue("picture_text", ens.lm.view.facts()["picture_text"])
ens

# %% [markdown]
# ## Where the states are
#
# This model is {glue:text}`picture_text`. Left, the raw norm of the {glue:text}`n_s` states at each layer
# over √d; right, how far each state is from the ellipsoid of the norm that reads it (1: on it). Medians with
# the 5-95% band over the pseudo-sentences.

# %%
norms = c7.state_norms(ens.lm.view, ens.X, n_boot, seed)
c7.state_norms_figure(norms, model)
plt.show()
found = norms.summary()
glue(
    "growth_word",
    side_word(found["raw_norm_growth"], ("shrinks", "stays level", "grows"), 1.0),
)
glue(
    "ellipsoid_word", side_word(found["ellipsoid_gap"], ("on", "near", "off"), 0.05)
)
norms.table().iloc[:: max(1, ens.L // 8)].round(3)

# %% [markdown]
# **What to notice.** From the first block's output to the last, the median raw norm
# {glue:text}`growth_word` by a factor {glue:text}`raw_norm_growth` ({glue:text}`raw_norm_first:.3g` √d to
# {glue:text}`raw_norm_last:.3g` √d). The median gap between a state's ellipsoid ratio and 1 is
# {glue:text}`ellipsoid_gap`: the states are {glue:text}`ellipsoid_word` the ellipsoids of the norms that read
# them (the word compares the interval with a gap of 5%). A stream on its norms' ellipsoids is the picture
# Traveling Words draws for the normalized states only; off them, the picture holds for what each block reads,
# not for the stream.
#
# ## What a head cannot see
#
# Every head of every block, one dot each: the share of the {glue:text}`n_s` states' variance (normalized by
# the block's input norm) that lies in the head's query subspace. The dashed line is d_head / d =
# {glue:text}`isotropic_share:.3f` ({glue:text}`d_head` of {glue:text}`d_model` dimensions), the share of
# evenly spread directions.

# %%
reads = c7.read_shares(ens.lm.view, ens.X, list(range(ens.L)), n_boot, seed)
c7.read_share_figure(reads, model)
plt.show()
ratio = reads.median_ratio()
glue("read_ratio_word", side_word(ratio, ("less", "no more or less", "more"), 1.0))
reads.table()

# %% [markdown]
# **What to notice.** The median head reads {glue:text}`read_share_ratio` times the evenly spread share:
# {glue:text}`read_ratio_word` of the states' variance than a subspace placed at random would, and
# {glue:text}`heads_reading_more:.0%` of the heads read more than d_head / d. The rest of the variance, a share
# 1 − (read share) for each head, is differences between states that the head's queries cannot see. The
# table gives, per block, the least and most read head: a head near 0 looks along directions the states
# hardly vary in, and a head near 1 reads almost all of what varies.
#
# ## The claims on this model

# %% tags=["remove-input"]
values = {**ens.sizes, **found, **reads.summary()}
conclude("c7_open_questions", values, model)
