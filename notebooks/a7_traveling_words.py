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
# # A7 · Traveling words
#
# **What you will see.** One word of one sentence, followed through every block of the model. In
# "To kill two birds with one stone" the token " one" has to announce " stone". Its residual-stream
# state after each block is passed through the model's final norm, the same map that turns the last
# state into logits, and drawn in a 3-D UMAP of the token embeddings: in the paper's picture the word
# *travels* among the embeddings, layer after layer, and ends near the word that comes next; here we
# see where it ends on our model. A logit-lens table reads
# the same states as words.
#
# **The paper's claim.** "Traveling Words" (Molina, Fig. 4) reads the transformer geometrically: the
# final norm puts every layer's state on the same sphere where the (tied) embeddings are compared with
# it, so the stack of blocks can be seen as a particle moving on that sphere toward the next word
# ("iterative refinement"). The figure is a picture, not a measurement; the companion chapter
# *Travel in the full space* measures the same travel without any projection.
#
# :::{dropdown} How it is computed
# **How it is computed, and the choices the paper leaves open.**
# - The sentence is tokenized without special tokens (no BOS, as GPT-2 has none); the tracked token is
#   found by tokenizing, not typed: `token_index` counts from the end (-2: the second to last token).
# - x(0) is the input of block 0 (the token embedding, plus the learned position for GPT-2); x(t) is
#   block t's output, captured with hooks. Each is passed through the **full** final norm (gamma, and
#   beta for LayerNorm), as the model does before unembedding.
# - UMAP (umap-learn; n_neighbors 15, min_dist 0.1, 3 components, spectral init) is fitted on
#   `umap_rows` rows of the **raw** embedding matrix W_E, plus the current and the next token's rows when
#   they are not among them (so that both are placed as every other token is), and **seeded** (the
#   paper's is not). The paper's code takes the first rows; here each seed draws its own rows from the
#   whole vocabulary (`umap_rows_drawn`; False: the first rows, for every seed), so that a repetition
#   resamples the tokens that make the map as well as UMAP's randomness. The path's points are placed with `UMAP.transform`, which looks up each
#   point's nearest fitted rows in the full space.
#
#   Why raw W_E: with tied embeddings the logits are dot
#   products of the normalized state with the raw rows, and when a normalized state is far longer than
#   any row its nearest raw rows are nearly the rows of its largest logits: the picture then shows where
#   the logits point (both measured below). `umap_normalized = True` fits on final_norm(W_E) instead.
# - The fitted UMAP is cached on disk, keyed by model, rows, their content, parameters and seed, so only
#   the first run of a map pays for its fit.
#
# **What one example can and cannot show.** This chapter follows one token of one sentence. Whether
# ' stone' is the top prediction at the last layer is a fact about that sentence, recorded exactly; it
# says nothing about how often words travel to their successor. That question, over thousands of
# positions and with intervals, is the chapter *Travel in the full space*. What this chapter can
# measure with uncertainty is the picture itself: UMAP is random, and so is which tokens make the map, so
# the map is fitted `n_seeds` times, each on its own rows with its own seed, and every map measurement is
# reported as a mean over these repetitions with a 95% interval.
#
# And "the path
# ends closer to ' stone' than it starts" can be true of most tokens (a state that moves toward the
# region of plausible continuations approaches thousands of them), so we rank ' stone' among every token of the
# map by the same ratio: the path heads for ' stone' *in particular* only if few tokens are approached
# more.
#
# **Code:** `lotlib.chapters.a7_traveling_words.traveling_word`; `lotlib.traveling_words.umap_map` and `lotlib.traveling_words.lens`.
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
sentence: str = "To kill two birds with one stone"
token_index: int = -2  # which token to follow (< 0: from the end); it needs a next
umap_rows: int = 10000  # rows of W_E each UMAP is fitted on
umap_rows_drawn: bool = True  # each seed draws its rows (False: the first)
umap_normalized: bool = False  # fit on final_norm(W_E) instead of the raw W_E
n_neighbors: int = 15
min_dist: float = 0.1
seed: int = 0  # UMAP random_state of the drawn map; other fits: seed + 1, + 2, ...
n_seeds: "Count" = 5  # UMAP fits (one per seed): the spread of the map measurements
top_k: int = 5  # tokens per layer in the logit-lens table

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters.a7_traveling_words import (
    arrival_figure,
    heading_figure,
    travel_figure,
    travel_panels,
    traveling_word,
)
from lotlib.summary import glue
from lotlib.verdicts import conclude

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)

# %% [markdown]
# ## The embedding map and the path
#
# The model is {glue:text}`model_text` (tied embeddings: {glue:text}`tied`). The sentence is
# tokenized as {glue:text}`tokens`; we follow {glue:text}`token_quoted` at position
# {glue:text}`position`, whose next token is {glue:text}`next_quoted`. The map is a UMAP of
# {glue:text}`umap_on` fitted on {glue:text}`umap_rows` rows ({glue:text}`rows_drawn`){glue:text}`extra_rows`, once per seed
# ({glue:text}`umap_seeds`); the first seed's map is drawn.

# %%
word = traveling_word(
    lm,
    sentence,
    token_index,
    seeds=[seed + i for i in range(n_seeds)],
    top_k=top_k,
    rows=umap_rows,
    drawn=umap_rows_drawn,
    normalized=umap_normalized,
    n_neighbors=n_neighbors,
    min_dist=min_dist,
)
path, lens, maps = word.path, word.lens, word.maps
travel_panels(path, maps, model)
plt.show()

# %% tags=["remove-cell"]
for name, value in word.facts().items():
    glue(name, value)
glue("model_text", repr(lm))
glue("n_neighbors_text", n_neighbors)
for name, value in lm.view.facts().items():
    glue(name, value)

# %% [markdown]
# **What to notice.** The first panel is the raw input x(0), placed by its nearest fitted rows (the
# red labels are the current and the next token's rows where the map put them). The final
# norm alone (second panel) moves it: the normalized states have norms {glue:text}`state_norm_min:.1f`
# to {glue:text}`state_norm_max:.1f` along the path, at least {glue:text}`length_ratio:.1f` times the
# median of {glue:text}`row_norm_median:.2f` for a fitted row. How far their nearest rows are those
# they have the largest dot products with: on average {glue:text}`neighbour_logit_agreement_mean` of each normalized
# state's {glue:text}`n_neighbors_text` nearest fitted rows are among its largest dot products (the
# lowest over the path: {glue:text}`neighbour_logit_agreement_min:.2f`).
#
# The blocks then move it on
# the map; the arrows of the last panel end near the next word when the model predicts it.
# Distances on a UMAP map are not faithful to the full space, only neighbourhoods are, which is why the
# chapter *Travel in the full space* measures the travel without projection.
#
# The same path, rotatable (hover a grey point for its token, a path point for its layer and the
# layer's top logit-lens token):

# %%
plots.show(travel_figure(path, maps, lens, model))

# %% [markdown]
# ## The logit lens
#
# Each layer's state through the final norm and the unembedding: the top tokens with their
# probabilities, and the rank of the next word (0 = top-1).

# %%
lens.table

# %%
arrival_figure(path, maps, lens)
plt.show()

# %% [markdown]
# **What to notice.** The rank of {glue:text}`next_quoted` is {glue:text}`next_rank_first_layer` at
# the input, {glue:text}`next_rank_middle_layer` halfway and {glue:text}`next_rank_last_layer` at the
# last layer, where its probability is {glue:text}`next_prob_last_layer:.3f`: it
# {glue:text}`arrives_word` the top token there. It first enters the top 5
# {glue:text}`top5_text` and first reaches the top {glue:text}`top1_text`. In the logit-lens
# literature early layers typically keep the current word or fall on very frequent tokens
# (punctuation, function words); the table shows what this model's do. The map tells the story only
# loosely: on
# the drawn map the last state is {glue:text}`map_distance_word` the next word than the first
# (distance {glue:text}`umap_distance_start:.2f` to {glue:text}`umap_distance_end:.2f`), and the
# distance need not decrease layer after layer.
#
# ## Does the path head for the next word, or for everything?
#
# For every token v of the map, the ratio of the path's end distance to its start distance,
# ||y(L) − v|| / ||y(0) − v|| with y = final_norm(x) placed on the map: below 1 the path ends closer to v
# than it starts. We rank the next word among all tokens by that ratio (the share of tokens approached
# more; 0 = the path heads for the next word more than for any other token) and repeat on `n_seeds`
# maps fitted with different seeds.

# %%
heading_figure(path, maps)
plt.show()

# %% [markdown]
# **What to notice.** The distance ratio of {glue:text}`next_quoted` is
# {glue:text}`umap_distance_ratio` (mean over seeds, 95% interval); the path ends closer than it
# starts to {glue:text}`share_of_tokens_approached:.1%` of all tokens: a path that starts at the
# current word's corner of the map comes nearer to much of the map by moving at all. The histogram places the next word among them; the share of tokens approached more than it,
# {glue:text}`target_approach_rank` over seeds, says whether the path heads for the next word in
# particular; its interval {glue:text}`rank_side` the 5% bar. From one seed to the next the
# share ranges from {glue:text}`rank_seed_min:.3f` to {glue:text}`rank_seed_max:.3f`, and an
# untrained model's path, which does not predict the next word at all, could land at a similar rank
# (its chapter run is the report's null). One sentence on a random 3-D map can illustrate travel; it cannot
# measure it. The full-space chapter measures the same question over thousands of positions, without
# a projection.
#
# **What differs from GPT-2.** The paper uses GPT-2 small (LayerNorm, learned positions added to x(0),
# 12 layers). This run's model normalizes with {glue:text}`norm_text`, has
# {glue:text}`positions_text`, {glue:text}`attention_text` and {glue:text}`n_layers` layers; its
# embeddings are {glue:text}`tied_text`.
#
# ## Does the claim hold on this model?
#
# Two findings are judged. *The word arrives*: the next word is the top logit-lens token at the last
# layer, a fact about one sentence, recorded exactly. *The map heads for it*: the next word is among
# the 5% of tokens the path approaches most, a mean over UMAP seeds with its interval. The agreement
# between nearest rows and largest logits explains why the map can be read at all. It need not tell
# a trained model from an untrained one: when the normalized states are far longer than every
# embedding row (here at least {glue:text}`length_ratio:.1f` times the median row), their Euclidean
# nearest rows are their largest dot products whatever the weights; the report judges it against the
# untrained model's run.

# %% tags=["remove-input"]
conclude(
    "a7_traveling_words",
    {"sentence": sentence, "tied": bool(lm.view.tied), **word.summary()},
    model,
    why_not_diagnostic="a state far longer than the rows has its largest dot "
    "products as nearest rows for any weights",
)
