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
#   needs: [causal, readout]
# ---

# %% [markdown]
# # B2 · The ensemble's singular basis, layer by layer
#
# **What you will see.** At every layer t the states of all pilots form a D × N_s matrix; its thin,
# uncentered SVD gives a basis U(t) and singular values Σ(t). Three panels describe it: (a) how much the
# first four singular directions turn from one layer to another, as L × L maps of angles; (b) the
# singular-value spectra of every layer on log–log axes; (c) how many singular directions of the last
# layer the model needs to keep its next-token distribution, measured as the authors measured it.
#
# **Why it matters.** "Lines of Thought in Large Language Models" (Sarfati et al., ICLR 2025, Fig. 2)
# uses this basis for everything that follows: the linear extrapolation of Eq. 1 (chapter B3) carries a
# state from U(t) to U(t+τ), which only makes sense if the leading directions turn slowly across layers,
# and the paper argues that the ensemble lives in a subspace of K0 = 256 = D/4 directions for GPT-2
# medium, enough to recover most of the next-token distribution. In their reply to the reviewers the
# authors state the criterion behind K0: the mean KL(p_K ‖ p) "dropped about 90% (from about 5 at K = 1 to
# 0.5 at K = 256)", and the top-5 next tokens at K = 256 share on average 2.5 of 5 with those at K = D.
#
# :::{dropdown} How it is computed
# As in chapter B1: Walden in non-overlapping pseudo-sentences of N_k tokens,
# the pilot is the last token, x(t) is block t's output (t = 0 is the input of block 0, the embedding),
# the final norm is never part of a trajectory, and the SVD is uncentered over all pilots. The paper
# leaves open two choices, made here and stated again where they matter:
#
# - **Which vector is "u_i" at another layer.** Singular vectors come back sorted by singular value and
#   with arbitrary signs; to compare layers, the columns are re-ordered and re-signed by an optimal
#   assignment between neighbouring layers (Hungarian algorithm on |U(t)ᵀU(t±1)|, `lotlib.lines_of_thought.ensemble.align_bases`).
#   The chain starts at the **middle layer** L/2, so u_1..u_4 are its four leading directions followed
#   forward and backward through the layers. (Starting from the last layer instead names the columns by
#   U(L), some of which may be new directions that the last few blocks create: before them such a direction
#   sits deep in the bulk of the spectrum, and its column is noise. The ranks in the table below check,
#   on each run, that the four tracked directions stay among the leading ones at every layer.)
# - **The truncation protocol of panel (c)** is described in its section; both readings are computed.
# - **How many pilots.** The paper used about 2,900 pseudo-sentences for GPT-2 medium's D = 1024, N_s ≈ 2.8 D,
#   and its truncation basis is fit on the very pilots it truncates, so its numbers depend on N_s. Panel (c)
#   is computed at the book's N_s and at N_s = round(2.8 D) (a seeded subset), each with its own basis. A
#   wider model's tokenizer can cut Walden into fewer than 2.8 D pseudo-sentences; then the paper's N_s is
#   all of them, as it must have been for the paper's 7B models (D = 4,096).
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = None  # cap on pseudo-sentences (None: all of Walden)
bos: "bool | None" = None  # start with BOS (None: as the model's tokenizer does)
n_truncated: "int | None" = None  # pilots of the last-layer protocol (None: all)
n_propagated: int = 128  # pilots for the truncate-every-layer protocol (0 skips it)
top: int = 5  # next tokens compared between p_K and p (the authors' top-5)
n_s_paper: "PaperPilots" = "2.8D"  # the paper's N_s: a seeded subset of the pilots
n_rep: "Count" = 50  # repetitions of the intervals (pilots resampled, basis refit)
seed: int = 0  # the scored pilots, the paper's subset, random directions, resamples

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import numpy as np
from lotlib import plots
from lotlib.chapters import b2_ensemble_svd as b2
from lotlib.lines_of_thought import ensemble, truncation
from lotlib.lines_of_thought.ensemble import authors_pilots_label, open_ensemble
from lotlib.stats import side_word
from lotlib.summary import glue
from lotlib.verdicts import conclude

plots.apply_theme()
ens = open_ensemble(model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype)
X, L, D = ens.X, ens.L, ens.D  # X: (N_s, L+1, D)
authors_set = ens.authors_pilots(n_s_paper, seed, cap=n_s)
glue("n_s_paper_rule", authors_pilots_label(len(authors_set), D, n_s_paper))
U, S = ensemble.ensemble_svd(X)  # per layer, sorted by decreasing singular value
# named by the middle layer
U_al, S_al = ensemble.align_bases(U, S, reference=L // 2)
glue("k_svd", S.shape[1])
ens

# %% [markdown]
# The ensemble SVD keeps k = {glue:text}`k_svd` directions per layer.
#
# ## (a) How the leading singular directions turn across layers
#
# For each of u_1..u_4 and each pair of layers (t1, t2), the angle arccos|u_i(t1)·u_i(t2)| in degrees:
# 0 means the same direction, 90 orthogonal. The absolute value makes the angle blind to the sign. The
# table reads the maps: the largest rank of u_i among the singular directions of any block's output, the
# median angle between consecutive layers, how far u_i travels over the second half, and the first and
# last steps.

# %%
turning = ensemble.basis_turning(U_al, S, S_al, n=4)
b2.angle_maps(turning.angles, f"Angles between aligned singular vectors, {model}")
plt.show()
glue("angle_u1_embedding", turning.embedding[0])
b2.turning_table(turning)

# %% [markdown]
# **What to notice.** Dark squares along the diagonal are runs of layers over which a direction stays put;
# where the color turns bright away from the diagonal, the direction has been replaced. u_1 turns by a
# median {glue:text}`median_consecutive_angle_u1:.1f`° from one layer to the next and by
# {glue:text}`angle_u1_middle_to_last:.1f`° over the second half; its last step
# ({glue:text}`angle_u1_last_step:.1f`°) says whether the final block turns the basis more than the
# others (the paper's "last-layer anomaly"). The four tracked directions stay among the top
# {glue:text}`max_rank_u1_to_u4` of every block's output. Compare the first row and column (t = 0, the
# token embedding before any block) with the rest: u_1(0) vs u_1(1) is
# {glue:text}`angle_u1_embedding:.1f`°, how much the first block rewrites the basis.
#
# ## (b) Singular-value spectra
#
# The sorted singular values σ_1(t) ≥ σ_2(t) ≥ … of every layer, on log–log axes, colored by layer. The
# slope of a least-squares line through log σ_i against log i, over i = 10..k/2, summarizes the bulk.

# %%
b2.spectra_figure(S, f"Singular-value spectra per layer, {model}")
plt.show()
slopes, gap = b2.spectrum_slopes(S), S[:, 0] / S[:, 1]
glue("sigma1_over_sigma2_first", gap[1])
glue("sigma1_over_sigma2_middle", gap[L // 2])
glue("spectrum_slope_first", slopes[1])

# %% [markdown]
# **What to notice.** The uncentered SVD puts the ensemble's common direction first: σ_1/σ_2 is
# {glue:text}`sigma1_over_sigma2_first:.1f` at t = 1, {glue:text}`sigma1_over_sigma2_middle:.1f` at
# t = L/2 and {glue:text}`sigma1_over_sigma2_last:.1f` at t = L, and the whole spectrum moves with depth
# as the states' norms change. Beyond the first few values the spectra fall roughly as a power of the
# index, with slopes {glue:text}`spectrum_slope_first:.2f`, {glue:text}`spectrum_slope_middle:.2f` and
# {glue:text}`spectrum_slope_last:.2f` at t = 1, L/2 and L, and a steep drop at the end where directions
# carry almost nothing.
#
# ## (c) How many directions the next-token distribution needs
#
# Let p be the model's next-token distribution for a pilot, final norm and unembedding applied to x(L).
# p_K is the same with the state truncated to its top-K singular directions. Two scores per pilot: the
# KL(p_K ‖ p) in nats, and how many of p_K's top-5 next tokens are among p's top 5. The paper leaves the
# truncation protocol open, so we compute both readings:
#
# 1. **Last layer only** (the simplest reading): project x(L), before the final norm, onto the top-K
#    singular vectors of U(L), then apply the final norm and the unembedding. All pilots, or a random
#    subsample of `n_truncated` of them (the basis is always fit on all pilots of the sample).
# 2. **Every layer, propagated**: after every block t = 1..L, replace the pilot's state by its projection
#    onto the top-K singular vectors of U(t) and let the remaining blocks run on it with the model's own
#    position embeddings and causal mask.
#
#    The other tokens of the pseudo-sentence are left alone, and
#    causality makes them independent of the pilot, so their keys and values are computed once and kept
#    in the model's key-value cache. This protocol runs on a random subsample of pilots.
#
# K runs over the powers of two below D, the multiples of D/16 from D/8 to D/2 (the paper's K0 for GPT-2
# medium is D/4, and these steps resolve K0 around it) and D. At
# K = D the basis spans the whole space (N_s ≥ D pilots give D directions), so truncating changes nothing but
# rounding: both protocols score p_D as p itself (KL 0, all five tokens shared), as the authors' reference
# "K = D" is p.
#
# Everything is computed twice (once when both are all of Walden), each time by the paper's protocol (the
# basis fit on the very pilots it truncates): on the book's {glue:text}`n_s` pilots and on the paper's N_s,
# {glue:text}`n_s_paper_rule`.
# Bands and intervals come from {glue:text}`n_rep` repetitions, each drawing the sample's pilots
# with replacement, **refitting the basis on the draw** and rescoring; the 95% percentile band of the
# repetitions is moved onto the sample's curve (a draw holds about 63% distinct pilots, and a basis fit on
# fewer distinct pilots fits them more closely, which shifts every repetition the same way).

# %%
study = b2.TruncationStudy(
    truncation.truncation_grid(D), n_rep, n_truncated, n_propagated, top, seed
)
samples = {
    f"N_s = {ens.n_s}": np.arange(ens.n_s),
    f"paper's N_s = {len(authors_set)}": authors_set,
}
runs = b2.truncation_at_sizes(ens.lm, ens.corpus.ids, X, samples, study)
book, paper = runs.values()
b2.truncation_bands(runs, D, model)
plt.show()

# %% [markdown]
# **What to notice.** Both curves fall as K grows and reach 0 at K = D (the full basis reproduces the
# state), and the overlap climbs to all five tokens. Compare the two protocols at the same K: truncating
# after every layer lets the error of each truncation pass through all later blocks, so it needs more
# directions for the same KL. Compare the two sample sizes: at K = D/4 the last-layer KL is
# {glue:text}`kl_quarter_d_last_layer` nats with {glue:text}`n_s` pilots and
# {glue:text}`kl_quarter_d_last_layer_paper_ns` with {glue:text}`n_s_paper`.
#
# The authors' criterion reads three numbers off these curves, each below with its 95% interval: the
# **drop** KL(D/4) / KL(1) (about 0.1: "dropped about 90%"), the **KL at D/4 in nats** (about 0.5) and the
# **top-5 overlap at D/4** (about 2.5 of 5). K0 is the smallest K of the grid at which the mean KL has
# fallen to a tenth of its value at K = 1, as a fraction of D (0.25 in the paper). Every number is
# recomputed on each repetition, after the basis is refit on the repetition's pilots. As a claim-specific
# null, the same truncation onto K **random orthonormal directions** instead of the ensemble's top K (a
# new draw of directions in each repetition): it keeps as many dimensions but none of the ensemble's
# geometry.

# %%
columns = {
    f"{name}, {label}": found
    for label, run in runs.items()
    for name, found in run.found.items()
    if name != b2.RANDOM
}
b2.truncation_table(columns, book.found[b2.RANDOM], top)
versus = ("below", "consistent with", "above")
for key, at in (
    ("kl_drop", 0.1),
    ("kl_quarter_d", 0.5),
    ("overlap_quarter_d", 2.5),
    ("k0_over_d", 0.25),
):
    measured = paper.found["last layer"][key]
    glue(f"{key}_paper_word", side_word(measured, versus, at))

# %% [markdown]
# **What to notice.** Like for like with the paper (its protocol, N_s = {glue:text}`n_s_paper_rule`, last
# layer), KL(D/4)/KL(1) is {glue:text}`kl_drop_last_layer_paper_ns`,
# {glue:text}`kl_drop_paper_word` the paper's 0.1 (its "dropped about 90%"); the KL at D/4 is
# {glue:text}`kl_quarter_d_last_layer_paper_ns` nats, {glue:text}`kl_quarter_d_paper_word` its 0.5 nats
# at K = 256; the top-5 overlap is {glue:text}`overlap_quarter_d_last_layer_paper_ns`,
# {glue:text}`overlap_quarter_d_paper_word` its 2.5 of 5; and K0/D is
# {glue:text}`k0_over_d_last_layer_paper_ns`, {glue:text}`k0_over_d_paper_word` its 0.25. With the
# book's {glue:text}`n_s` pilots the same numbers are {glue:text}`kl_drop_last_layer`,
# {glue:text}`kl_quarter_d_last_layer`, {glue:text}`overlap_quarter_d_last_layer` and
# {glue:text}`k0_over_d_last_layer`. D/4 random directions give a drop of
# {glue:text}`kl_drop_random_directions` and an overlap of {glue:text}`overlap_quarter_d_random_directions`:
# keeping D/4 random directions keeps a quarter of the dimensions, so the difference between the columns is
# what the ensemble's basis adds. How the final norm acts matters here: an RMSNorm divides by the root mean
# square without centering (GPT-2's LayerNorm subtracts the mean first), so dropping directions also
# changes the scale the norm divides by.
#
# **How many pilots.** The basis is fit on the very pilots it truncates, as in the paper. With N_s close to
# D the top K directions fit those pilots more closely than they would fit new ones, and every number in
# this table looks better than with more pilots. Compare runs at the same N_s only: the paper's ratio,
# 2.8 D (or all of Walden where that is less), is the column to set beside its numbers.
#
# **The consecutive-sentence baseline.** The paper draws a horizontal line in this figure: the median KL
# between the true distributions of consecutive (unrelated) pseudo-sentences. It cannot locate K0 when the
# mean direction u_1 alone already gives a distribution closer to each pilot's than another sentence's
# distribution is: then every K of the grid passes it. It is shown for reference and judges nothing.

# %%
base = float(np.median(b2.consecutive_kl(ens.lm.view, X[:, L])))
kl_k1 = book.protocols["last layer"].kl[0].mean()
glue("kl_k1_last_layer", kl_k1)

# %% [markdown]
# The median KL between consecutive pseudo-sentences is {glue:text}`kl_baseline_median:.3f` nats; the
# mean KL at K = 1 (last layer only) is {glue:text}`kl_k1_last_layer:.3f` nats,
# {glue:text}`kl_k1_over_baseline:.1%` of it.
#
# ## Does the claim hold on this model?
#
# The angles and spectra are descriptive (no verdict). The truncation claims are *findings*, judged with
# the authors' own numbers for both protocols: the drop KL(D/4)/KL(1) at most 0.1, the KL at D/4 at most
# the paper's 0.5 nats, the top-5 overlap at least the paper's 2.5 of 5, and K0/D within 0.1 of 0.25. Two
# nulls face them: the random directions above (last-layer protocol) and the untrained model of the same
# architecture (the report shows its value). The random directions are the check that the tests see the
# ensemble's basis; the untrained model is the harder null.
#
# The KL in nats is **not diagnostic** when the untrained model passes it: a random model's next-token
# distribution is close to uniform, and a near-uniform distribution barely moves whatever the state, so
# its KL is small at every K.
#
# The drop and K0 are ratios that do not depend on how peaked p is, and they
# are **not diagnostic** either when the untrained model passes them (random weights can pass both): the
# uncentered basis puts the states' own common directions first, and the readout of
# any ensemble, trained or not, is carried by those, so "D/4 directions keep the distribution" is a
# property of the basis, not something training created. The top-5 overlap is the criterion that asks most
# of a model: a random model's top five tokens are decided by small logit differences that truncation
# scrambles.

# %% tags=["remove-input"]
values = b2.claim_values(ens.sizes, turning, S, runs, study, base)
why = "the uncentered basis carries the readout of any ensemble"
conclude("b2_ensemble_svd", values, model, why_not_diagnostic=why)
