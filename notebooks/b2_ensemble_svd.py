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
# # B2 · The ensemble's singular basis, layer by layer
#
# **What you will see.** At every layer t the states of all pilots form a D × N_s matrix; its thin,
# uncentered SVD gives a basis U(t) and singular values Σ(t). Three panels describe it: (a) how much the
# first four singular directions turn from one layer to another, as L × L maps of angles; (b) the
# singular-value spectra of every layer on log–log axes; (c) how many singular directions of the last
# layer the model needs to keep its next-token distribution, measured by a KL divergence against a
# baseline.
#
# **Why it matters.** "Lines of Thought in Large Language Models" (Sarfati et al., ICLR 2025, Fig. 2)
# uses this basis for everything that follows: the linear extrapolation of Eq. 1 (chapter B3) carries a
# state from U(t) to U(t+τ), which only makes sense if the leading directions turn slowly across layers,
# and the paper argues that the ensemble lives in a subspace of K0 = 256 = D/4 directions for GPT-2
# medium, enough to recover most of the next-token distribution.
#
# **How it is computed.** As in chapter B1: Walden in non-overlapping pseudo-sentences of N_k tokens,
# the pilot is the last token, x(t) is block t's output (t = 0 is the input of block 0, the embedding),
# the final norm is never part of a trajectory, and the SVD is uncentered over all pilots. The paper
# leaves open two choices, made here and stated again where they matter:
#
# - **Which vector is "u_i" at another layer.** Singular vectors come back sorted by singular value and
#   with arbitrary signs; to compare layers, the columns are re-ordered and re-signed by an optimal
#   assignment between neighbouring layers (Hungarian algorithm on |U(t)ᵀU(t±1)|, `lotlib.lines_of_thought.ensemble.align_bases`).
#   The chain starts at the **middle layer** L/2, so u_1..u_4 are its four leading directions followed
#   forward and backward through the layers. (Starting from the last layer instead names the columns by
#   U(L), and on SmolLM2 the third direction of U(L) is a new one that the last few blocks create: before
#   them it sits deep in the bulk of the spectrum, and its column is noise. The printed ranks below check
#   that the four tracked directions stay among the leading ones at every layer.)
# - **The truncation protocol of panel (c)** is described in its section; both readings are computed.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = None  # cap on pseudo-sentences (None: all of Walden)
bos: bool = False  # prepend BOS to every pseudo-sentence
n_propagated: int = 128  # pilots for the truncate-every-layer protocol (0 skips it)
seed: int = 0  # which pilots the propagated protocol uses

# %%
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import cm, colors

import lotlib
from lotlib.lines_of_thought.extrapolation import basis_angles
from lotlib.book.summary import record
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.truncation import consecutive_kl, propagated_truncated_kl, truncated_kl

lm, corpus, X = lotlib.walden_trajectories(model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype)  # X: (N_s, L+1, D)
N_s, T, D = X.shape
L = T - 1
U, S = ensemble_svd(X)  # per layer, sorted by decreasing singular value
U_al, S_al = align_bases(U, S, reference=L // 2)  # columns named by the middle layer's order
print(f"{lm!r}\n{corpus!r}: trajectories {X.shape}; ensemble SVD keeps k = {S.shape[1]} directions per layer")

# %% [markdown]
# ## (a) How the leading singular directions turn across layers
#
# For each of u_1..u_4 and each pair of layers (t1, t2), the angle arccos|u_i(t1)·u_i(t2)| in degrees:
# 0 means the same direction, 90 orthogonal. The absolute value makes the angle blind to the sign.

# %%
angles = np.stack([basis_angles(U_al, i) for i in range(4)])  # (4, T, T)
fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), constrained_layout=True)
for i, ax in enumerate(axes):
    image = ax.imshow(angles[i], vmin=0, vmax=90, cmap="magma", origin="lower")
    ax.set(title=f"u{i + 1}", xlabel="layer t2", ylabel="layer t1" if i == 0 else None)
fig.colorbar(image, ax=axes, label="angle (degrees)", shrink=0.9)
fig.suptitle(f"Angles between aligned singular vectors across layers, {model}")
plt.show()

layers = np.arange(1, L)  # consecutive pairs (t, t+1) among the blocks' outputs
step = angles[:, layers, layers + 1]  # (4, L-1)
half = angles[:, L // 2, L]
rank = (S[:, None, :] > S_al[:, :4, None]).sum(-1)  # (T, 4): how many directions of layer t outrank u_i
last_step = angles[:, L - 1, L]
for i in range(4):
    print(f"u{i + 1}: among the top {rank[1:, i].max() + 1} directions of every layer t = 1..{L}; median angle between consecutive layers (t = 1..{L}) {np.median(step[i]):5.1f} deg; "
          f"u{i + 1}({L // 2}) vs u{i + 1}({L}) {half[i]:5.1f} deg; embedding u{i + 1}(0) vs u{i + 1}(1) "
          f"{angles[i, 0, 1]:5.1f} deg; last step u{i + 1}({L - 1}) vs u{i + 1}({L}) {last_step[i]:5.1f} deg")

# %% [markdown]
# **What to notice.** Dark squares along the diagonal are runs of layers over which a direction stays put;
# where the colour turns bright away from the diagonal, the direction has been replaced. The printed
# medians say how far u_i turns in one step, the middle-to-last angle how far it travels over the second
# half, and the last step whether the final block turns the basis more than the others (the paper's
# "last-layer anomaly"). Compare the first row and column (t = 0, the token embedding before any block)
# with the rest: the angle printed for u_i(0) vs u_i(1) says how much the first block rewrites the basis.
#
# ## (b) Singular-value spectra
#
# The sorted singular values σ_1(t) ≥ σ_2(t) ≥ … of every layer, on log–log axes, coloured by layer.

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
norm = colors.Normalize(0, L)
index = np.arange(1, S.shape[1] + 1)
for t in range(T):
    ax.loglog(index, S[t], color=cm.viridis(norm(t)), lw=1)
ax.set(xlabel="index i", ylabel="singular value σ_i(t)", title=f"Singular-value spectra per layer, {model}")
fig.colorbar(cm.ScalarMappable(norm=norm, cmap="viridis"), ax=ax, label="layer t")
plt.show()

mid_range = (index >= 10) & (index <= S.shape[1] // 2)
slopes = np.array([np.polyfit(np.log(index[mid_range]), np.log(S[t, mid_range]), 1)[0] for t in range(T)])
gap = S[:, 0] / S[:, 1]
print(f"sigma_1 / sigma_2 at t = 1, {L // 2}, {L}: {gap[1]:.1f}, {gap[L // 2]:.1f}, {gap[L]:.1f}")
print(f"log-log slope of sigma_i over i = 10..{S.shape[1] // 2} at t = 1, {L // 2}, {L}: "
      f"{slopes[1]:.2f}, {slopes[L // 2]:.2f}, {slopes[L]:.2f}")

# %% [markdown]
# **What to notice.** The uncentered SVD puts the ensemble's common direction first: σ_1 stands far above
# the rest (the printed ratio σ_1/σ_2), and the whole spectrum rises with depth as the states' norms grow.
# Beyond the first few values the spectra fall roughly as a power of the index (the printed slopes), with
# a steep drop at the end where directions carry almost nothing.
#
# ## (c) How many directions the next-token distribution needs
#
# Let p be the model's next-token distribution for a pilot, final norm and unembedding applied to x(L).
# p_K is the same with the state truncated to its top-K singular directions, and we plot the mean
# KL(p_K ‖ p) over pilots against K. The baseline is the median of KL(p_{j+1} ‖ p_j) between the true
# distributions of consecutive pseudo-sentences j and j+1, which are unrelated pieces of text: a KL below
# it means the truncated distribution is closer to the truth than another sentence's distribution is.
#
# The paper leaves the truncation protocol open, so we compute both readings:
#
# 1. **Last layer only** (the simplest reading): project x(L), before the final norm, onto the top-K
#    singular vectors of U(L), then apply the final norm and the unembedding. All pilots.
# 2. **Every layer, propagated**: after every block t = 1..L, replace the pilot's state by its projection
#    onto the top-K singular vectors of U(t) and let the remaining blocks run on it with the model's own
#    position embeddings and causal mask. The other tokens of the pseudo-sentence are left alone, and
#    causality makes them independent of the pilot, so their keys and values are computed once and kept
#    in the model's key-value cache. This protocol runs on a random subsample of pilots.
#
# K runs over the powers of two below D, plus D/4 (the paper's K0 for GPT-2 medium is D/4) and D. At
# K = D the basis spans every pilot's state, so both protocols give KL = 0 up to rounding.

# %%
ks = sorted({2 ** j for j in range(int(np.log2(D)) + 1) if 2 ** j < D} | {D // 4, D})
kl_last = truncated_kl(lm.view, X[:, L], U[L], ks)  # (len(ks), N_s)
baseline = consecutive_kl(lm.view, X[:, L])
rng = np.random.default_rng(seed)
sub = np.sort(rng.choice(N_s, size=min(n_propagated, N_s), replace=False))
kl_every = propagated_truncated_kl(lm, corpus.ids[sub], U, ks) if len(sub) else None

fig, ax = plt.subplots(figsize=(7, 4.5))
ax.loglog(ks[:-1], kl_last.mean(1)[:-1], marker="o", label=f"last layer only ({N_s} pilots)")
if kl_every is not None:
    ax.loglog(ks[:-1], kl_every.mean(1)[:-1], marker="s", label=f"every layer, propagated ({len(sub)} pilots)")
ax.axhline(np.median(baseline), color="k", ls="--", label="median KL, consecutive pseudo-sentences")
ax.axvline(D // 4, color="grey", ls=":", label="K = D/4")
ax.set(xlabel="K (top singular directions kept)", ylabel="mean KL(p_K ‖ p) (nats)",
       title=f"Next-token distribution from truncated states, {model}, D = {D}")
ax.legend(fontsize=8)
plt.show()


def first_below(curve: np.ndarray, level: float) -> int | None:
    """The smallest K of the grid whose mean KL is below `level` (None if none is)."""
    below = np.flatnonzero(curve < level)
    return ks[below[0]] if len(below) else None


base = float(np.median(baseline))
k0_last = first_below(kl_last.mean(1), base)
quarter = ks.index(D // 4)
print(f"baseline: median KL between consecutive pseudo-sentences {base:.3f} nats (mean {baseline.mean():.3f})")
print(f"last layer only: mean KL at K = {ks[0]}: {kl_last[0].mean():.3f}; at K = D/4 = {D // 4}: "
      f"{kl_last[quarter].mean():.3f} ({kl_last[quarter].mean() / base:.1%} of the baseline); at K = D: "
      f"{kl_last[-1].mean():.1e}")
print(f"last layer only: smallest K of the grid below the baseline: K = {k0_last}, K/D = "
      f"{k0_last / D if k0_last else float('nan'):.3f}")
if kl_every is not None:
    k0_every = first_below(kl_every.mean(1), base)
    print(f"every layer: mean KL at K = {ks[0]}: {kl_every[0].mean():.3f}; at K = D/4: {kl_every[quarter].mean():.3f} "
          f"({kl_every[quarter].mean() / base:.1%} of the baseline); at K = D: {kl_every[-1].mean():.1e}; "
          f"smallest K below the baseline: K = {k0_every}")
    print(f"on the same {len(sub)} pilots, last layer only at K = D/4: {kl_last[quarter, sub].mean():.3f}")

# %% [markdown]
# **What to notice.** Both curves fall as K grows and reach 0 at K = D (the full basis reproduces the
# state). Where a curve crosses the dashed baseline, keeping K directions gives a distribution closer to
# the truth than an unrelated sentence's distribution is. Compare the two protocols at the same K (the
# printed values on the same pilots): truncating after every layer lets the error of each truncation pass
# through all later blocks. The KL at K = D/4 (dotted line) is the direct test of the paper's K0 = D/4.
# How the final norm acts matters here: our model's RMSNorm divides by the root mean square without
# centering (GPT-2's LayerNorm subtracts the mean first), so dropping directions also changes the scale the
# norm divides by. Like GPT-2, SmolLM2 ties its unembedding to its embedding; D = 576 here, 1024 for
# GPT-2 medium.
#
# ## Does the claim hold on this model?

# %%
k0_every = first_below(kl_every.mean(1), base) if kl_every is not None else None
print(f"Paper (GPT-2 medium): K0 = 256 = D/4 singular directions recover most of the next-token distribution.")
print(f"Here ({model}, D = {D}): with last-layer truncation the mean KL falls below the consecutive-sentence "
      f"baseline ({base:.2f} nats) at K = {k0_last} (K/D = {k0_last / D if k0_last else float('nan'):.3f}); at K = D/4 "
      f"it is {kl_last[quarter].mean():.3f} nats, {kl_last[quarter].mean() / base:.1%} of the baseline.")
if kl_every is not None:
    print(f"Truncating after every layer: below the baseline from K = {k0_every} "
          f"(K/D = {k0_every / D if k0_every else float('nan'):.3f}); at K = D/4 {kl_every[quarter].mean():.3f} nats.")
print(f"Median angle between consecutive layers for u1..u4: "
      f"{', '.join(f'{np.median(step[i]):.1f}' for i in range(4))} degrees.")

# %%
record({
    "n_s": N_s, "n_layers": L, "d_model": D,
    "median_consecutive_angle_u1": np.median(step[0]), "median_consecutive_angle_u2": np.median(step[1]),
    "median_consecutive_angle_u3": np.median(step[2]), "median_consecutive_angle_u4": np.median(step[3]),
    "angle_u1_middle_to_last": half[0], "angle_u2_middle_to_last": half[1],
    "angle_u1_last_step": last_step[0], "max_rank_u1_to_u4": rank[1:].max() + 1,
    "sigma1_over_sigma2_last": gap[L], "spectrum_slope_middle": slopes[L // 2], "spectrum_slope_last": slopes[L],
    "kl_baseline_median": base, "kl_baseline_mean": baseline.mean(),
    "ks": ks, "kl_last_layer_mean": kl_last.mean(1),
    "k0_last_layer": k0_last, "k_over_d_below_baseline": k0_last / D if k0_last else None,
    "kl_last_layer_at_quarter_d": kl_last[quarter].mean(),
    "kl_last_layer_at_quarter_d_over_baseline": kl_last[quarter].mean() / base,
    "n_propagated": len(sub),
    "kl_every_layer_mean": kl_every.mean(1) if kl_every is not None else None,
    "k0_every_layer": k0_every, "k_over_d_below_baseline_every_layer": k0_every / D if k0_every else None,
    "kl_every_layer_at_quarter_d": kl_every[quarter].mean() if kl_every is not None else None,
})
