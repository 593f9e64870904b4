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
# # A2 · Normalization on real states
#
# **What you will see.** Every state of a sample of *Walden* pseudo-sentences, at every position and
# every layer, passed through the norm that reads it (each block's input norm, and the final norm
# after the last block). Four measurements: (1) the normalized state has norm √d, exactly as eps
# predicts; (2) how much the norm of the residual stream it came from changes across layers, which
# the norm erases; (3) how far RMSNorm's states are from the hyperplane x · 1 = 0 that LayerNorm would
# project them on; (4) the paper's table comparing global centering and scaling of the embedding
# matrix with the per-row normalization, with its exact identities checked by code.
#
# **The paper's claim.** "Traveling Words" (Molina, 2023): before γ and β every normalized vector has
# norm exactly √d (27.71 for GPT-2's d = 768), up to eps, so all states live on one sphere; and
# LayerNorm is not a global affine change of the embeddings: centering and scaling the whole matrix
# E by one vector c and one number s does not reproduce LN(E).
#
# :::{dropdown} How it is computed
# **What may differ on our model.** Many recent models use **RMSNorm**
# x ↦ γ ⊙ x / sqrt(mean(x²) + eps): no centering and no β. Its normalized states are on the sphere
# of radius √d (up to eps) but not on the hyperplane; we then measure how far off. This run's model
# normalizes with {glue:text}`norm_name`. The paper's table uses LN(E) as the reference; we compute
# it with both references, LN (the paper's) and RMSNorm.
#
# **Choices the paper leaves open.** The sample: `n_s` pseudo-sentences of `n_k` tokens drawn at
# random (seeded) from *Walden*, every position kept (the first position included, and also reported
# separately, since a first token can carry an outsized norm). "Measured" norms are computed in float32, exactly
# as the model computes them; the eps formula sqrt(d · m / (m + eps)), with m the mean square
# (RMSNorm) or the variance (LayerNorm) of x, in float64. The table's eps is the final norm's.
#
# **Code:** `lotlib.chapters.a2_normalization.normalization_study`; `lotlib.traveling_words.norms` (`norm_statistics`, `embedding_tables`).
# :::
#
# :::{dropdown} What is measured, and how sure we are
# The paper's statements here are exact properties of the
# operations (the norm of x̂, the plane of LayerNorm's outputs, the table's cosine identities): they hold
# for any weights, so the chapter checks them as *identities* on every state and every row (exact values:
# nothing is sampled, the largest violation is reported). Descriptive numbers that do depend on the
# sample, such as how much the residual stream grows or how far RMSNorm's inputs sit from the plane, come
# with a 95% bootstrap interval over pseudo-sentences (the positions of one pseudo-sentence share their
# context, so they are resampled together).
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
n_s: int = 64  # pseudo-sentences drawn at random from Walden (all positions used)
n_k: "Tokens" = 50  # tokens per pseudo-sentence
seed: int = 0  # which pseudo-sentences are drawn, and the bootstrap's resamples
n_boot: "Count" = 1000  # bootstrap resamples of pseudo-sentences
blocks: "list[Layer] | None" = None  # cos(x, 1) plot layers (None: 0, L/2, L)

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
import numpy as np
from lotlib import plots
from lotlib.chapters import a2_normalization as a2
from lotlib.models.bounds import layer_indices
from lotlib.summary import glue, not_applicable
from lotlib.traveling_words import norms
from lotlib.verdicts import conclude

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
L, d = lm.view.n_layers, lm.view.d_model
corpus = lotlib.walden(lm.tokenizer, n_k=n_k)
ids = norms.drawn_sentences(corpus, n_s, seed)
blocks = layer_indices(blocks or ["first", "middle", "last"], L, "blocks", lm.name)

# %% [markdown]
# ## The sample
#
# One call runs the chapter's measurements: the norm statistics of every state (the BOS, if any, left
# out), their checks with bootstrap intervals, and the paper's table on the embedding matrix.

# %%
study = a2.normalization_study(lm, ids, corpus.prefix, n_boot=n_boot, seed=seed)

# %% [markdown]
# Each layer holds {glue:text}`n_states_per_layer` states ({glue:text}`n_sentences`
# pseudo-sentences × {glue:text}`n_k` positions), t = 0..{glue:text}`n_layers`. The norms are
# {glue:text}`norm_name` with eps = {glue:text}`eps_text`; they {glue:text}`beta_word`;
# √d = {glue:text}`sqrt_d_text`.
#
# ## 1 · The normalized state has norm √d, up to eps
#
# For each layer: how far the normalized state falls short of √d, averaged over the sample, measured
# and as the eps formula predicts; and the largest disagreement between the two over every state.
# The table below the figure lists every layer (with the residual norms and cos(x, 1) of sections 2
# and 3).

# %%
a2.sqrt_d_gaps(study.table, d, model)
plt.show()
study.table.style.format("{:.4g}", subset=list(study.table.columns[1:4])).format(
    "{:.2e}", subset=list(study.table.columns[4:])
)

# %% [markdown]
# **What to notice.** Over all {glue:text}`n_states` normalized states, ||x̂|| runs from
# {glue:text}`normalized_norm_min_text` to {glue:text}`normalized_norm_max_text` (√d =
# {glue:text}`sqrt_d_text`). Where the states' mean square m is small, eps takes a visible bite; the
# largest shortfall from √d is {glue:text}`max_shortfall_from_sqrt_d` (at t = {glue:text}`t_gap`,
# where the median m is {glue:text}`m_at_gap:.3g` against eps = {glue:text}`eps_text`). Where eps/m
# puts the shortfall below float32's resolution near √d ({glue:text}`float32_spacing:.1e`), the
# measured values are rounding noise around the formula. Over every state the measurement agrees with
# sqrt(d · m / (m + eps)) to {glue:text}`max_abs_measured_minus_eps_formula:.1e`, that is
# {glue:text}`max_rel_measured_minus_eps_formula` √d: the claim holds in its exact form when this is
# at float precision.
#
# ## 2 · The residual stream's norm across layers, which the norm erases
#
# The norm of the state *before* normalization, by layer: the median and the 10–90% band over positions
# after the first, and the first position separately.

# %%
a2.residual_norms(study.stats["residual"], d, model)
plt.show()

# %% [markdown]
# **What to notice.** The median ||x(t)|| over positions ≥ 1 is {glue:text}`residual_median_t0:.2f`
# at t = 0, {glue:text}`residual_median_middle:.1f` at t = {glue:text}`middle_layer` and
# {glue:text}`residual_median_tL:.1f` at t = {glue:text}`n_layers`: the residual stream's norm changes
# by a factor {glue:text}`residual_growth_factor` between the embeddings and the last layer (with its
# bootstrap interval over pseudo-sentences), and the median grows at
# {glue:text}`residual_layers_growing` of {glue:text}`n_layers` layers, while every normalized state
# has the same norm √d: the blocks read directions only, so a write of a given size turns the stream
# less as it grows. The first position reaches a median norm of
# {glue:text}`first_position_max_median_norm:.0f` (at t = {glue:text}`first_position_t`),
# {glue:text}`first_position_ratio:.2f` times the largest median of the other positions
# ({glue:text}`first_word` them). A first position far above the others would be an "attention
# sink": a first token that no BOS precedes often carries a much larger norm, which is why it is
# drawn separately.
#
# ## 3 · The hyperplane: LayerNorm's centering, and how far RMSNorm's states are from it
#
# LayerNorm removes the component of x along the all-ones vector before scaling, so its normalized state
# x̂ lies on the hyperplane x̂ · 1 = 0; RMSNorm keeps that component. The paper's claim is about x̂, the
# normalized state, not about the residual state x that enters the norm: we measure cos(x̂, 1) on every
# normalized state (0 up to rounding for LayerNorm, by construction) and, beside it, cos(x, 1) = mean(x)
# √d / ||x|| of the incoming state, against what a uniformly random direction would give. The curves
# are means of |cos| over pseudo-sentences, with 95% bootstrap bands over pseudo-sentences.

# %%
a2.hyperplane_figure(study.stats, blocks, n_boot=n_boot, seed=seed)
plt.show()

# %% [markdown]
# **What to notice.** The largest |cos(x̂, 1)| over all normalized states is
# {glue:text}`hat_max:.1e` ({glue:text}`hat_reading`). On a LayerNorm model the normalized curve is
# flat at zero: centering puts every x̂ on the plane, whatever x was, and the claim holds exactly, as an
# identity of the operation. On an RMSNorm model the two curves coincide, since x̂ is x rescaled: the
# paper's hyperplane claim does not apply to a norm that does not center, and the report marks it
# *not applicable*. What the model's incoming states do is the second measurement: their mean
# |cos(x, 1)| per layer runs from {glue:text}`cos_layer_min:.4f` to {glue:text}`cos_layer_max:.4f`,
# over all layers {glue:text}`cos_ones_over_random` times a random direction's
# ({glue:text}`random_direction_abs_cos:.4f`). A ratio near 1 means neither on the plane nor aligned
# with 1: RMSNorm leaves that component in, a direction like any other, which γ, W_QK and the
# unembedding read or ignore.
#
# ## 4 · Global centering and scaling vs the per-row norm (the paper's table)
#
# E = W_E (V × d), c its mean row, s = √d / mean ||e||. Each variant is compared row by row with the
# reference norm applied to E without γ and β: mean ± std of the L2 distance and of the cosine
# distance 1 − cos. The paper's reference is LN(E); we also use RMSNorm, and the model's own norm is
# {glue:text}`own_reference`. A row that the reference sends to zero (an all-zero row, such as an
# untrained model's padding row) has no direction: its cosine would be 0/0, so it is left out and
# counted. Here E is {glue:text}`E_shape`, ||c|| = {glue:text}`mean_row_norm:.3f`, mean ||e|| =
# {glue:text}`mean_norm:.3f`, and the rows left out per reference are
# {glue:text}`rows_left_out_text`.

# %%
study.table_of_embeddings().style.format("{:.4g}")

# %% [markdown]
# The identities, checked on every row (largest violation; zero means float64 rounding, except the
# norm, which is computed in float32 as the model does):

# %%
study.identities().style.format("{:.1e}")

# %% [markdown]
# **What to notice.** Scaling by one number never changes a cosine, so Original and Scaled have the
# same cosine distance, and so do Centered and Centered & scaled, for either reference. The norm of
# every normalized row is √d up to eps, for either reference (the "vs √d" row is eps's doing on
# rows with a small mean square; "vs eps formula" is float32 rounding). What differs between the two
# references: RMSNorm(e) is parallel to e, so the cosine distance of Original (and Scaled) to it is
# exactly 0 (here at most {glue:text}`rms_cos_original_max:.1e`), and only the lengths differ; LN(e)
# removes each row's own mean, which no global shift c reproduces. Against LN(E), global centering
# leaves the embeddings at a mean cosine distance of {glue:text}`ln_cos_centered_mean:.3g`, against
# {glue:text}`ln_cos_original_mean:.3g` for doing nothing: centering by the mean row moves them
# {glue:text}`centering_word` the reference.

# %% tags=["remove-input"]
E_rows, skipped = len(lm.view.W_E), study.embeddings["skipped"]
reading = lm.view.reading_norms()
glue("n_sentences", len(ids))
glue("n_k", n_k)
glue("n_layers", L)
glue("middle_layer", L // 2)
glue("n_states", int(study.stats["normalized"].size))
glue("norm_name", {"layer": "LayerNorm", "rms": "RMSNorm"}[study.kind])
glue("eps_text", ", ".join(f"{e:g}" for e in sorted({n.eps for n in reading})))
no_beta = all(n.beta is None for n in reading)
glue("beta_word", "have no β" if no_beta else "have a β")
glue("t_gap", study.sqrt_d["t_gap"])
s_d, m = study.sqrt_d, study.stats["second_moment"]
for end in ("min", "max"):  # more digits than a glued float shows
    glue(f"normalized_norm_{end}_text", f"{s_d[end]:.6f}")
glue("sqrt_d_text", f"{d**0.5:.6f}")
glue("m_at_gap", float(np.median(m[..., s_d["t_gap"]])))
glue("float32_spacing", float(np.spacing(np.float32(d**0.5))))
glue("residual_median_middle", float(study.growth["median_by_layer"][L // 2]))
first, median = study.growth["first_median"], study.growth["median_by_layer"]
glue("first_position_t", int(np.argmax(first)))
glue("first_position_ratio", float(first.max() / median.max()))
glue("first_word", "above" if first.max() > median.max() else "not above")
glue("hat_max", study.plane["hat_max"])
glue(
    "hat_reading",
    "LayerNorm: on the plane up to float32 rounding"
    if study.centers
    else "RMSNorm: x̂ is parallel to x",
)
glue("cos_layer_min", float(study.plane["mean_abs_cos"].min()))
glue("cos_layer_max", float(study.plane["mean_abs_cos"].max()))
glue("own_reference", "LN(E)" if lm.view.final_norm.centers else "RMSNorm(E)")
glue("E_shape", f"{E_rows} × {d}")
glue("mean_row_norm", study.embeddings["mean_row_norm"])
glue("mean_norm", study.embeddings["mean_norm"])
glue("rows_left_out_text", ", ".join(f"{k}: {v}" for k, v in skipped.items()))
ln = study.embeddings["tables"][norms.REFERENCES[0]]["cosine mean"]
glue("centering_word", "further from" if ln.iloc[1] > ln.iloc[0] else "closer to")
values = study.summary()
if not study.centers:
    values["normalized_max_abs_cos_ones"] = not_applicable(
        "RMSNorm does not center: x̂ keeps x's component along 1 (the chapter "
        "measures it against a random direction instead)"
    )

# %% [markdown]
# ## Does the claim hold on this model?
#
# Every claim of this chapter is an exact property of the operations, so each is an *identity*: a check
# that our computation does what the paper describes, true for any weights. The hyperplane is judged on
# the normalized states and only for a norm that centers; on an RMSNorm model it is *not applicable*.

# %% tags=["remove-input"]
conclude("a2_normalization", values, model)
