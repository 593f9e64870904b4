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
#   needs: [readout]
# ---

# %% [markdown]
# # Open questions · What a head cannot see, and what truncation costs
#
# **What you will see.** Two questions the papers left open, each answered on this model with a number, an
# interval and, in the report, the same number on the untrained model. First, for every attention head, the
# share of the normalized states' variance its queries can read, against the share of evenly spread
# directions. Then, for pseudo-sentences the fit never saw, what truncating every block's output to its top-K
# ensemble directions costs the next token: the rise of the next-token loss and the top-1 accuracy, beside
# the KL divergence that Lines of Thought reports.
#
# **Why it matters.** Traveling Words closes with checks it did not run; the second is rank deficiency: a
# head reads d_head of the d coordinates of the state, so what does the rest cost it? Lines of Thought says
# that D/4 directions keep the next-token distribution within about 0.5 nats of KL; a reviewer asked what
# that costs in the model's own currency, the loss on the true next token. Both are answered here in numbers,
# and neither paper states one.
#
# **How it is computed.**
#
# 1. *What a head cannot see* (`lotlib.traveling_words.read_shares`). Head h of block t forms its query from
#    the normalized state z = block_norm(t)(x(t)) as z W_Q^h, a map from d to d_head dimensions. Two states
#    whose difference is orthogonal to the columns of W_Q^h give the head the same query, so the head cannot
#    tell them apart. Over the ensemble of states, with covariance C, the head reads the share
#    tr(P_h C) / tr(C) of their variance, P_h the projector onto the columns of W_Q^h. Directions spread
#    evenly, or a subspace placed at random, read d_head / d on average; the ratio to it is 1 for them. The
#    states are the last tokens of Walden's pseudo-sentences at each block's input (the Lines of Thought
#    trajectories). The interval is a bootstrap over the pseudo-sentences: the covariance is re-estimated on
#    each resample (the heads are the model's and are not resampled).
# 2. *What truncation costs* (`lotlib.lines_of_thought.truncation.truncation_cost`). The bases are the
#    per-layer singular vectors of the first pseudo-sentences; the following `n_scored` ones, held out, are
#    truncated after every block to the top K directions and propagated through the later blocks (B2's
#    "every layer" protocol). Each has a true next token, the first token of the pseudo-sentence after it.
#    For each K: the mean KL(p_K ‖ p), the mean rise of the next-token loss −log p_K(next) over −log p(next),
#    and the top-1 accuracy of p_K, each with a bootstrap interval over the held-out pseudo-sentences.
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
n_scored: "Pilots" = "0.5D"  # the last of them, held out: truncated and scored
seed: int = 0  # the bootstrap resamples
n_boot: int = 1000  # bootstrap resamples of the pseudo-sentences

# %% tags=["hide-input"]
from lotlib import plots
from lotlib.book.report import conclude
from lotlib.book.summary import glue
from lotlib.intervals import side_word
from lotlib.lines_of_thought import figures as lot_figures, truncation
from lotlib.lines_of_thought.ensemble import open_ensemble
from lotlib.traveling_words import figures, read_shares

plots.apply_theme()
ens = open_ensemble(model, n_k=n_k, n_s=n_s, device=device, dtype=dtype)
ens

# %% [markdown]
# ## What a head cannot see
#
# Every head of every block, one dot each: the share of the {glue:text}`n_s` states' variance (normalized by
# the block's input norm) that lies in the head's query subspace. The dashed line is d_head / d =
# {glue:text}`isotropic_share:.3f` ({glue:text}`d_head` of {glue:text}`d_model` dimensions), the share of
# evenly spread directions.

# %%
reads = read_shares.read_shares(
    ens.lm.view, ens.X, list(range(ens.L)), n_boot, seed
)
figures.read_share_figure(reads, model)
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
# ## What truncation costs the next token
#
# The {glue:text}`n_scored` held-out pseudo-sentences, truncated after every block to the top K directions of
# bases fit on the {glue:text}`n_fit` before them. Left, the KL divergence of B2 (c), here out of sample;
# middle, what it costs the true next token; right, how often p_K's most likely token is the true one.

# %%
cost = truncation.truncation_cost(ens, n_scored, n_boot=n_boot, seed=seed)
lot_figures.truncation_cost_figure(cost, ens.D, model)

# %% [markdown]
# **What to notice.** At K = D/4 the held-out KL is {glue:text}`kl_quarter_d_held_out` nats (Lines of
# Thought: about 0.5 nats at K = D/4 on GPT-2 medium, with the basis fit on the pilots it truncates). On the
# true next token, that truncation raises the loss by {glue:text}`loss_rise_quarter_d` nats over the
# model's own {glue:text}`loss_full` nats, and the top-1 accuracy is {glue:text}`top1_quarter_d` against the
# model's {glue:text}`top1_full`. The KL weighs every token by p_K's probability; the loss rise looks at one
# token, the one that came next, so the two need not move together.
#
# ## The claims on this model

# %% tags=["remove-input"]
values = {**ens.sizes, **reads.summary(), **cost.summary(ens.D)}
conclude("c7_open_questions", values, model)
