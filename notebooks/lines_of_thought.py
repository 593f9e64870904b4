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
# # B1 · Lines of thought
#
# **What you will see.** Every pseudo-sentence of *Walden* ends in a token, the *pilot*. As the
# pilot passes through the blocks its residual-stream state moves; the sequence of states
# x(0), x(1), …, x(L) is its *line of thought*. Drawn for a few hundred pilots in the first three
# singular directions of the last layer's ensemble, the lines do not scatter: they travel together
# as a bundle that drifts and fans out layer after layer.
#
# **Why it matters.** "Lines of Thought in Large Language Models" (Sarfati et al., ICLR 2025,
# Fig. 1) builds everything else on this picture: if the bundle lives in few dimensions and moves
# smoothly, a linear map plus noise (a Langevin equation) can describe it. This chapter shows the
# picture on our model and measures how low-dimensional it is.
#
# **How it is computed.** The text is collapsed to single spaces, tokenized once and cut into
# non-overlapping chunks of N_k tokens (no BOS, as in the paper). x(t) is block t's output at the last
# position, taken with forward hooks; **the final norm is never applied**. The basis is the thin,
# **uncentered** SVD of the D × N_s matrix of all pilots at t = L (all pilots, not only the plotted ones).

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = None  # cap on pseudo-sentences (None: all of Walden)
n_pilots: int = 500  # trajectories drawn
seed: int = 0  # which pilots are drawn
bos: bool = False  # prepend BOS to every pseudo-sentence

# %%
import matplotlib.pyplot as plt
import numpy as np

import lotlib
from lotlib import plots
from lotlib.book.summary import record
from lotlib.lines_of_thought.ensemble import ensemble_svd

lm, corpus, X = lotlib.walden_trajectories(model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype)  # X: (N_s, L+1, D)
N_s, T, D = X.shape
L = T - 1
print(f"{lm!r}\n{corpus!r}: N_s = {N_s} pseudo-sentences of {corpus.n_k} tokens; trajectories {X.shape}")

# %% [markdown]
# ## (a) The bundle in the last layer's singular basis

# %%
U, S = ensemble_svd(X[:, [L], :])  # basis of the ensemble at t = L
basis = U[0][:, :3]
rng = np.random.default_rng(seed)
pilots = np.sort(rng.choice(N_s, size=min(n_pilots, N_s), replace=False))
layers = np.arange(1, L + 1)
P = X[pilots][:, layers, :].astype(np.float64) @ basis  # (n_pilots, L, 3)
energy = S[0] ** 2 / np.sum(S[0] ** 2)
title = f"{len(pilots)} lines of thought, {model}, t = 1..{L}, on u1..u3 of U({L})"
plots.show(plots.paths_3d(P, layers, title))

# %%
plots.paths_static(P, layers, title)
plt.show()
print(f"share of the ensemble's squared norm at t = L on u1, u2, u3: "
      f"{energy[0]:.3f}, {energy[1]:.3f}, {energy[2]:.3f} (top 3: {energy[:3].sum():.3f})")

# %% [markdown]
# **What to notice.** The lines leave a tight knot at the first layers and fan out as t grows, the
# layer colours ordered along the bundle. The share of the ensemble's squared norm that the three
# plotted directions carry (printed above) says how much of the last layer the picture shows. An
# uncentered SVD puts the ensemble's mean direction first: when the states share a large common
# component, u1 carries most of the norm, and the spread of the bundle lives in u2 and u3.
#
# How low-dimensional is each layer? The number of singular directions needed for 90% of the
# squared norm, layer by layer:

# %%
_, S_all = ensemble_svd(X)
cumulative = np.cumsum(S_all ** 2, axis=1) / np.sum(S_all ** 2, axis=1, keepdims=True)
k90 = 1 + np.argmax(cumulative >= 0.9, axis=1)
fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(np.arange(T), k90, marker="o")
ax.set(xlabel="layer t", ylabel="directions for 90%", title=f"Ensemble dimension, {model}, D = {D}")
plt.show()
print("directions for 90% of the squared norm, t = 0..L:", k90.tolist())

# %% [markdown]
# ## (b) The same lines in raw coordinates
#
# The paper's second panel shows the second half of the layers in three Cartesian coordinates of
# the residual stream. It does not say which; we take the three coordinates with the largest
# variance over pilots at t = L (a choice, stated here).

# %%
second_half = np.arange(L // 2, L + 1)
dims = np.argsort(X[:, L, :].var(axis=0))[::-1][:3]
C = X[pilots][:, second_half][:, :, dims].astype(np.float64)
names = tuple(f"x[{d}]" for d in dims)
title_c = f"t = {L // 2}..{L} in coordinates {', '.join(names)}"
plots.show(plots.paths_3d(C, second_half, title_c, axis_names=names))
plots.paths_static(C, second_half, title_c, axis_names=names)
plt.show()
spread = X[:, L, dims].std(axis=0)
print(f"coordinates {dims.tolist()}: std over pilots at t = L {np.round(spread, 2).tolist()}; "
      f"median std over all coordinates {np.median(X[:, L, :].std(axis=0)):.2f}")

# %% [markdown]
# **What to notice.** In raw coordinates the bundle still moves coherently, but the picture depends on
# which coordinates one picks; the singular basis of panel (a) is the coordinate-free view.
#
# ## Does the claim hold on this model?
#
# The claim of Fig. 1 is qualitative: trajectories form a coherent, low-dimensional bundle. The numbers
# above quantify it for this run: the share of the last layer's squared norm in its top three singular
# directions, and how many directions 90% of each layer needs, against the full dimension D.

# %%
record({
    "n_s": N_s, "n_layers": L, "d_model": D,
    "energy_top3_last_layer": energy[:3].sum(), "energy_u1_last_layer": energy[0],
    "k90_last_layer": k90[L], "k90_middle_layer": k90[L // 2], "k90_over_d_last_layer": k90[L] / D,
})
