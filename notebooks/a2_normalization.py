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
# predicts; (2) the residual stream it came from grows by orders of magnitude across layers, which
# the norm erases; (3) how far RMSNorm's states are from the hyperplane x · 1 = 0 that LayerNorm would
# project them on; (4) the paper's table comparing global centering and scaling of the embedding
# matrix with the per-row normalization, with its exact identities checked by code.
#
# **The paper's claim.** "Traveling Words" (Molina, 2023): before γ and β every normalized vector has
# norm exactly √d (27.71 for GPT-2's d = 768), up to eps, so all states live on one sphere; and
# LayerNorm is not a global affine change of the embeddings: centering and scaling the whole matrix
# E by one vector c and one number s does not reproduce LN(E).
#
# **What differs on our model.** SmolLM2-135M uses **RMSNorm** x ↦ γ ⊙ x / sqrt(mean(x²) + eps):
# no centring and no β. Its normalized states are on the sphere of radius √d (up to eps) but not on
# the hyperplane; we measure how far off. The paper's table uses LN(E) as the reference; for an
# RMSNorm model we compute it with both references, LN (the paper's) and the model's own RMSNorm.
#
# **Choices the paper leaves open.** The sample: `n_s` pseudo-sentences of `n_k` tokens drawn at
# random (seeded) from *Walden*, every position kept (the first position included, and also reported
# separately, since a first token can carry an outsized norm). "Measured" norms are computed in float32, exactly
# as the model computes them; the eps formula sqrt(d · m / (m + eps)), with m the mean square
# (RMSNorm) or the variance (LayerNorm) of x, in float64. The table's eps is the final norm's.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_s: int = 64  # pseudo-sentences drawn at random from Walden (every position is used)
n_k: "Tokens" = 50  # tokens per pseudo-sentence
seed: int = 0  # which pseudo-sentences are drawn
blocks: "list[Layer] | None" = None  # layers t whose cos(x, 1) histograms are drawn (None: 0, the middle and L)

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import lotlib
from lotlib import Norm
from lotlib.traveling_words import norms
from lotlib.book.summary import record
from lotlib.models.bounds import layer_indices

lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
corpus = lotlib.walden(lm.tokenizer, n_k=n_k)
rng = np.random.default_rng(seed)
ids = corpus.ids[np.sort(rng.choice(corpus.n_s, size=min(n_s, corpus.n_s), replace=False))]
stats = norms.norm_statistics(lm, ids)  # each (n_s, n_k, L+1)
table = norms.norm_table(stats)
L, d = view.n_layers, view.d_model
blocks = [0, L // 2, L] if blocks is None else layer_indices(blocks, L, "blocks", lm.name)
reading = view.reading_norms()
print(f"{lm!r}\n{ids.size} states per layer ({len(ids)} pseudo-sentences x {n_k} positions), t = 0..{L}")
print(f"norms: {reading[0].kind}Norm, eps = {sorted({n.eps for n in reading})}, β: "
      f"{'none' if all(n.beta is None for n in reading) else 'yes'}; √d = {d ** 0.5:.4f}")

# %% [markdown]
# ## 1 · The normalized state has norm √d, up to eps
#
# For each layer: how far the normalized state falls short of √d, averaged over the sample, measured
# and as the eps formula predicts; and the largest disagreement between the two over every state.
# The table below the figure lists every layer (with the residual norms and cos(x, 1) of sections 2
# and 3).

# %%
gap = table[["sqrt(d) - ||x̂|| measured", "sqrt(d) - ||x̂|| eps-predicted", "max |measured - predicted|"]]
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.semilogy(table.index, gap.iloc[:, 0].abs(), "o-", label="√d − ||x̂||, measured (float32)")
ax.semilogy(table.index, gap.iloc[:, 1], "x--", label="√d − ||x̂||, eps-predicted")
ax.semilogy(table.index, gap.iloc[:, 2], ".:", color="grey", label="max |measured − predicted| over states")
ax.set(xlabel="layer t (norm reading x(t); t = L: final norm)", ylabel="gap",
       title=f"||x̂|| vs √d = {d ** 0.5:.3f}, {model}")
ax.legend(fontsize=8)
plt.show()
worst = float(np.abs(stats["normalized"] - stats["predicted"]).max())
shortfall = (d ** 0.5 - stats["normalized"]).max((0, 1))  # (L+1,)
largest_gap, t_gap = float(shortfall.max()), int(np.argmax(shortfall))
print(f"||x̂|| over all {stats['normalized'].size} normalized states: {stats['normalized'].min():.6f} .. "
      f"{stats['normalized'].max():.6f}; largest shortfall from √d {largest_gap:.2e} (at t = {t_gap}); "
      f"largest |measured − eps formula| "
      f"{worst:.1e} = {worst / d ** 0.5:.1e} √d (float32 resolution near √d: "
      f"{np.spacing(np.float32(d ** 0.5)):.1e})")
table.style.format({**{c: "{:.4g}" for c in table.columns[1:4]}, **{c: "{:.2e}" for c in table.columns[4:]}})

# %% [markdown]
# **What to notice.** At t = 0 the states are raw embeddings with a small mean square, and eps takes
# a visible bite: the normalized norm falls short of √d by the printed amount, and the eps formula
# predicts it. As the residual stream grows, eps/m shrinks and so does the shortfall; once it falls
# below float32's resolution near √d (printed), the measured values are rounding noise around the
# formula. Over every state the measurement agrees with sqrt(d · m / (m + eps)) to float precision:
# the claim holds in its exact form, √d up to eps.
#
# ## 2 · The residual stream grows; the norm erases the growth
#
# The norm of the state *before* normalization, by layer (median and the 10–90% band over positions
# after the first; the first position separately).

# %%
residual = stats["residual"]  # (n_s, n_k, L+1)
rest = residual[:, 1:].reshape(-1, L + 1)
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.fill_between(table.index, *np.percentile(rest, [10, 90], axis=0), alpha=0.25, label="positions ≥ 1, 10–90%")
ax.semilogy(table.index, np.median(rest, 0), "o-", label="positions ≥ 1, median")
ax.semilogy(table.index, np.median(residual[:, 0], 0), "s--", color="C3", label="first position, median")
ax.axhline(d ** 0.5, color="grey", ls=":", label="√d (every normalized state)")
ax.set(xlabel="layer t", ylabel="||x(t)||", title=f"Residual-stream norm before normalization, {model}")
ax.legend(fontsize=8)
plt.show()
median_by_layer = np.median(rest, 0)
growth = float(median_by_layer[L] / median_by_layer[0])
increases = int(np.sum(np.diff(median_by_layer) > 0))
print(f"median ||x(t)|| (positions ≥ 1): t = 0: {median_by_layer[0]:.2f}, "
      f"t = {L // 2}: {median_by_layer[L // 2]:.1f}, "
      f"t = {L}: {median_by_layer[L]:.1f}; growth x{growth:.0f}; the median grows at {increases} of {L} layers")
print(f"first position: median ||x(t)|| up to {np.median(residual[:, 0], 0).max():.0f} (t = "
      f"{int(np.argmax(np.median(residual[:, 0], 0)))}), "
      f"{np.median(residual[:, 0], 0).max() / median_by_layer.max():.0f}x the largest median of the other positions")

# %% [markdown]
# **What to notice.** The residual stream's norm grows with depth (the printed factor and count of
# growing layers), while every normalized state has the same norm √d: the blocks read directions
# only, so a write of a given size turns the stream less as it grows. On this model the first position
# stands apart (printed): with no BOS token, the first token of each pseudo-sentence plays the
# "attention sink" and carries a much larger norm, which is why the band is drawn over the other
# positions.
#
# ## 3 · How far RMSNorm's states are from LayerNorm's hyperplane
#
# LayerNorm removes the component of x along the all-ones vector; RMSNorm keeps it. Relative to ||x||
# that component is cos(x, 1) = mean(x) √d / ||x||, which normalization does not change. Per layer,
# the mean of |cos(x, 1)| against what a uniformly random direction would give.

# %%
cos = stats["cos_ones"].reshape(-1, L + 1)
baseline = norms.random_cos_to_ones(d)
fig, (ax, hx) = plt.subplots(1, 2, figsize=(12, 3.5))
ax.plot(table.index, table["mean |cos(x, 1)|"], "o-", label="states x(t)")
ax.axhline(baseline, color="grey", ls="--", label=f"random direction ({baseline:.3f})")
ax.axhline(0, color="C2", lw=2, label="after LayerNorm's centring (exactly 0)")
ax.set(xlabel="layer t", ylabel="mean |cos(x, 1)|", title="Distance from the hyperplane x · 1 = 0, relative to ||x||")
ax.legend(fontsize=8)
grid = np.linspace(-4, 4, 200) / d ** 0.5
for t in blocks:
    hx.hist(cos[:, t], bins=60, density=True, histtype="step", lw=1.5, label=f"t = {t}")
hx.plot(grid, norms.random_cos_density(grid, d), "k--", lw=1, label="random direction")
hx.set(xlabel="cos(x, 1)", ylabel="density", title="Distribution over states")
hx.legend(fontsize=8)
plt.show()
mean_abs_cos = table["mean |cos(x, 1)|"]
print(f"mean |cos(x, 1)| over layers: {mean_abs_cos.min():.4f} .. {mean_abs_cos.max():.4f} (random direction: "
      f"{baseline:.4f}); largest |cos| over all states {np.abs(cos).max():.3f}")

# %% [markdown]
# **What to notice.** The states entering the norms are neither on the hyperplane nor far from it:
# their mean |cos(x, 1)| is of the order of a random direction's (the printed range against the
# baseline), and the histograms show how each layer's states spread around it. LayerNorm would put
# every one of them exactly on the plane; RMSNorm leaves the mean component in, a direction like any
# other, which γ, W_QK and the unembedding read or ignore.
#
# ## 4 · Global centering and scaling vs the per-row norm (the paper's table)
#
# E = W_E (V × d), c its mean row, s = √d / mean ||e||. Each variant is compared row by row with the
# reference norm applied to E without γ and β: mean ± std of the L2 distance and of the cosine
# distance 1 − cos. The paper's reference is LN(E); we also use the model's own RMSNorm.

# %%
E = view.W_E.detach()
eps = view.final_norm.eps
references = {"LN(E) (the paper's)": Norm.unit("layer", d, eps),
              "RMSNorm(E)": Norm.unit("rms", d, eps)}
distances = {name: norms.row_distances(E, ref) for name, ref in references.items()}
identities = {name: norms.table_identities(E, ref, distances[name]) for name, ref in references.items()}
for name, dist in distances.items():
    own = " — the model's own norm" if references[name].kind == view.final_norm.kind else ""
    print(f"\nreference {name}{own}: E is {tuple(E.shape)}, ||c|| = {E.double().mean(0).norm():.3f}, "
          f"mean ||e|| = {E.double().norm(dim=1).mean():.3f}")
    display(norms.distance_table(dist).style.format("{:.4g}"))

# %% [markdown]
# The identities, checked on every row (largest violation; zero means float64 rounding, except the
# norm, which is computed in float32 as the model does):

# %%
pd.DataFrame(identities).style.format("{:.1e}")

# %% [markdown]
# **What to notice.** Scaling by one number never changes a cosine, so Original and Scaled have the
# same cosine distance, and so do Centered and Centered & scaled, for either reference. The norm of
# every normalized row is √d up to eps, for either reference (the "vs √d" row is eps's doing on
# rows with a small mean square; "vs eps formula" is float32 rounding). What differs between the two
# references: RMSNorm(e) is parallel to e, so the cosine distance of Original (and Scaled) to it is
# exactly 0, and only the lengths differ; LN(e) removes each row's own mean, which no global
# shift c reproduces. On this model the mean row c is large (||c|| printed above), so global
# centering moves the embeddings much further from either reference than doing nothing.
#
# ## Does the claim hold on this model?

# %%
ln_id, rms_id = identities["LN(E) (the paper's)"], identities["RMSNorm(E)"]
cos_gaps = [v for checks in identities.values() for k, v in checks.items() if k.startswith("cos")]
norm_gaps = [checks["norm_vs_eps_formula"] for checks in identities.values()]
identities_hold = max(cos_gaps) < 1e-9 and max(norm_gaps) < 1e-5 * d ** 0.5  # float64 / float32 rounding
rms_cos_original = float(distances["RMSNorm(E)"]["Original E"][1].abs().max())
print(f"||x̂|| = √d ({d ** 0.5:.4f}; paper: 27.71 for d = 768) up to eps: the eps formula matches every "
      f"normalized state to {worst / d ** 0.5:.1e} √d; the raw shortfall from √d reaches {largest_gap:.2e} "
      f"(at t = {t_gap}, where eps matters most).")
print(f"on the hyperplane: the states entering the norms have mean |cos(x, 1)| {mean_abs_cos.mean():.4f} "
      f"averaged over layers, {mean_abs_cos.mean() / baseline:.2f} x a random direction's; this model's "
      + ("LayerNorm removes that component exactly: the claim holds." if reading[0].centres else
         "RMSNorm keeps it: the centring claim does not apply."))
print(f"table identities: cos(Original) = cos(Scaled) and cos(Centered) = cos(Centered & scaled) to "
      f"{max(cos_gaps):.0e} for both references; "
      f"||ref(e)|| = eps formula to {max(norm_gaps):.0e}: "
      f"{'all hold' if identities_hold else 'NOT all hold'}. Extra for RMSNorm: cos distance of Original is "
      f"{rms_cos_original:.0e} (parallel).")

# %%
ln_table, rms_table = (norms.distance_table(distances[name]) for name in references)
record({
    "n_states_per_layer": int(ids.size), "d_model": d, "sqrt_d": d ** 0.5, "norm_kind": reading[0].kind,
    "normalized_norm_min": float(stats["normalized"].min()), "normalized_norm_max": float(stats["normalized"].max()),
    "max_shortfall_from_sqrt_d": largest_gap, "max_abs_measured_minus_eps_formula": worst,
    "max_rel_measured_minus_eps_formula": worst / d ** 0.5,
    "residual_median_t0": float(median_by_layer[0]), "residual_median_tL": float(median_by_layer[L]),
    "residual_growth_factor": growth, "residual_layers_growing": increases,
    "first_position_max_median_norm": float(np.median(residual[:, 0], 0).max()),
    "mean_abs_cos_ones_by_layer": mean_abs_cos.tolist(), "mean_abs_cos_ones": float(mean_abs_cos.mean()),
    "random_direction_abs_cos": baseline, "cos_ones_over_random": float(mean_abs_cos.mean() / baseline),
    "ln_table": ln_table.to_dict(orient="index"), "rms_table": rms_table.to_dict(orient="index"),
    "ln_identities": ln_id, "rms_identities": rms_id, "table_identities_hold": identities_hold,
    "ln_cos_original_mean": float(ln_table.loc["Original E", "cosine mean"]),
    "ln_cos_centered_mean": float(ln_table.loc["Centered E-c", "cosine mean"]),
    "rms_cos_original_max": rms_cos_original,
})
