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
#   needs: [causal]
# ---

# %% [markdown]
# # B1 · Lines of thought
#
# **What you will see.** Every pseudo-sentence of *Walden* ends in a token, the *pilot*. As the
# pilot passes through the blocks its residual-stream state moves; the sequence of states
# x(0), x(1), …, x(L) is its *line of thought*. Drawn for a few hundred pilots in the first three
# singular directions of the last layer's ensemble, the paper's lines do not scatter: they travel
# together as a bundle that drifts and fans out layer after layer. We draw the same picture on our
# model and measure how low-dimensional the ensemble is.
#
# **Why it matters.** "Lines of Thought in Large Language Models" (Sarfati et al., ICLR 2025,
# Fig. 1) builds everything else on this picture: if the bundle lives in few dimensions and moves
# smoothly, a linear map plus noise (a Langevin equation) can describe it. This chapter shows the
# picture on our model and measures how low-dimensional it is, against a cloud of points that has no
# structure at all.
#
# :::{dropdown} How it is computed
# The text is collapsed to single spaces, tokenized once and cut into
# non-overlapping chunks of N_k tokens (no BOS, as in the paper). x(t) is block t's output at the last
# position, taken with forward hooks; **the final norm is never applied**. The basis of the pictures is
# the thin, **uncentered** SVD of the D × N_s matrix of all pilots at t = L (all pilots, not only the
# plotted ones).
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = None  # cap on pseudo-sentences (None: all of Walden)
n_pilots: int = 500  # trajectories drawn
bos: "bool | None" = None  # start with BOS (None: as the model's tokenizer does)
seed: int = 0  # pilots drawn, the fit / held-out split, the cloud, the bootstrap
n_boot: "Count" = 2000  # bootstrap resamples of held-out pilots for the intervals

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from lotlib import plots
from lotlib.chapters import b1_lines_of_thought as b1
from lotlib.lines_of_thought import ensemble
from lotlib.lines_of_thought.ensemble import open_ensemble
from lotlib.stats import STRADDLES, side_word
from lotlib.summary import glue
from lotlib.verdicts import conclude

plots.apply_theme()
ens = open_ensemble(model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype)
X, L, D = ens.X, ens.L, ens.D  # X: (N_s, L+1, D)
ens

# %% [markdown]
# ## (a) The bundle in the last layer's singular basis
#
# The uncentered SVD of every layer's ensemble; U(L) gives the axes. The pictures draw `n_pilots`
# pilots drawn at random, at t = 1..L.

# %%
U, S = ensemble.ensemble_svd(X)  # per layer: U (L+1, D, k), S (L+1, k)
pilots, fit, held = b1.picture_and_halves(ens.n_s, n_pilots, seed)
layers = np.arange(1, L + 1)
P = b1.project(X[pilots][:, layers], U[L][:, :3])  # (n_pilots, L, 3)
title = f"{len(pilots)} lines of thought, {model}, t = 1..{L}, on u1..u3 of U({L})"
plots.show(plots.paths_3d(P, layers, title))
plots.paths_static(P, layers, title)
plt.show()
energy = b1.squared_norm_shares(S[L])
glue("energy_u2_last_layer", energy[1])
glue("energy_u3_last_layer", energy[2])

# %% [markdown]
# **What to notice.** Follow the layer colors along the bundle: where the lines start together and
# how far they fan out as t grows. The three plotted directions carry
# {glue:text}`energy_u1_last_layer:.3f`, {glue:text}`energy_u2_last_layer:.3f` and
# {glue:text}`energy_u3_last_layer:.3f` of the ensemble's squared norm at t = L (together
# {glue:text}`energy_top3_last_layer:.3f`): that is how much of the last layer the picture shows. An
# uncentered SVD puts the ensemble's mean direction first: when the states share a large common
# component, u1 carries most of the norm, and the spread of the bundle lives in u2 and u3.
#
# ## How many directions does the bundle use?
#
# "Low-dimensional" needs a number and a null. Counting the singular directions that carry 90% of the
# *squared norm* (the uncentered spectrum the pictures use) cannot tell a bundle from a shapeless cloud:
# when all states share a large mean, the mean's direction alone carries most of the norm, whatever the
# spread around it. So the count here is taken **around the ensemble's mean** (the centered spectrum, the
# principal components), and set beside a **structureless cloud**: Gaussian points with the ensemble's
# mean and the same variance in every coordinate, but no correlation between coordinates. Residual
# streams often have a few coordinates of very large variance; the cloud keeps them, so what separates the
# ensemble from the cloud is correlation between coordinates, which is what "a bundle in a subspace"
# means.
#
# Layer by layer, the number of directions that carry 90% as a share of the directions a sample of N_s
# states can span, min(N_s − 1, D); the table gives the counts at t = 1, L/2 and L.

# %%
counts = b1.direction_counts(X, S, share=0.9, seed=seed)  # reading -> (L+1,)
span = min(ens.n_s - 1, D)
b1.direction_counts_figure(counts, span, f"Directions for 90%, {model}")
plt.show()
glue("span", span)
pd.DataFrame(counts).loc[[1, L // 2, L]].rename_axis("layer t")

# %% [markdown]
# **What to notice.** At t = L, 90% of the squared norm needs
# {glue:text}`k90_uncentered_last_layer:.0f` of {glue:text}`span` directions, 90% of the variance
# around the mean {glue:text}`k90_centered_last_layer:.0f`, and 90% of the structureless cloud's
# variance {glue:text}`k90_cloud_last_layer:.0f`. The uncentered count gets the mean direction's share
# for free; the gap between the last two curves is what correlations between coordinates buy, layer by
# layer.
#
# These counts are in-sample and depend on N_s: a finite sample's spectrum spreads (with fewer states than
# directions every sample is low-dimensional), and a bootstrap that repeats states lowers the count
# further. The verdict therefore uses a measure that is out of sample.
#
# The **D/4** leading principal
# directions of the last layer (the paper's K0 = D/4 for GPT-2 medium, chapter B2) are fit on a random half
# of the pilots; the share of the *other* half's variance around the fit half's mean that they carry is the
# measured value, with a 95% bootstrap interval over the held-out pilots (the fit half and its directions
# are not resampled). The same for the structureless cloud, split the same way, is the claim's null; the
# curve below repeats it for every layer.

# %%
K = D // 4
per_layer = b1.held_out_shares(X, fit, held, K, n_boot=n_boot, seed=seed)
b1.held_out_share_figure(
    per_layer, K, f"Held-out variance, D/4 directions, {model}"
)
plt.show()
for name, key in (("side", "ensemble"), ("cloud_side", "structureless cloud")):
    glue(name, side_word(per_layer[key][L], STRADDLES, 0.9))

# %% [markdown]
# **What to notice.** Read the last layer against the dotted 90% line: a bundle that lives in D/4
# directions sits above it, a cloud whose variance is spread over its coordinates sits below. At
# t = L = {glue:text}`n_layers`, the top D/4 = {glue:text}`k_quarter_d` principal directions of
# {glue:text}`n_fit` pilots carry {glue:text}`held_out_share_quarter_d_last_layer` of the variance of
# the {glue:text}`n_held_out` others (its interval {glue:text}`side` the line); the structureless
# cloud gives {glue:text}`held_out_share_quarter_d_last_layer_cloud` ({glue:text}`cloud_side` the
# line). The band is the bootstrap interval over held-out pilots. Where the two curves meet, the
# layer's low dimension is nothing more than a few coordinates of large variance.
#
# ## (b) The same lines in raw coordinates
#
# The paper's second panel shows the second half of the layers in three Cartesian coordinates of
# the residual stream. It does not say which; we take the three coordinates with the largest
# variance over pilots at t = L (a choice, stated here).

# %%
second_half = np.arange(L // 2, L + 1)
C, dims, names = b1.widest_paths(X, pilots, second_half)  # C: (n_pilots, ·, 3)
title = f"t = {L // 2}..{L} in coordinates {', '.join(names)}"
plots.show(plots.paths_3d(C, second_half, title, axis_names=names))
plots.paths_static(C, second_half, title, axis_names=names)
plt.show()
spread = X[:, L].std(axis=0)  # (D,) over pilots
glue("raw_spreads", ", ".join(f"{n}: {s:.2f}" for n, s in zip(names, spread[dims])))
glue("median_spread", float(np.median(spread)))
glue("widest_over_median", float(spread.max() / np.median(spread)))

# %% [markdown]
# **What to notice.** In raw coordinates the picture depends on which coordinates one picks; the
# singular basis of panel (a) is the coordinate-free view. The standard deviations over pilots at
# t = L of the three picked coordinates ({glue:text}`raw_spreads`) set beside the median over all
# coordinates ({glue:text}`median_spread:.2f`) show how far the widest coordinates stand out: the
# widest is {glue:text}`widest_over_median:.1f` times the median. Coordinates of very large variance
# are the reason the structureless cloud above is built with each coordinate's own variance.
#
# ## Does the claim hold on this model?
#
# The claim of Fig. 1 is qualitative: trajectories form a coherent, low-dimensional bundle. The bundle
# claim is shown without a verdict (of the share of the squared norm in u1..u3, u1, the mean's
# direction, carries {glue:text}`energy_u1_last_layer:.3f`). The
# dimension claim is a *finding* judged on the held-out share of the last layer's variance in D/4 principal
# directions (at least 90%), with two nulls: the structureless cloud above, and the same chapter on the
# untrained model of the same architecture (the report shows its value). The 90% bound in D/4 directions is
# ours (the paper gives no number for Fig. 1); D/4 is the paper's K0.
#
# The gap between the ensemble and its cloud need not be evidence of training: a random model's last
# layer can mostly carry the pilot token's own embedding, and as Walden's pilots repeat a few frequent
# tokens, a random model's ensemble can be clustered and far from its own cloud too (the report shows
# the untrained run's value). What the verdict asks is how concentrated the ensemble is, against the
# bound.

# %% tags=["remove-input"]
values = {
    **ens.sizes,
    "n_fit": len(fit),
    "n_held_out": len(held),
    "k_quarter_d": K,
    **b1.claim_values(energy, counts, per_layer, L),
}
why = "a cloud with the same coordinate variances passes: wide coordinates suffice"
conclude("b1_lines_of_thought", values, model, why_not_diagnostic=why)
