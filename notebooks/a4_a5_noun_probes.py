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
# # A4 · A5 · Probing attention heads with common nouns
#
# **What you will see.** For a hundred common English nouns and every attention head of the probed
# blocks (the first, a middle one and the last), two lists of five tokens: the *keys* a head looks
# for when the noun is the query (A4), and what the model would read after the head copied the noun
# into the residual stream (A5). Tables for a few nouns, every head; then measurements over all
# nouns, each set against the same measurement for random words, with 95% intervals; the full tables
# are folded away.
#
# **Why it matters.** "Traveling Words" (Molina, 2023) reads attention as geometry on the sphere
# where normalized embeddings live: W_QK^h is a bilinear form that aligns a query with keys, W_VO^h a
# key-value store whose outputs are read with the same unembedding as the model's logits. If that
# reading is right, plugging an embedding into these matrices should produce *words*, not noise. From
# its probes of GPT-2 the paper concludes that early-layer heads show clear query-key patterns, that
# last-layer heads are subject-specific, and that some heads preserve the key's meaning in their
# value output.
#
# :::{dropdown} How it is computed
# Following the authors' `common_nouns.py`. Static probes: one token, no position, no context.
#
# - The noun's residual input is e = embed_scale · W_E[noun] (the scale is 1 except for Gemma), and
#   the query is q = block_norm(e), the block's own first norm (gamma and beta included).
# - **A4, query-key:** the key direction q W_QK^h, with W_QK^h = W_Q^h W_K^h^T · scaling, is scored by
#   dot product against block_norm(e_v) for every token v of the vocabulary; top-5. Biases are left
#   out, as in the paper. Positions are left out too: with rotary positions (Llama, SmolLM2, Gemma)
#   this is the score of a key at the query's own position, where the rotations cancel. Per-head
#   query and key norms (Gemma 3) are applied where a model has them.
# - **A5, value:** the head's update u_h = q W_VO^h + b_V^h W_O^h, read with the final norm,
#   final_norm(e + u_h + b_O) @ W_U: the tokens the model would predict from the noun plus this one
#   head's write. W_U is the unembedding, which *is* the raw W_E when the embeddings are tied (the
#   paper's readout) and the separate output matrix when they are not. A last row sums the heads.
#   Because e itself is in the sum, the noun tends to come back whenever ||u_h|| is small; we add a
#   third probe, **VO update**, that reads the head's write alone, final_norm(u_h) @ W_U.
#
# **Choices the paper leaves open, stated.** Which form of the noun is the query: the authors'
# code encodes the bare word ("time", not " time") and keeps the nouns that are one token; that is
# our default (`leading_space`), and the counts of both forms are given below. The middle block is
# (L − 1) // 2 (block 5 of GPT-2's 12, as in the paper). On models with grouped-query attention
# (this model: {glue:text}`n_heads` query heads, {glue:text}`n_kv_heads` key/value heads) the view expands the shared key/value heads to
# every query head, so each query head has its own W_QK^h and W_VO^h; heads in one group share W_K
# and W_V and differ in W_Q and W_O.
#
# On RMSNorm models (Llama, SmolLM2, Gemma) the norm does not
# center: block_norm(e) lies on the sphere but not on the hyperplane orthogonal to the ones vector.
#
# **Random words, the null of every query-key measurement.** The same probes run on random
# "words" (seeded): lower-case alphabetic tokens of three letters or more that are single tokens with
# and without a leading space, none a variant of a noun, drawn so that each has as many variant
# tokens in the vocabulary as a noun (plural, capitalised and spaced forms; the two count
# distributions are in the table below). A pattern the random words show as clearly as the nouns is
# a property of the head for any word, not something the nouns reveal. The query set, nouns and
# random words, is built by `vocabulary.noun_queries`, the same for the probe-rates chapter.
#
# **Code:** `lotlib.chapters.a4_a5_noun_probes.noun_probes`.
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks probed (None: first, (L-1) // 2, last)
k: int = 5  # tokens per probe
leading_space: bool = False  # query form: the bare word or " word"
show: list[str] = ["time", "water", "car"]  # nouns shown in full in the tables
n_random: "int | None" = None  # random words of the null (None: as many as nouns)
seed: int = 0  # which random words; the bootstrap resamples
n_boot: "Count" = 1000  # bootstrap resamples of the queries for every interval

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display
from lotlib import plots
from lotlib.chapters import a4_a5_noun_probes as a4
from lotlib.models.bounds import block_indices
from lotlib.stats import LIES, side_word
from lotlib.summary import glue
from lotlib.traveling_words import vocabulary
from lotlib.verdicts import conclude

plots.apply_theme()
pd.set_option("display.max_colwidth", None)
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
L, H = view.n_layers, view.n_heads
layers = block_indices(blocks or ["first", "middle", "last"], L, "blocks", lm.name)
queries = vocabulary.noun_queries(
    lm.tokenizer, view.vocab_size, leading_space, n_random, seed
)
glue("model_text", repr(lm))
glue("d_head", view.d_head)
glue("n_kv_heads", view.heads(0).n_kv_heads)
glue("n_heads", H)
glue("embed_scale", f"{view.embed_scale:g}")
glue("readout", view.facts()["readout_text"])
for name, text in queries.describe().items():
    glue(name, text)
counts = queries.mean_variant_tokens()
for name, group in zip(("nouns", "matched", "unmatched"), counts.index):
    glue(f"variants_{name}", counts[group])

# %% [markdown]
# **The model and the queries.** {glue:text}`model_text`: d_head = {glue:text}`d_head`,
# {glue:text}`n_kv_heads` key/value heads for {glue:text}`n_heads` query heads, embedding scale
# {glue:text}`embed_scale`, read out against {glue:text}`readout`. Probed blocks:
# {glue:text}`blocks`. In the query form {glue:text}`query_form`, {glue:text}`n_nouns` of the
# {glue:text}`n_words` nouns are single tokens (dropped: {glue:text}`dropped_list`); in the other
# form {glue:text}`n_nouns_other_form` are (dropped: {glue:text}`dropped_other_list`). The null is
# {glue:text}`n_random_words` random words (seed {glue:text}`seed`), for example
# {glue:text}`random_examples`.
#
# The table counts, for each query, how many tokens of the vocabulary are one of its variants: the
# most a probe can match.

# %%
queries.count_table().T

# %% [markdown]
# **What to notice.** The matched random words have the nouns' distribution, column for column:
# {glue:text}`variants_matched:.2f` variant tokens per word against the nouns'
# {glue:text}`variants_nouns:.2f`. An unmatched draw has {glue:text}`variants_unmatched:.2f`: where
# that is fewer (a random word often has no plural token), it would cap their rates lower than the
# nouns' for a reason that has nothing to do with the heads.
#
# ## A few nouns, every head
#
# For each probed block, the nouns of `show` × every head (and the sum over heads): the top-5 keys
# (QK), the top-5 readout of the noun plus the head's write (VO), of the write alone (VO update),
# and the size of the write ||u_h||. A leading space is shown as ␣.

# %%
result = a4.noun_probes(view, queries, layers, k)
glue("mean_e_norm", result.embedding_norm)
plots.block_tables(
    {
        f"Block {b}": result.readable(b, show).style.format({"||u_h||": "{:.2f}"})
        for b in layers
    }
)

# %% [markdown]
# **What to notice.** Read down a QK column: when a head gives the same keys whatever the noun,
# its keys are a property of the head (tokens whose normalized embedding has a large projection
# on the head's key space), not of the query. Read the VO column against the VO update column: the
# first repeats the noun where the head's write ||u_h|| is small against the noun's embedding
# (mean ||e|| over the nouns: {glue:text}`mean_e_norm:.2f`) and follows the write where it is
# large; the second shows what the head itself writes. The sum row adds all heads' writes.
#
# ## All nouns at once: three measurements per head
#
# The tables are read by eye in the paper. Over all nouns, each head gets three numbers, and each is
# also measured on the random words:
#
# - **QK variant rate**: the share of the top-5 keys that are the query word or a variant of it
#   (plural, capitalised, with or without a leading space: `lotlib.traveling_words.vocabulary.variants`).
#   A head with a *clear query-key pattern* in the strictest sense seeks the query's own forms.
#   Chance (keys drawn uniformly from the vocabulary) is {glue:text}`chance_rate:.1e` per slot
#   (the mean over nouns of their variant tokens over the vocabulary).
# - **QK key specificity**: whether a noun's keys *belong* to it: for each noun and head, the share of
#   the other nouns whose top-5 keys are farther from the noun (mean cosine on the block's sphere)
#   than its own top-5 keys are. 0.5 when the keys are unrelated to the query (random weights) or the
#   same for every noun; 1 when each noun's own keys are the nearest to it. It reads *subject* as
#   related words, not only the noun's own forms, and the comparison with the other nouns' keys
#   removes what all tokens share.
# - **VO update variant rate**: the share of the top-5 tokens of the head's write alone,
#   final_norm(u_h) @ W_U, that are the noun or a variant: a head that *preserves the key's meaning*
#   in its value output in the strictest sense (the same word, not a synonym).
#
# The bars are means over the queries with 95% bootstrap intervals (resampling queries, `n_boot`);
# the table under the figure gives the means over heads.

# %%
title = (
    f"{model}: {queries.n} nouns and {len(queries.randoms.words)} random words, "
    "every "
    "head (bars: 95% bootstrap over queries; dashed: 0.5, no specificity)"
)
a4.noun_measures(result, n_boot, seed, title)
plt.show()
result.measure_means().round(3)

# %% [markdown]
# **What to notice.** Compare each orange bar with the blue one beside it: a head that does the same
# for random words as for nouns does it for any word. Any visible rate bar is far above the chance
# of {glue:text}`chance_rate:.1e` per slot. A key specificity near 0.5 says the head's keys for a
# noun are no closer to that noun than to any other: either the head seeks the same keys whatever
# the query, or keys unrelated to it. The head whose write alone returns the noun most often is head
# {glue:text}`best_vo_head` of block {glue:text}`best_vo_block`.
#
# The old reading, *the top key depends on the query*, is summed up by the share of nouns whose top
# key is the head's most common top key (1 means one key for every noun), mean over heads:
# {glue:text}`qk_common_key_share_first:.2f` at the first probed block,
# {glue:text}`qk_common_key_share_last:.2f` at the last. It is not a test of the paper's claim: a
# random matrix gives every query its own top key, so random weights "pass" it. The sum over heads
# read with the residual returns the noun in a share {glue:text}`vo_sum_self_rate_first:.2f` of its
# top-5 at the first block and {glue:text}`vo_sum_self_rate_last:.2f` at the last. Every per-head
# number is folded below, then the full tables (every noun, every head; also as the DataFrame
# `result.table`).

# %%
summary = result.head_summary()
display(
    plots.folded(
        f"Per block, probe and head ({len(summary)} rows)",
        summary,
        index=False,
        float_format="{:.3f}".format,
    )
)
for probe in ("QK", "VO", "VO update"):
    display(
        plots.folded(
            f"Full {probe} table: (block, noun) x heads", result.wide(probe)
        )
    )

# %% [markdown]
# ## Does the claim hold on this model?
#
# The paper's statements are qualitative and were made on GPT-2; the bounds below are ours. Each
# value has a 95% bootstrap interval over the nouns (the heads are the model's and are not
# resampled; the other nouns a key-specificity value is compared with stay fixed). A value *passes*
# when its whole interval passes the bound, *fails* when the whole interval fails it, and *straddles*
# otherwise.
#
# - **A4-early-qk**, *early-layer heads show clear query-key patterns*: at the first probed block,
#   the best head's QK variant rate is at least 0.2 (one of its five keys, on average, is the noun
#   itself or a variant). Here: {glue:text}`qk_rate_best_head_first` for the nouns,
#   {glue:text}`qk_rate_best_head_first_random` for the random words (the nouns' interval
#   {glue:text}`qk_rate_best_head_first_vs` theirs).
# - **A4-early-qk-related**, the same claim read as meaning rather than form: the first block's key
#   specificity, averaged over heads, is at least 0.75 (a noun's own keys are nearer to it than
#   another noun's keys in three comparisons out of four). Here: {glue:text}`qk_specificity_first`
#   for the nouns, {glue:text}`qk_specificity_first_random` for the random words
#   (the nouns' interval {glue:text}`qk_specificity_first_vs` theirs).
# - **A4-last-subject**, *last-layer heads are subject-specific*: the same key specificity at the last
#   probed block, at least 0.75. Here: {glue:text}`qk_specificity_last` for the nouns,
#   {glue:text}`qk_specificity_last_random` for the random words
#   (the nouns' interval {glue:text}`qk_specificity_last_vs` theirs).
# - **A5-value-preserves**, *some heads preserve the key's meaning in their value output*: the best
#   head's VO update variant rate over the probed blocks is at least 0.2. Here:
#   {glue:text}`vo_update_best_head_rate` for the nouns,
#   {glue:text}`vo_update_best_head_rate_random` for the random words
#   (the nouns' interval {glue:text}`vo_update_best_head_rate_vs` theirs).
#
# Every finding has two nulls, judged by the same bound in the report: the same chapter run on the
# same architecture with random weights, where each of these values is expected at chance (a rate
# near 0, a specificity near 0.5), and, for the query-key claims, the random words. When the random words pass
# as well (the report says *not diagnostic*), the test cannot tell a pattern of the nouns from one the
# head shows for any word it reads. The random words are not a null of A5: a head that copies
# whatever it reads preserves the key's meaning, which is the claim; their rate is shown beside it.

# %%
best_block, best_head = result.best_vo_update_head()
glue("best_vo_block", best_block)
glue("best_vo_head", best_head)
values = {
    "model": model,
    "blocks": ", ".join(map(str, layers)),
    "k": k,
    "leading_space": leading_space,
    "n_nouns": queries.n,
    "n_nouns_other_form": len(queries.other.words),
    "dropped_nouns": ", ".join(queries.nouns.dropped),
    "dropped_nouns_other_form": ", ".join(queries.other.dropped),
    "n_random_words": len(queries.randoms.words),
    "seed": seed,
    "tied": view.tied,
    "chance_rate": queries.chance,
    **result.estimates(n_boot, seed),
}
for key in (
    "qk_rate_best_head_first",
    "qk_specificity_first",
    "qk_specificity_last",
    "vo_update_best_head_rate",
):
    glue(f"{key}_vs", side_word(values[key], LIES, values[f"{key}_random"]))

# %% tags=["remove-input"]
why = "a head that does this for random words too does it for any word"
conclude("a4_a5_noun_probes", values, model, why_not_diagnostic=why)
