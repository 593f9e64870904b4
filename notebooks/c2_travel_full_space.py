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
# :::{dropdown} How it is computed
# For pseudo-sentence s and position i (the current token w_i, the next
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
# *A control and a null* (beyond what the reviewers asked). A word that already occurred in the passage
# is more likely to come next than a word drawn from the whole corpus, so a state that merely drifts
# toward its context could beat the whole-sample shuffle. The second baseline permutes next tokens
# *within* each pseudo-sentence: the rival word then comes from the same passage. It enters twice: as a
# claim of its own (the true next word beats a rival from the same passage) and as the null of the
# main claim (put the rival in the place of the next word: if it too beat the whole-sample shuffle, the
# main test could not tell "the next word" from "a word of this passage"). The untrained model of the
# same architecture, the default null of every finding, is the same chapter run on
# `untrained:<model>`: the report sets its values beside ours.
#
# *Uncertainty.* Positions of one sentence share context, so the unit of resampling is the sentence:
# every value is averaged per sentence first, and its 95% interval comes from a bootstrap that
# resamples whole sentences (`n_boot` resamples, seeded).
#
# **Code:** `lotlib.chapters.c2_travel_full_space.travel_in_full_space`; `lotlib.traveling_words.travel`.
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_sentences: int = 256  # pseudo-sentences from Walden (all their positions used)
seed: int = 0  # which sentences, the shuffles of next tokens and the bootstrap
n_boot: "Count" = 2000  # bootstrap resamples of sentences
batch_size: int = 16  # sentences per forward pass

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters.c2_travel_full_space import (
    block_travel_figure,
    travel_in_full_space,
)
from lotlib.summary import glue
from lotlib.verdicts import conclude

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
corpus = lotlib.walden(lm.tokenizer, n_k=n_k)

# %% [markdown]
# ## Each block's update against the next word
#
# The model is {glue:text}`model_text` (tied embeddings: {glue:text}`tied`, output bias:
# {glue:text}`output_bias`). We use {glue:text}`n_sentences` of the {glue:text}`n_corpus`
# pseudo-sentences of {glue:text}`n_k_text` tokens{glue:text}`bos_text`: {glue:text}`n_positions`
# positions. At {glue:text}`repeat_share:.2%` of them the next token is the current one; the shuffles
# give such a next token at {glue:text}`repeat_share_shuffled:.2%` (whole sample) and
# {glue:text}`repeat_share_within:.2%` (within sentence) of positions, all left out.

# %%
study = travel_in_full_space(
    lm,
    corpus,
    n_sentences=n_sentences,
    seed=seed,
    n_boot=n_boot,
    batch_size=batch_size,
)
block_travel_figure(study, n_boot=n_boot, seed=seed)
plt.show()

# %% tags=["remove-cell"]
for name, value in study.facts().items():
    glue(name, value)
glue("model_text", repr(lm))
glue("tied", bool(lm.view.tied))
glue("output_bias", "yes" if lm.view.b_U is not None else "none")
glue("n_k_text", n_k)
glue("bos_text", " after BOS" if corpus.prefix else "")
for name, value in lm.view.facts().items():
    glue(name, value)

# %% [markdown]
# **What to notice.** The first block's update has cosines {glue:text}`block1_true:.3f` with the true
# target and {glue:text}`block1_shuffled:.3f` with the shuffled one. Where an update has a large cosine
# with *both* targets, it moves the state away from its own word, the −e(current) term the two targets
# share; it says nothing about the next word. Compare the other cosines with
# 1/√D = {glue:text}`inv_sqrt_d:.3f`, the size of a chance alignment in D = {glue:text}`d_model`
# dimensions. The difference on the right is what the next word adds.
#
# Its sign can change from block
# to block: the band lies above zero in {glue:text}`blocks_positive` of {glue:text}`n_layers` blocks
# and below zero in {glue:text}`blocks_negative` (blocks {glue:text}`blocks_below_list`), which move
# the state, on average, away from the next word relative to a random one. The mean difference over
# blocks is {glue:text}`block_difference_mean:.4f`, the largest {glue:text}`block_difference_max:.4f`
# at block {glue:text}`block_difference_argmax`. The share of blocks with a positive mean difference,
# {glue:text}`share_blocks_positive` (interval over pseudo-sentences), carries the "every block
# refines" reading.
#
# ## The whole trip
#
# The per-block steps add up to one trip: the whole path y(L) − y(0) against the same targets:

# %%
study.trip_table.round(4)

# %% [markdown]
# **What to notice.** Against the whole-sample shuffle the true next word's lean is
# {glue:text}`trip_difference` with the raw target, {glue:text}`trip_in_chance_units:.2f` times a
# chance alignment, and {glue:text}`trip_difference_normed_target` with the normalized target; the raw
# one is the one the model's logits read. Against a rival word from the same passage it is
# {glue:text}`trip_difference_within_sentence`: this tells how much of the lean is only "toward words
# of this passage". Put in the place of the next word, the rival is the null of the main test, and it
# must not beat the whole-sample shuffle for that test to be diagnostic: its own lean is
# {glue:text}`trip_difference_passage_null`. The share of positions where the true next word beats the
# shuffled one, {glue:text}`trip_true_wins` (the rival: {glue:text}`trip_passage_null_wins`), is the
# same comparison without averaging cosines: 50% would be no preference.
#
# **What differs from GPT-2.** The paper's model is GPT-2 small (LayerNorm with centering, learned
# positions in x(0), 12 layers). This run's model normalizes with {glue:text}`norm_text`, has
# {glue:text}`positions_text` and {glue:text}`n_layers` layers; its embeddings are
# {glue:text}`tied_text`, and its output bias is {glue:text}`output_bias`. The logit-gap reading of
# the raw target holds exactly for tied embeddings without an output bias.
#
# ## Does the claim hold on this model?
#
# Four findings, each a mean over pseudo-sentences with a 95% bootstrap interval that resamples whole
# sentences. The report sets beside each the same chapter run on an untrained model of the same
# architecture (which sees the same text but has learned nothing), and, for the whole trip and the
# share of wins, the passage null above.
#
# The bars are effect sizes, not zero: a null with no lean has an
# interval around zero, which a bar at zero would always cut, so the trip must lean by at least 0.01 (a
# quarter of a chance alignment 1/√D for the widths of GPT-2 and SmolLM2) and the next word must win at
# a clear majority (55%) of positions.
#
# The passage null is the reason the bar matters: the state can
# lean toward the words of its own passage, and the next word is often one of them; where that lean
# reaches the bar, the whole-trip test is **not diagnostic** of travel toward the *next* word, and the
# within-passage claim, whose rival comes from the same passage, is the test that can tell.

# %% tags=["remove-input"]
conclude(
    "c2_travel_full_space",
    study.summary(),
    model,
    why_not_diagnostic=(
        "when a rival word of the same passage leans enough too, the test "
        "cannot tell the next word from a word of its passage"
    ),
)
