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
#   first `umap_rows` rows of the **raw** embedding matrix W_E, as in the paper's code, plus the current
#   and the next token's rows when they lie beyond them (so that both are placed as every other token
#   is), and **seeded** (the paper's is not). The path's points are placed with `UMAP.transform`, which looks up each
#   point's nearest fitted rows in the full space. Why raw W_E: with tied embeddings the logits are dot
#   products of the normalized state with the raw rows, and a normalized state is far longer than any
#   row, so its nearest raw rows are nearly the rows of its largest logits: the picture shows where the
#   logits point (measured below). `umap_normalized = True` fits on final_norm(W_E) instead.
# - The fitted UMAP is cached on disk, keyed by model, rows, their content, parameters and seed; the
#   first fit of 10,000 rows takes one to two minutes (numba compilation included).
#
# **What one example can and cannot show.** This chapter follows one token of one sentence. Whether
# ' stone' is the top prediction at the last layer is a fact about that sentence, recorded exactly; it
# says nothing about how often words travel to their successor. That question, over thousands of
# positions and with intervals, is the chapter *Travel in the full space*. What this chapter can
# measure with uncertainty is the picture itself: UMAP is random, so the map is fitted with `n_seeds`
# seeds and every map measurement is reported as a mean over seeds with a 95% interval. And "the path
# ends closer to ' stone' than it starts" is true of most tokens (a state that moves toward the region
# of plausible continuations approaches thousands of them), so we rank ' stone' among every token of the
# map by the same ratio: the path heads for ' stone' *in particular* only if few tokens are approached
# more.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
sentence: str = "To kill two birds with one stone"
token_index: int = (
    -2
)  # which token to follow (negative: from the end); the next token is its target
umap_rows: int = 10000  # the first rows of W_E the UMAP is fitted on
umap_normalized: bool = False  # fit on final_norm(W_E) instead of the raw W_E
n_neighbors: int = 15
min_dist: float = 0.1
seed: int = (
    0  # UMAP random_state of the drawn map; the other fits use seed + 1, seed + 2, ...
)
n_seeds: int = (
    5  # UMAP fits (one per seed): the spread of the map measurements over seeds
)
top_k: int = 5  # tokens per layer in the logit-lens table

# %%
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes
from lotlib.book.summary import record
from lotlib.intervals import exact, over_seeds
from lotlib.traveling_words.figures import path_figure, path_panels
from lotlib.traveling_words.lens import (
    final_normed,
    lens_logits,
    locate,
    logit_lens,
    token_path,
)
from lotlib.traveling_words.umap_map import (
    approach_rank,
    approach_ratios,
    fitted_umap,
    neighbour_agreement,
)

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
view, decode = lm.view, lm.tokenizer.decode
ids, position = locate(lm.tokenizer, sentence, token_index)
if position + 1 >= len(ids):
    raise ValueError(
        "the tracked token needs a next token: choose a token_index before the last token"
    )
if n_seeds < 1:
    raise ValueError(f"n_seeds = {n_seeds}: at least one UMAP fit is needed")
current, target = int(ids[position]), int(ids[position + 1])
X = token_path(lm, ids, position)  # (L+1, d): x(0), ..., x(L)
L = view.n_layers
print(f"{lm!r}; tied embeddings: {view.tied}")
print(f"tokens: {[decode([int(i)]) for i in ids]}")
print(
    f"following {decode([current])!r} at position {position}; its next token is {decode([target])!r}"
)

# %% [markdown]
# ## The embedding map and the path

# %%
W_E = view.W_E.detach().float().cpu().numpy()
rows = min(umap_rows, len(W_E))
fit_ids = np.union1d(np.arange(rows), [current, target])  # the map's tokens
at_current, at_target = np.searchsorted(fit_ids, [current, target])
what = "final_norm(W_E)" if umap_normalized else "W_E"
space = (lambda V: final_normed(lm, V)) if umap_normalized else (lambda V: V)
fitted = space(W_E[fit_ids])
normed = final_normed(lm, X)  # (L+1, d)


def map_path(umap_seed: int):
    """The UMAP fitted with `umap_seed` and the path x(0), final_norm(x(0)), ..., final_norm(x(L)) placed on it
    by one transform."""
    reducer = fitted_umap(
        fitted,
        identity=lm.identity,
        what=what,
        seed=umap_seed,
        n_neighbors=n_neighbors,
        min_dist=min_dist,
    )
    return reducer, reducer.transform(np.vstack([X[:1], normed]))


reducer, path = map_path(seed)
landmarks = {
    decode([current]): reducer.embedding_[at_current],
    decode([target]): reducer.embedding_[at_target],
}
agreement = neighbour_agreement(normed, fitted, k=n_neighbors)
print(
    f"UMAP of {what}: the first {rows} rows"
    + (
        f" and {len(fit_ids) - rows} more (the current and next token)"
        if len(fit_ids) > rows
        else ""
    )
)
print(
    f"norm of a fitted row: median {np.median(np.linalg.norm(fitted, axis=1)):.2f}; "
    f"of final_norm(x(t)): {np.linalg.norm(normed, axis=1).min():.1f} to {np.linalg.norm(normed, axis=1).max():.1f}"
)
print(
    f"share of each normalized state's {n_neighbors} nearest fitted rows that are among its {n_neighbors} largest "
    f"dot products: mean {agreement.mean():.2f} over t = 0..{L} (min {agreement.min():.2f})"
)

# %%
title = f"{decode([current])!r} in {sentence!r} travels toward {decode([target])!r} ({model}; UMAP of {what})"
path_panels(reducer.embedding_, path, landmarks, title)
plt.show()

# %% [markdown]
# **What to notice.** The first panel is the raw input: the token sits among the embeddings, near its
# own row (the red labels are the current and the next token's rows where the map put them). The final
# norm alone (second panel) already moves it: the normalized input is a long vector, and its nearest
# rows are those it has the largest dot products with (the agreement printed above says how closely
# "nearest" and "largest logit" coincide for this model). The blocks then carry it across the map; the arrows of the last panel end near the next word when the model
# predicts it. Distances on a UMAP map are not faithful to the full space, only neighbourhoods are,
# which is why the chapter *Travel in the full space* measures the travel without projection.
#
# The same path, rotatable (hover a grey point for its token, a path point for its layer and the
# layer's top logit-lens token):

# %%
labels = [decode([int(i)]) for i in fit_ids]
top1 = lens_logits(lm, X).argmax(-1)
path_labels = [f"x(0) = input, {decode([current])!r}"] + [
    f"final_norm(x({t})): top {decode([int(top1[t])])!r}" for t in range(L + 1)
]
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
distance = np.linalg.norm(
    path[1:] - landmarks[decode([target])], axis=1
)  # t = 0..L, normalized states
fig, (ax_rank, ax_dist) = plt.subplots(1, 2, figsize=(11, 3.2))
ax_rank.semilogy(np.arange(L + 1), ranks + 1, marker="o")
ax_rank.set(
    xlabel="layer t",
    ylabel="rank + 1",
    title=f"rank of {decode([target])!r} in the logit lens",
)
ax_dist.plot(np.arange(L + 1), distance, marker="o")
ax_dist.set(
    xlabel="layer t",
    ylabel="UMAP distance",
    title=f"distance to {decode([target])!r} on the map (seed {seed})",
)
plt.show()
top1_layers = np.flatnonzero(ranks == 0)
first_top1 = int(top1_layers[0]) if len(top1_layers) else None
first_top5 = int(np.flatnonzero(ranks < 5)[0]) if (ranks < 5).any() else None
print(
    f"rank of {decode([target])!r}: at t = 0 {ranks[0]}, at t = L/2 {ranks[L // 2]}, at t = L {ranks[L]}; "
    f"first layer in the top 5: {first_top5}, first layer at top 1: {first_top1}"
)

# %% [markdown]
# **What to notice.** Early layers keep the current word or fall on very frequent tokens
# (punctuation, function words); the next word climbs the ranking late and reaches the top only in the
# last blocks, if at all. The map tells the same story only loosely: the distance on the map need not
# decrease layer after layer.
#
# ## Does the path head for ' stone', or for everything?
#
# For every token v of the map, the ratio of the path's end distance to its start distance,
# ||y(L) − v|| / ||y(0) − v|| with y = final_norm(x) placed on the map: below 1 the path ends closer to v
# than it starts. We rank the next word among all tokens by that ratio (the share of tokens approached
# more; 0 = the path heads for the next word more than for any other token) and repeat on `n_seeds`
# maps fitted with different seeds.


# %%
def heading(umap_seed: int) -> tuple[float, float, np.ndarray]:
    """On the map of `umap_seed`: the path's distance ratio to the next word, the share of the map's other
    tokens with a smaller ratio, and every other token's ratio."""
    fit, placed = (reducer, path) if umap_seed == seed else map_path(umap_seed)
    ratios = approach_ratios(placed[1], placed[-1], fit.embedding_)
    return (
        float(ratios[at_target]),
        approach_rank(np.delete(ratios, at_target), ratios[at_target]),
        np.delete(ratios, at_target),
    )


seeds = [seed + i for i in range(n_seeds)]
per_seed = [heading(s) for s in seeds]
ratio_by_seed, rank_by_seed = (np.array(column) for column in list(zip(*per_seed))[:2])
target_ratio = over_seeds(ratio_by_seed, unit="UMAP seeds")
target_rank = over_seeds(rank_by_seed, unit="UMAP seeds")
target_rank = replace(
    target_rank, lo=max(target_rank.lo, 0.0), hi=min(target_rank.hi, 1.0)
)  # a share: in [0, 1]
approached = np.array([np.mean(r < 1) for *_, r in per_seed])
fig, ax = plt.subplots(figsize=(8, 3.2))
sns.histplot(
    x=np.log10(per_seed[0][2]),
    bins=80,
    stat="density",
    color="grey",
    ax=ax,
    label="every other token",
)
ax.axvline(
    np.log10(per_seed[0][0]), color="crimson", lw=2, label=f"{decode([target])!r}"
)
ax.axvline(0, color="black", ls=":", lw=1, label="ratio 1")
ax.set(
    xlabel="log10 (end distance / start distance) on the map",
    title=f"How much the path heads for each token (seed {seed})",
)
ax.legend(fontsize=8)
plt.show()
print(
    f"distance ratio to {decode([target])!r}: {target_ratio:.3g} over {n_seeds} seeds; the path ends closer than it "
    f"starts to {approached.mean():.1%} of all tokens; share of tokens approached more than {decode([target])!r}: "
    f"{target_rank:.3g} (per seed: {np.round(rank_by_seed, 4).tolist()})"
)

# %% [markdown]
# **What to notice.** The ratio for the next word is below 1, but so is that of most tokens (the printed
# share): the normalized input starts at the current word's corner of the map and any move away from
# it brings the path nearer to most of the map. The histogram places the next word among them; the
# printed share of tokens approached more, with its interval over seeds, says whether the path heads
# for the next word in particular. On SmolLM2 ' stone' is among the few percent of tokens the path
# approaches most, but the share moves by several points from one seed to the next, so that a handful
# of seeds cannot place it firmly on either side of a 5% bar, and on some seeds even an untrained
# model's path, which does not predict ' stone' at all, lands at a similar rank (its chapter run is the
# report's null). One sentence on a random 3-D map can illustrate travel; it cannot measure it. The
# full-space chapter measures the same question over thousands of positions, without a projection.
#
# **What differs from GPT-2.** The paper uses GPT-2 small (LayerNorm, learned positions added to x(0),
# 12 layers). SmolLM2 uses RMSNorm (no centering: normalized states lie on a sphere but not on the
# hyperplane orthogonal to the all-ones vector), rotary positions (x(0) is the bare embedding, so the
# "input" point and the token's own row coincide), grouped-query attention and 30 layers; its
# embeddings are tied, as GPT-2's are, so reading states against W_E is the model's own readout.
#
# ## Does the claim hold on this model?
#
# Two findings are judged. *The word arrives*: ' stone' is the top logit-lens token at the last layer,
# a fact about one sentence, recorded exactly. *The map heads for it*: ' stone' is among the 5% of
# tokens the path approaches most, a mean over UMAP seeds with its interval. The agreement between
# nearest rows and largest logits explains why the map can be read at all; it is **not diagnostic**:
# a normalized state is far longer than any embedding row for any weights, so its Euclidean nearest rows
# are its largest dot products whether or not the model was trained, and an untrained model passes the
# same test.

# %%
values = {
    "sentence": sentence,
    "token": decode([current]),
    "next_token": decode([target]),
    "position": position,
    "n_layers": L,
    "umap_on": what,
    "umap_rows": rows,
    "tied": bool(view.tied),
    "umap_seeds": seeds,
    "next_rank_first_layer": ranks[0],
    "next_rank_middle_layer": ranks[L // 2],
    "next_rank_last_layer": exact(ranks[L], unit="sentence"),
    "next_prob_last_layer": table[f"p({decode([target])!r})"].iloc[-1],
    "first_layer_next_top1": first_top1,
    "first_layer_next_top5": first_top5,
    "umap_distance_start": distance[0],
    "umap_distance_end": distance[L],
    "umap_distance_ratio": target_ratio,
    "share_of_tokens_approached": float(approached.mean()),
    "target_approach_rank": target_rank,
    "neighbour_logit_agreement_mean": exact(
        agreement.mean(), n=L + 1, unit="states of one path"
    ),
    "neighbour_logit_agreement_min": agreement.min(),
}
record(values)
outcomes = chapter_outcomes("a7_traveling_words", values)
judged = outcomes.set_index("claim")["outcome"]
print(
    f"Paper (Fig. 4, qualitative): the word travels toward the next word. Here {decode([current])!r} "
    f"{'ends at' if ranks[L] == 0 else 'does not end at'} {decode([target])!r}: rank {ranks[L]} at the last layer "
    f"(p = {table[f'p({decode([target])!r})'].iloc[-1]:.3f}), first top-1 at t = {first_top1} "
    f"({judged['A7-arrives']}). On the map the path ends closer than it starts to {approached.mean():.0%} of the "
    f"tokens; {target_rank:.3g} of them are approached more than {decode([target])!r} ({judged['A7-map']}). "
    f"Nearest-row/top-logit agreement {agreement.mean():.2f} ({judged['A7-readout']}, not diagnostic)."
)
outcomes
