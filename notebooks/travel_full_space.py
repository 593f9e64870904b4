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
# # Travel in the full space
#
# **What you will see.** The traveling-words picture (chapter A7) measured without any projection. For
# every token of a sample of *Walden* pseudo-sentences and every block, we ask whether the block moves
# the token's normalized state in the direction that leads from the current word to the next one, and
# compare with the same question asked about a randomly chosen next word. One curve per layer, a
# difference with its confidence interval, and one number for the whole path.
#
# **The claim and why it matters.** "Traveling Words" (Molina) draws a word's states, read through the
# final norm, as a path among the embeddings that heads for the next word (Fig. 4, a UMAP projection).
# The reviewers objected that the path toward the next word may be an artifact of projecting 768
# dimensions onto 2 or 3. This chapter answers with a number in the full space.
#
# **How it is computed.** For pseudo-sentence s and position i (the current token w_i, the next
# token w_{i+1}, both inside the chunk), with y(t) = final_norm(x(t)) the state at position i after
# block t passed through the model's full final norm (gamma included):
#
# - the update of block t+1 is y(t+1) - y(t), t = 0..L-1; the whole trip is y(L) - y(0);
# - the target direction is e(w_{i+1}) - e(w_i), with e the rows of the **raw** embedding W_E;
# - travel(t) = cos(y(t+1) - y(t), e(w_{i+1}) - e(w_i)), averaged over positions, then over sentences.
#
# *Why raw W_E.* With tied embeddings and no output bias (GPT-2, SmolLM2) the logits are y · e, so
# (y(t+1) - y(t)) · (e(next) - e(current)) is exactly the change block t+1 makes to the logit gap between
# the next and the current word: the raw rows are the directions the model reads. The same measure with
# normalized rows, final_norm(e(next)) - final_norm(e(current)) (both endpoints in the space of y), is
# computed in the same pass and shown beside it.
#
# *Baseline.* The next tokens of the whole sample are permuted (seeded): each position keeps its state
# and its current word but gets someone else's next word. The permutation keeps token frequencies, so a
# drift toward frequent words or away from the current word scores the same in both; only the specific
# next word makes a difference. Positions where the target is zero (next = current) are left out.
#
# *Two controls* (beyond what the reviewers asked). A word that already occurred in the passage is more
# likely to come next than a word drawn from the whole corpus, so a state that merely drifts toward
# its context could beat the whole-sample shuffle. The second baseline permutes next tokens *within*
# each pseudo-sentence: the rival word then comes from the same passage. And the whole measurement is
# repeated on an **untrained** model of the same architecture (fresh seeded weights, embeddings
# included), which sees the same text but has learned nothing.
#
# *Uncertainty.* Positions of one sentence share context, so the unit of resampling is the sentence:
# the difference (true - shuffled) is averaged per sentence, and we report its standard error over
# sentences and a 95% bootstrap interval resampling sentences.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_sentences: int = 256  # pseudo-sentences sampled from Walden (all their positions are used)
n_control: int = 64  # of those, how many the untrained control model reads (0: no control)
seed: int = 0  # which sentences, the shuffles of next tokens, the untrained weights and the bootstrap
n_boot: int = 2000  # bootstrap resamples of sentences
batch_size: int = 16  # sentences per forward pass

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import lotlib
from lotlib.book.summary import record
from lotlib.traveling_words.travel import shuffled_next, travel_cosines, travel_summaries

lm = lotlib.load_model(model, device=device, dtype=dtype)
corpus = lotlib.walden(lm.tokenizer, n_k=n_k)
rng = np.random.default_rng(seed)
ids = corpus.ids[np.sort(rng.choice(corpus.n_s, size=min(n_sentences, corpus.n_s), replace=False))]
baselines = {"shuffled": shuffled_next(ids[:, 1:], seed),
             "shuffled within sentence": shuffled_next(ids[:, 1:], seed, within_rows=True)}
travel = travel_cosines(lm, ids, baselines, batch_size=batch_size)
L, D = lm.view.n_layers, lm.view.d_model
print(f"{lm!r}; tied embeddings: {lm.view.tied}, output bias: {lm.view.b_U is not None}")
print(f"{len(ids)} of {corpus.n_s} pseudo-sentences of {n_k} tokens: {ids[:, :-1].size} positions; "
      f"{np.mean(ids[:, 1:] == ids[:, :-1]):.2%} with next = current; baseline next = current (left out): "
      + ", ".join(f"{k} {np.mean(v == ids[:, :-1]):.2%}" for k, v in baselines.items()))

# %%
control_rows = np.sort(rng.choice(len(ids), size=min(n_control, len(ids)), replace=False))
if len(control_rows):
    null = lotlib.load_model(model, untrained=True, seed=seed, device=device, dtype=dtype)
    control = travel_cosines(null, ids[control_rows], {k: v[control_rows] for k, v in baselines.items()},
                             batch_size=batch_size)
    print(f"control: {null!r} on {len(control_rows)} of the same pseudo-sentences")
parts = ("steps", "trip")
steps, trips = (travel_summaries(travel, part, n_boot=n_boot, seed=seed) for part in parts)
control_steps, control_trips = ((travel_summaries(control, part, n_boot=n_boot, seed=seed) for part in parts)
                                if len(control_rows) else ({}, {}))

# %% [markdown]
# ## Each block's update against the next word

# %%
blocks = np.arange(1, L + 1)
raw = steps["W_E", "shuffled"]
fig, (ax_cos, ax_diff) = plt.subplots(1, 2, figsize=(12, 4))
ax_cos.plot(blocks, raw["true"], marker="o", label="true next token")
ax_cos.plot(blocks, raw["shuffled"], marker="o", label="shuffled next token")
ax_cos.set_yscale("symlog", linthresh=0.02)
ax_cos.set(xlabel="block t+1 (update y(t) → y(t+1))", ylabel="mean cosine",
           title="cos(update, e(next) − e(current)), raw W_E")
ax_cos.legend()
curves = {("W_E", "shuffled"): ("C0", "raw W_E, shuffled"),
          ("final_norm(W_E)", "shuffled"): ("C2", "final_norm(W_E), shuffled"),
          ("W_E", "shuffled within sentence"): ("C1", "raw W_E, shuffled within sentence")}
for key, (color, label) in curves.items():
    s = steps[key]
    ax_diff.plot(blocks, s["difference"], marker="o", ms=3, color=color, label=label)
    ax_diff.fill_between(blocks, s["ci_lo"], s["ci_hi"], color=color, alpha=0.2)
if control_steps:
    s = control_steps["W_E", "shuffled"]
    ax_diff.plot(blocks, s["difference"], color="grey", label="untrained model (raw W_E, shuffled)")
    ax_diff.fill_between(blocks, s["ci_lo"], s["ci_hi"], color="grey", alpha=0.2)
ax_diff.axhline(0, color="black", lw=0.8)
ax_diff.set(xlabel="block t+1", ylabel="true − baseline", title="difference with 95% bootstrap interval")
ax_diff.legend(fontsize=8)
plt.tight_layout()
plt.show()
above = (raw["ci_lo"] > 0).to_numpy()
below = (raw["ci_hi"] < 0).to_numpy()
print(f"raw W_E vs shuffled: difference above zero (95% interval) in {above.sum()} of {L} blocks, below zero in "
      f"{below.sum()}: blocks {blocks[below].tolist()}; mean over blocks {raw['difference'].mean():.4f}; "
      f"largest {raw['difference'].max():.4f} at block {blocks[raw['difference'].argmax()]}")
print(f"block 1 alone: true {raw['true'].iloc[0]:.3f}, shuffled {raw['shuffled'].iloc[0]:.3f}")
print(f"for scale: two random directions in D = {D} dimensions have cosines of typical size "
      f"1/sqrt(D) = {D ** -0.5:.3f}")

# %% [markdown]
# **What to notice.** Where an update has a large cosine with *both* targets (on SmolLM2, the first
# block's), it moves the state away from its own word, the −e(current) term the two targets share; it
# says nothing about the next word. Compare the other cosines with 1/√D, the size of a chance
# alignment. The difference on the right is what the next word adds. Its sign can change from block
# to block: the blocks where the interval lies below zero move the state, on average, away from the
# next word relative to a random one. The grey curve is the untrained model: what the architecture and
# the text alone would produce.
#
# ## The whole trip
#
# Small per-block steps add up. The whole path y(L) − y(0) against the same targets, for the trained
# model and the untrained control:

# %%
wins = {name: np.mean((t.trip["true"] > t.trip["shuffled"])[np.isfinite(t.trip["true"] - t.trip["shuffled"])])
        for name, t in travel.items()}  # share of positions where the true next word wins (zero targets left out)
rows = {("trained", *key): s.iloc[0] for key, s in trips.items()}
rows |= {("untrained", *key): s.iloc[0] for key, s in control_trips.items()}
trip_table = pd.DataFrame(rows).T.rename_axis(["model", "target", "baseline"])
print(f"the true next word beats the whole-sample shuffle at {wins['W_E']:.1%} of positions (raw W_E target)")
trip_table.round(4)

# %% [markdown]
# **What to notice.** Compare the verdicts of the raw and the normalized target; the raw one is the one
# the model's logits read. The within-sentence baseline tells how much of the lean is only "toward
# words of this passage"; the untrained rows tell how much the architecture alone would give. The
# share of positions where the true next word beats the shuffled one is the same comparison without
# averaging cosines: 50% would be no preference.
#
# **What differs from GPT-2.** The paper's model is GPT-2 small (LayerNorm with centering, learned
# positions in x(0), 12 layers). SmolLM2 normalizes with RMSNorm (no centering), uses rotary positions
# (x(0) is the bare token embedding) and has 30 layers; like GPT-2 its embeddings are tied and it has no
# output bias, so the logit-gap reading of the raw target holds exactly.
#
# ## Does the claim hold on this model?

# %%
s, within = trips["W_E", "shuffled"].iloc[0], trips["W_E", "shuffled within sentence"].iloc[0]
null_trip = control_trips["W_E", "shuffled"].iloc[0] if control_trips else None
holds = s["ci_lo"] > 0
print(f"Paper A (Fig. 4, a projection): words travel toward the next word. In the full space, without "
      f"projection, on {ids[:, :-1].size} positions of {model}: the whole path's cosine with "
      f"e(next) − e(current) is {s['true']:.4f} against {s['shuffled']:.4f} for a shuffled next word, a "
      f"difference of {s['difference']:.4f} (95% interval {s['ci_lo']:.4f} .. {s['ci_hi']:.4f}): "
      f"{'yes, words do travel toward the next word' if holds else 'no measurable travel toward the next word'}; "
      f"the lean is {s['difference'] / s['true']:.1%} of the trip's cosine and {s['difference'] * D ** 0.5:.2f} "
      f"times a chance alignment 1/sqrt(D) = {D ** -0.5:.3f}; the true next word wins at {wins['W_E']:.1%} of "
      f"positions. Against a rival word from the same passage the difference is {within['difference']:.4f} "
      f"({within['ci_lo']:.4f} .. {within['ci_hi']:.4f}). Block by block the lean is positive in {above.sum()} "
      f"of {L} blocks and negative in {below.sum()}.")
if null_trip is not None:
    print(f"Untrained control: difference {null_trip['difference']:.4f} "
          f"({null_trip['ci_lo']:.4f} .. {null_trip['ci_hi']:.4f}) on {len(control_rows)} pseudo-sentences.")

# %%
normed_trip = trips["final_norm(W_E)", "shuffled"].iloc[0]
record({
    "n_sentences": len(ids), "n_positions": ids[:, :-1].size, "n_layers": L, "d_model": D, "target": "W_E",
    "trip_true": s["true"], "trip_shuffled": s["shuffled"], "trip_difference": s["difference"],
    "trip_difference_se": s["se"], "trip_difference_ci_lo": s["ci_lo"], "trip_difference_ci_hi": s["ci_hi"],
    "trip_true_wins": wins["W_E"],
    "trip_difference_normed_target": normed_trip["difference"], "trip_difference_normed_ci_lo": normed_trip["ci_lo"],
    "trip_difference_within_sentence": within["difference"], "trip_difference_within_ci_lo": within["ci_lo"],
    "block_difference_mean": raw["difference"].mean(), "block_difference_max": raw["difference"].max(),
    "blocks_positive": int(above.sum()), "blocks_negative": int(below.sum()), "share_blocks_positive": above.mean(),
    "block1_true": raw["true"].iloc[0], "block1_shuffled": raw["shuffled"].iloc[0],
    "inv_sqrt_d": D ** -0.5, "travels_toward_next_word": bool(holds),
    "untrained_n_sentences": len(control_rows),
    "untrained_trip_difference": None if null_trip is None else null_trip["difference"],
    "untrained_trip_ci_lo": None if null_trip is None else null_trip["ci_lo"],
    "untrained_trip_ci_hi": None if null_trip is None else null_trip["ci_hi"],
    "untrained_interval_contains_zero": None if null_trip is None
    else bool(null_trip["ci_lo"] <= 0 <= null_trip["ci_hi"]),
})
