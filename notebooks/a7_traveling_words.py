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
# # A7 · Traveling words
#
# **What you will see.** One word of one sentence, followed through every block of the model. In
# "To kill two birds with one stone" the token " one" has to announce " stone". Its residual-stream
# state after each block is passed through the model's final norm, the same map that turns the last
# state into logits, and drawn in a 3-D UMAP of the token embeddings: the word *travels* among the
# embeddings, layer after layer, and ends near the word that comes next. A logit-lens table reads
# the same states as words.
#
# **The paper's claim.** "Traveling Words" (Molina, Fig. 4) reads the transformer geometrically: the
# final norm puts every layer's state on the same sphere where the (tied) embeddings are compared with
# it, so the stack of blocks can be seen as a particle moving on that sphere toward the next word
# ("iterative refinement"). The figure is a picture, not a measurement; the companion chapter
# *Travel in the full space* measures the same travel without any projection.
#
# **How it is computed, and the choices the paper leaves open.**
# - The sentence is tokenized without special tokens (no BOS, as GPT-2 has none); the tracked token is
#   found by tokenizing, not typed: `token_index` counts from the end (-2: the second to last token).
# - x(0) is the input of block 0 (the token embedding, plus the learned position for GPT-2); x(t) is
#   block t's output, captured with hooks. Each is passed through the **full** final norm (gamma, and
#   beta for LayerNorm), as the model does before unembedding.
# - UMAP (umap-learn; n_neighbors 15, min_dist 0.1, 3 components, spectral init) is fitted on the
#   first `umap_rows` rows of the **raw** embedding matrix W_E, as in the paper's code, and **seeded**
#   (the paper's is not). The path's points are placed with `UMAP.transform`, which looks up each
#   point's nearest fitted rows in the full space. Why raw W_E: with tied embeddings the logits are dot
#   products of the normalized state with the raw rows, and a normalized state is far longer than any
#   row, so its nearest raw rows are nearly the rows of its largest logits: the picture shows where the
#   logits point (measured below). `umap_normalized = True` fits on final_norm(W_E) instead.
# - The fitted UMAP is cached on disk, keyed by model, rows, their content, parameters and seed; the
#   first fit of 10,000 rows takes one to two minutes (numba compilation included).

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
sentence: str = "To kill two birds with one stone"
token_index: int = -2  # which token to follow (negative: from the end); the next token is its target
umap_rows: int = 10000  # the first rows of W_E the UMAP is fitted on
umap_normalized: bool = False  # fit on final_norm(W_E) instead of the raw W_E
n_neighbors: int = 15
min_dist: float = 0.1
seed: int = 0  # UMAP random_state
top_k: int = 5  # tokens per layer in the logit-lens table

# %%
import matplotlib.pyplot as plt
import numpy as np

import lotlib
from lotlib import plots
from lotlib.book.summary import record
from lotlib.traveling_words.figures import path_figure, path_panels
from lotlib.traveling_words.lens import final_normed, lens_logits, locate, logit_lens, token_path
from lotlib.traveling_words.umap_map import fitted_umap, neighbour_agreement

lm = lotlib.load_model(model, device=device, dtype=dtype)
view, decode = lm.view, lm.tokenizer.decode
ids, position = locate(lm.tokenizer, sentence, token_index)
if position + 1 >= len(ids):
    raise ValueError("the tracked token needs a next token: choose a token_index before the last token")
current, target = int(ids[position]), int(ids[position + 1])
X = token_path(lm, ids, position)  # (L+1, d): x(0), ..., x(L)
L = view.n_layers
print(f"{lm!r}; tied embeddings: {view.tied}")
print(f"tokens: {[decode([int(i)]) for i in ids]}")
print(f"following {decode([current])!r} at position {position}; its next token is {decode([target])!r}")

# %% [markdown]
# ## The embedding map and the path

# %%
W_E = view.W_E.detach().float().numpy()
rows = min(umap_rows, len(W_E))
what = "final_norm(W_E)" if umap_normalized else "W_E"
space = (lambda V: final_normed(lm, V)) if umap_normalized else (lambda V: V)
fitted = space(W_E[:rows])
reducer = fitted_umap(fitted, identity=lm.identity, what=what, seed=seed, n_neighbors=n_neighbors,
                      min_dist=min_dist)
normed = final_normed(lm, X)  # (L+1, d)
# one transform places the path x(0), final_norm(x(0)), ..., final_norm(x(L)) and the two tokens' rows
placed = reducer.transform(np.vstack([X[:1], normed, space(W_E[[current, target]])]))
path, landmarks = placed[:-2], dict(zip([decode([current]), decode([target])], placed[-2:]))
agreement = neighbour_agreement(normed, fitted, k=n_neighbors)
print(f"UMAP of {what}, first {rows} rows; {decode([target])!r} is "
      f"{'inside' if target < rows else 'outside'} the fitted rows")
print(f"norm of a fitted row: median {np.median(np.linalg.norm(fitted, axis=1)):.2f}; "
      f"of final_norm(x(t)): {np.linalg.norm(normed, axis=1).min():.1f} to {np.linalg.norm(normed, axis=1).max():.1f}")
print(f"share of each normalized state's {n_neighbors} nearest fitted rows that are among its {n_neighbors} largest "
      f"dot products: mean {agreement.mean():.2f} over t = 0..{L} (min {agreement.min():.2f})")

# %%
title = f"{decode([current])!r} in {sentence!r} travels toward {decode([target])!r} ({model}; UMAP of {what})"
path_panels(reducer.embedding_, path, landmarks, title)
plt.show()

# %% [markdown]
# **What to notice.** The first panel is the raw input: the token sits among the embeddings, where its
# own row is placed (the red labels are the current and the next token's rows, placed by the same
# `transform` as the path). The final norm alone (second panel) already moves it: the normalized input
# is a long vector, and its nearest rows are those it has the largest dot products with (the agreement
# printed above says how closely "nearest" and "largest logit" coincide for this model). The blocks
# then carry it across the map; the arrows of the last panel end near the next word when the model
# predicts it. Distances on a UMAP map are not faithful to the full space, only neighbourhoods are,
# which is why the chapter *Travel in the full space* measures the travel without projection.
#
# The same path, rotatable (hover a grey point for its token, a path point for its layer and the
# layer's top logit-lens token):

# %%
labels = [decode([i]) for i in range(rows)]
top1 = lens_logits(lm, X).argmax(-1)
path_labels = [f"x(0) = input, {decode([current])!r}"] + [
    f"final_norm(x({t})): top {decode([int(top1[t])])!r}" for t in range(L + 1)]
plots.show(path_figure(reducer.embedding_, labels, path, path_labels, landmarks, title))

# %% [markdown]
# ## The logit lens
#
# Each layer's state through the final norm and the unembedding: the top tokens with their
# probabilities, and the rank of the next word (0 = top-1).

# %%
table = logit_lens(lm, X, k=top_k, target=target)
ranks = table[f"rank of {decode([target])!r}"].to_numpy()
table

# %%
distance = np.linalg.norm(path[1:] - landmarks[decode([target])], axis=1)  # t = 0..L, normalized states
fig, (ax_rank, ax_dist) = plt.subplots(1, 2, figsize=(11, 3.2))
ax_rank.semilogy(np.arange(L + 1), ranks + 1, marker="o")
ax_rank.set(xlabel="layer t", ylabel="rank + 1", title=f"rank of {decode([target])!r} in the logit lens")
ax_dist.plot(np.arange(L + 1), distance, marker="o")
ax_dist.set(xlabel="layer t", ylabel="UMAP distance", title=f"distance to {decode([target])!r} on the map")
plt.show()
top1_layers = np.flatnonzero(ranks == 0)
first_top1 = int(top1_layers[0]) if len(top1_layers) else None
first_top5 = int(np.flatnonzero(ranks < 5)[0]) if (ranks < 5).any() else None
print(f"rank of {decode([target])!r}: at t = 0 {ranks[0]}, at t = L/2 {ranks[L // 2]}, at t = L {ranks[L]}; "
      f"first layer in the top 5: {first_top5}, first layer at top 1: {first_top1}")
print(f"UMAP distance to {decode([target])!r}: {distance[0]:.2f} after the norm of the input, "
      f"{distance[L]:.2f} at t = L (ratio {distance[L] / distance[0]:.2f})")

# %% [markdown]
# **What to notice.** Early layers keep the current word or fall on very frequent tokens
# (punctuation, function words); the next word climbs the ranking late and reaches the top only in the
# last blocks. The map tells the same story only loosely: the distance on the map need not decrease
# layer after layer.
#
# **What differs from GPT-2.** The paper uses GPT-2 small (LayerNorm, learned positions added to x(0),
# 12 layers). SmolLM2 uses RMSNorm (no centering: normalized states lie on a sphere but not on the
# hyperplane orthogonal to the all-ones vector), rotary positions (x(0) is the bare embedding, so the
# "input" point and the token's own row coincide), grouped-query attention and 30 layers; its
# embeddings are tied, as GPT-2's are, so reading states against W_E is the model's own readout.
#
# ## Does the claim hold on this model?

# %%
arrives = ranks[L] == 0
print(f"Paper (Fig. 4, qualitative): the word travels toward the next word. Here {decode([current])!r} "
      f"{'ends at' if arrives else 'does not end at'} {decode([target])!r}: rank {ranks[L]} at the last layer "
      f"(p = {table[f'p({decode([target])!r})'].iloc[-1]:.3f}), first top-1 at t = {first_top1}. On the map its "
      f"distance to {decode([target])!r} goes from {distance[0]:.2f} to {distance[L]:.2f}; in the full space "
      f"the nearest-row/top-logit agreement is {agreement.mean():.2f}.")

# %%
record({
    "sentence": sentence, "token": decode([current]), "next_token": decode([target]), "position": position,
    "n_layers": L, "umap_on": what, "umap_rows": rows, "tied": bool(view.tied),
    "next_rank_first_layer": ranks[0], "next_rank_middle_layer": ranks[L // 2], "next_rank_last_layer": ranks[L],
    "next_prob_last_layer": table[f"p({decode([target])!r})"].iloc[-1],
    "first_layer_next_top1": first_top1, "first_layer_next_top5": first_top5,
    "umap_distance_start": distance[0], "umap_distance_end": distance[L],
    "umap_distance_ratio": distance[L] / distance[0],
    "neighbour_logit_agreement_mean": agreement.mean(), "neighbour_logit_agreement_min": agreement.min(),
})
