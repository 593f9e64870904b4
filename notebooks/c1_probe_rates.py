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
# # Probe rates · Do heads match a noun to itself, layer by layer?
#
# **What you will see.** Rates over the blocks of the model, in three panels: how often a head's
# top-5 *keys* for a common noun's query are that noun again (or its plural, capitalised or spaced
# form); how often the top-5 tokens of what a head *writes* when it reads the noun are that noun
# again, read alone and read with the residual stream as the paper does. Each panel has the same
# rate for random words with as many variant tokens as the nouns, with 95% confidence bands over
# the queries; then the rate of every head, and the claims with their intervals.
#
# **Why it matters.** "Traveling Words" (Molina, 2023) probes attention heads with 100 common
# nouns and reads the result off hand-picked tables (A4, A5 in this book): early-layer heads show
# clear query-key patterns, and some heads preserve the key's meaning in their value output.
# Reviewers asked for an aggregate number. This chapter gives one for every block, over all nouns
# and heads, against a baseline, so that *early layers show clear query-key patterns* becomes a
# measurement.
#
# :::{dropdown} How it is computed
# The probes of the A4/A5 chapter, for every block. A query token's residual input e (its embedding,
# times the model's embedding scale; no position) goes through the block's own first norm,
# q = block_norm(e).
#
# - *Query-key:* the key direction q W_QK^h is scored against block_norm(e_v) for every vocabulary
#   token v; the top-5 are the keys head h seeks most (biases left out, as in the paper). With
#   rotary positions (Llama, SmolLM2, Gemma) a position-free score is the score of a key at the
#   query's own position: the rotations cancel at relative distance 0.
# - *Value, update alone:* u_h = q W_VO^h + b_V^h W_O^h, read out as final_norm(u_h) @ W_U.
# - *Value, with the residual* (the paper's readout): final_norm(e + u_h + b_O) @ W_U.
#
# A top token *matches* when its text is in the query word's **variant set**
# `lotlib.traveling_words.vocabulary.variants`: {word, plural} × {lower case, Capitalised} × {no space, leading space}
# (plural by English rules with a short list of irregular nouns). The **rate** is the fraction of
# the top-5 slots that match, averaged over queries and heads. **Chance** is the rate if the top-5
# were drawn uniformly from the vocabulary.
# The query-key score has no residual term, so a match there is the head itself; the value readout
# *with* the residual contains e, so it matches whenever the head's write is small compared with e:
# the update-alone readout is the one that tells what the head writes.
#
# **The baseline: random words with the nouns' variant counts.** Random "words" (seeded; as many as
# the nouns unless `n_baseline` says otherwise): lower-case alphabetic tokens of three letters or
# more that are single tokens both with and without a leading space (this rules out most word
# pieces), none a variant of a noun. A word can only match as many tokens as its variant set has in
# the vocabulary, and a random word has fewer than a common noun (most have no plural token): a
# baseline drawn at random would be capped lower for that reason alone.
#
# So each random word is drawn
# among those with as many variant tokens as a noun (`random_words(..., like=variant_counts(nouns))`);
# the table below shows both distributions and an unmatched draw. The query set is built by
# `vocabulary.noun_queries`, the same as in the A4/A5 chapter.
#
# *Uncertainty.* The unit of sampling is the query word: every interval and band is a 95% bootstrap
# over the nouns (or over the random words), `n_boot` resamples, seeded. The heads and blocks are the
# model's and are not resampled.
#
# **Where a model differs from GPT-2.** The paper's GPT-2 has LayerNorm, twelve heads with their own
# keys and values, learned absolute positions and tied embeddings. Llama-family models (SmolLM2,
# Gemma) have RMSNorm (no centering), grouped-query attention (query heads share key/value heads;
# the model view expands them, so every query head has its own W_QK^h and W_VO^h) and rotary
# positions; where the embeddings are tied the readout W_U is W_E, as in the paper. What this model
# has is stated below.
#
# **Code:** `lotlib.chapters.c1_probe_rates.probe_rates_by_block`.
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks probed (None: every block)
k: int = 5  # top-k tokens per probe
leading_space: bool = False  # query form: the bare word or " word"
n_baseline: "int | None" = None  # random words of the baseline (None: # of nouns)
seed: int = 0  # which random words; the bootstrap resamples
n_boot: "Count" = 1000  # bootstrap resamples of the queries: bands, intervals

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters import c1_probe_rates as c1
from lotlib.models.bounds import block_indices
from lotlib.stats import LIES, side_word
from lotlib.summary import glue
from lotlib.traveling_words import vocabulary
from lotlib.verdicts import conclude

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
H, L = view.n_heads, view.n_layers
layers = block_indices(blocks or range(L), L, "blocks", lm.name)
queries = vocabulary.noun_queries(
    lm.tokenizer, view.vocab_size, leading_space, n_baseline, seed
)
glue("model_text", repr(lm))
glue("n_kv_heads", view.heads(0).n_kv_heads)
glue("embed_scale", f"{view.embed_scale:g}")
glue("tied_text", view.facts()["tied_text"])
group = H // view.heads(0).n_kv_heads
gqa = f"groups of {group} consecutive query heads" if group > 1 else "none"
glue("gqa_text", gqa)
for name, text in queries.describe().items():
    glue(name, text)
mean_counts = queries.mean_variant_tokens()

# %% [markdown]
# **The model and the queries.** {glue:text}`model_text`: {glue:text}`n_kv_heads` key/value heads
# for {glue:text}`n_heads` query heads, embedding scale {glue:text}`embed_scale`, embeddings
# {glue:text}`tied_text`. In the query form {glue:text}`query_form`, {glue:text}`n_nouns` of the
# {glue:text}`n_words` nouns are single tokens (dropped: {glue:text}`dropped_list`); in the other
# form {glue:text}`n_nouns_other_form` are (dropped: {glue:text}`dropped_other_list`). The baseline
# is {glue:text}`n_baseline` random words (seed {glue:text}`seed`), for example
# {glue:text}`random_examples`.

# %%
queries.count_table().T

# %% [markdown]
# **What to notice.** The matched random words have the nouns' distribution of variant tokens, row
# for row: a mean of {glue:text}`variant_tokens_baseline:.2f` variant tokens per word against
# {glue:text}`variant_tokens_nouns:.2f` for the nouns, where the unmatched draw has
# {glue:text}`variant_tokens_unmatched:.2f`: fewer variant tokens would cap a word's rate, which the
# matching rules out. Matching makes the random
# words more noun-like (a word with a plural token is usually a noun): they are *other* words of the
# same kind, not a different kind of word.
#
# ## Rates by block, nouns against random words
#
# The probes of {glue:text}`n_blocks` blocks × {glue:text}`n_heads` heads for every query took
# {glue:text}`seconds:.0f` s.

# %%
result = c1.probe_rates_by_block(view, queries, layers, k)
n_random = len(queries.randoms.words)
title = (
    f"Probe rates, {model}: share of the top-{k} that is the query word or a "
    f"variant, mean over {H} heads; {queries.n} nouns and {n_random} random words "
    "(bands: 95% bootstrap over queries)"
)
c1.rate_curves(result, n_boot, seed, title)
plt.show()
result.curve_table().round(3)

# %%
glue("write_max", result.write.max())
glue("write_max_block", layers[result.write.argmax()])

# %% [markdown]
# **What to notice.** Compare each noun curve with the random-word curve beside it and with the grey
# chance line ({glue:text}`chance_rate:.1e` per slot): any rate visibly above zero is far above
# chance. The query-key panel is the paper's claim: if early heads "show clear
# query-key patterns" in the sense of a noun seeking itself, the noun curve is high at the first
# blocks and falls later. The table gives, per probe, the rate at the first block, the peak, and the
# means over the first and last third of the blocks. Where the two curves overlap, whatever the
# heads do, they do it for any word of the same kind.
#
# The value readout *with* the residual returns the noun where a head's write is small against the
# noun's own embedding and loses it where the writes are large, whatever they write (the last row
# of the table: all heads' writes summed, read with the residual). A head's mean write against the noun's embedding,
# ||u_h|| / ||e||, is {glue:text}`write_over_embedding_first:.2f` at the first block,
# {glue:text}`write_over_embedding_median:.2f` in the median over blocks and at most
# {glue:text}`write_max:.2f` (block {glue:text}`write_max_block`). The update-alone readout is the
# one that says what a head writes.
#
# ## Which heads?
#
# The paper speaks of *some* heads. The rate of each head for the nouns, block by block, and under
# the figure how many heads of each block reach a noun rate of 0.2:

# %%
c1.head_rate_maps(result)
plt.show()
result.heads_above(0.2)

# %% [markdown]
# **What to notice.** A bright column is a block where many heads map nouns to themselves; a
# bright cell in an otherwise dark column is one specialised head. With grouped-query attention
# (this model's shared key/value groups: {glue:text}`gqa_text`) neighbouring heads read the same
# keys and values, yet their rates can differ: each has its own W_Q^h and W_O^h.
#
# ## Does the claim hold on this model?
#
# The paper's statement is qualitative, for GPT-2: early-layer (block 0) heads show clear
# query-key patterns. We turn it into measured values, each a bootstrap interval over the
# nouns, with bounds that are ours:
#
# - **A-rates-qk-block0**: at the first probed block, the nouns' query-key rate (mean over heads
#   and nouns) is at least 0.1: one top-5 slot in ten, over every head, is the noun or a variant.
#   Here: {glue:text}`qk_rate_first_block` for the nouns, {glue:text}`qk_baseline_first_block` for
#   the random words (the nouns' interval {glue:text}`qk_rate_first_block_vs` theirs).
# - **A-rates-qk-early-third**: the same over the first third of the blocks, a looser reading of
#   "early layers": {glue:text}`qk_rate_early` for the nouns, {glue:text}`qk_baseline_early` for
#   the random words (the nouns' interval {glue:text}`qk_rate_early_vs` theirs).
# - **A-rates-qk-peak**: the pattern is an early-layer one: the rate over the first third of the
#   blocks exceeds the rate over the last third by at least 0.05 (half the level above). Here the
#   difference is {glue:text}`qk_early_minus_late` for the nouns and
#   {glue:text}`qk_early_minus_late_baseline` for the random words (the nouns' interval
#   {glue:text}`qk_early_minus_late_vs` theirs). Where the curve peaks is reported too (the nouns'
#   query-key rate {glue:text}`peak_text`), but a peak's location is no test: on random weights the
#   curve would be flat near zero and its maximum fall anywhere.
# - **A-rates-vo-update**: some heads preserve the key's meaning in their value output: the best
#   single head's update-alone rate over all blocks is at least 0.2. Here:
#   {glue:text}`vo_update_best_head_rate_all_blocks` for the nouns,
#   {glue:text}`vo_update_best_head_rate_baseline` for the random words (the nouns' interval
#   {glue:text}`vo_update_best_head_rate_all_blocks_vs` theirs).
#
# Every finding is also judged on the untrained model of the same architecture, where the rates are
# expected at chance, and the query-key findings on the random words: when those pass as well (the
# report says *not diagnostic*), the test cannot tell a pattern of the nouns from one the heads show
# for any word of the same kind. The random words are not a null of the value claim: a head that
# copies whatever it reads preserves the key's meaning, which is the claim; their rate is shown.

# %%
values = {
    "model": model,
    "n_blocks": len(layers),
    "n_heads": H,
    "k": k,
    "leading_space": leading_space,
    "n_nouns": queries.n,
    "n_nouns_other_form": len(queries.other.words),
    "dropped_nouns": ", ".join(queries.nouns.dropped),
    "dropped_nouns_other_form": ", ".join(queries.other.dropped),
    "n_baseline": len(queries.randoms.words),
    "seed": seed,
    "chance_rate": queries.chance,
    "seconds": result.seconds,
    "variant_tokens_nouns": mean_counts["nouns"],
    "variant_tokens_baseline": mean_counts["random words (matched)"],
    "variant_tokens_unmatched": mean_counts["random words (unmatched draw)"],
    **result.estimates(L, n_boot, seed),
}
peak = values["qk_peak_depth"]
glue(
    "peak_text",
    f"peaks at block {values['qk_peak_block']} of {L}, depth {peak}"
    if not isinstance(peak, str)
    else "is zero at every probed block: no peak",
)
for key, null in (
    ("qk_rate_first_block", "qk_baseline_first_block"),
    ("qk_rate_early", "qk_baseline_early"),
    ("qk_early_minus_late", "qk_early_minus_late_baseline"),
    ("vo_update_best_head_rate_all_blocks", "vo_update_best_head_rate_baseline"),
):
    glue(f"{key}_vs", side_word(values[key], LIES, values[null]))

# %% tags=["remove-input"]
why = "heads that do this for random words too do it for any word of the kind"
conclude("c1_probe_rates", values, model, why_not_diagnostic=why)
