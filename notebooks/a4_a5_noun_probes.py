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
# **What you will see.** For a hundred common English nouns and every attention head of three
# blocks (the first, a middle one and the last), two lists of five tokens: the *keys* a head looks
# for when the noun is the query (A4), and what the model would read after the head copied the noun
# into the residual stream (A5). Tables for a few nouns, every head; then summaries over all nouns,
# and the full tables folded away.
#
# **Why it matters.** "Traveling Words" (Molina, 2023) reads attention as geometry on the sphere
# where normalized embeddings live: W_QK^h is a bilinear form that aligns a query with keys, W_VO^h a
# key-value store whose outputs are read with the same unembedding as the model's logits. If that
# reading is right, plugging an embedding into these matrices should produce *words*, not noise. From
# its probes of GPT-2 the paper concludes that early-layer heads show clear query-key patterns, that
# last-layer heads are subject-specific, and that some heads preserve the key's meaning in their
# value output.
#
# **How it is computed** (`lotlib.traveling_words.probes`, following the authors' `common_nouns.py`). Static probes:
# one token, no position, no context.
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
# our default (`leading_space`), and the counts of both forms are printed. The middle block is
# (L − 1) // 2 (block 5 of GPT-2's 12, as in the paper). On models with grouped-query attention
# (SmolLM2: 9 query heads share 3 key/value heads) the view expands the shared key/value heads to
# every query head, so each query head has its own W_QK^h and W_VO^h; heads in one group share W_K
# and W_V and differ in W_Q and W_O. On RMSNorm models (Llama, SmolLM2, Gemma) the norm does not
# centre: block_norm(e) lies on the sphere but not on the hyperplane orthogonal to the ones vector.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks probed (None: first, (L - 1) // 2, last)
k: int = 5  # tokens per probe
leading_space: bool = False  # query form: the bare word (as the authors' code encodes it) or " word"
show: list[str] = ["time", "water", "car"]  # nouns shown in full in the readable tables

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, display

import lotlib
from lotlib.traveling_words import probes
from lotlib.book.summary import record
from lotlib.models.bounds import block_indices

lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
L, H = view.n_layers, view.n_heads
layers = [0, (L - 1) // 2, L - 1] if blocks is None else block_indices(blocks, L, "blocks", lm.name)
vocab = probes.vocab_strings(lm.tokenizer, view.W_E.shape[0])
words = lotlib.common_nouns()
nouns = probes.single_tokens(lm.tokenizer, words, leading_space)
other = probes.single_tokens(lm.tokenizer, words, not leading_space)
form = "' word' (leading space)" if leading_space else "'word' (no leading space)"
readout = "W_E (tied embeddings)" if view.tied else "W_U (untied: the output matrix, not W_E)"
print(f"{lm!r}: d_head = {view.d_head}, {view.heads(0).n_kv_heads} key/value heads for {H} query heads, "
      f"embed_scale = {view.embed_scale:g}, final norm {view.final_norm.kind}, readout against {readout}")
print(f"queries {form}: {len(nouns.words)} of {len(words)} nouns are single tokens; dropped: {nouns.dropped}")
print(f"the other form: {len(other.words)} single tokens; dropped there: {other.dropped}")
print(f"blocks probed: {layers}")

# %%
table = probes.noun_table(view, vocab, nouns, layers, k)
shown = [w for w in show if w in nouns.words]


def readable(block: int) -> pd.DataFrame:
    """The shown nouns x every head of one block: the top-k tokens of each probe and ||u_h||."""
    part = table[(table.block == block) & table.noun.isin(shown)]
    wide = part.pivot_table(index=["noun", "head"], columns="probe", values="tokens", aggfunc="first")
    norms = part[part.probe == "VO"].set_index(["noun", "head"])["norm"].rename("||u_h||")
    order = pd.MultiIndex.from_product([shown, [str(h) for h in range(H)] + ["sum"]], names=["noun", "head"])
    return wide.join(norms).reindex(order).fillna({"QK": ""})[["QK", "VO", "VO update", "||u_h||"]]


# %% [markdown]
# ## A few nouns, every head
#
# For each probed block, the nouns of `show` × every head (and the sum over heads): the top-5 keys
# (QK), the top-5 readout of the noun plus the head's write (VO), of the write alone (VO update),
# and the size of the write ||u_h||. A leading space is shown as ␣.

# %%
pd.set_option("display.max_colwidth", None)
print(f"mean ||e|| over the nouns: {view.embed(nouns.ids).norm(dim=-1).mean():.2f}")
for block in layers:
    display(HTML(f"<h4>Block {block}</h4>"))
    display(readable(block).style.format({"||u_h||": "{:.2f}"}))

# %% [markdown]
# **What to notice.** Read down a QK column: when a head gives the same keys whatever the noun,
# its keys are a property of the head (tokens whose normalized embedding has a large projection
# on the head's key space), not of the query. Read the VO column against the VO update column: the
# first repeats the noun where the head's write ||u_h|| is small against the noun's embedding
# (mean ||e|| printed above the tables) and follows the write where it is large; the second shows what the
# head itself writes. The sum row adds all heads' writes.
#
# ## All nouns at once
#
# Per block and head: how much the keys depend on the query (the share of nouns whose top key is
# the head's most common top key: 1 means one key for every noun), and how many of the top-5 are
# the noun itself or a variant (plural, capitalised, with or without leading space; the variant set
# of `lotlib.traveling_words.probes.variants`).

# %%
grouped = table.groupby(["block", "probe", "head"], sort=False)
summary = pd.DataFrame({
    "most common top-1": grouped["top1"].agg(lambda s: s.mode().iloc[0]),
    "share with it": grouped["top1"].agg(lambda s: s.value_counts(normalize=True).iloc[0]),
    "distinct top-1": grouped["top1"].nunique(),
    "self rate": grouped["matches"].mean() / k,
    "mean ||u_h||": grouped["norm"].mean(),
}).reset_index()
heads_only = summary[summary["head"] != "sum"]
by_block = heads_only.pivot_table(index="block", columns="probe", values=["share with it", "self rate"])
display(by_block.round(3))
display(HTML(f"<details><summary>Per block, probe and head ({len(summary)} rows)</summary>"
             f"{summary.to_html(index=False, float_format='{:.3f}'.format)}</details>"))

fig, axes = plt.subplots(1, len(layers), figsize=(5 * len(layers), 3.6), sharey=True)
for ax, block in zip(np.atleast_1d(axes), layers):
    part = heads_only[heads_only.block == block]
    x = np.arange(H)
    qk, up = part[part.probe == "QK"], part[part.probe == "VO update"]
    ax.bar(x - 0.2, qk["share with it"], width=0.4, label="QK: share of nouns with the head's common top key")
    ax.bar(x + 0.2, up["self rate"], width=0.4, label="VO update: share of top-5 that is the noun")
    ax.set(title=f"block {block}", xlabel="head", xticks=x, ylim=(0, 1.05))
np.atleast_1d(axes)[0].legend(fontsize=8, loc="upper left")
fig.suptitle(f"{model}: {len(nouns.words)} nouns, query dependence of the keys and self-copying values")
plt.tight_layout()
plt.show()

share = heads_only[heads_only.probe == "QK"].groupby("block")["share with it"].mean()
distinct = heads_only[heads_only.probe == "QK"].groupby("block")["distinct top-1"].mean()
up_rate = heads_only[heads_only.probe == "VO update"].set_index(["block", "head"])["self rate"]
vo_sum = summary[(summary["head"] == "sum") & (summary.probe == "VO")].set_index("block")["self rate"]
for block in layers:
    print(f"block {block}: QK top-1 key shared by {share[block]:.0%} of nouns on average over heads "
          f"({distinct[block]:.1f} distinct top-1 keys per head for {len(nouns.words)} nouns); "
          f"VO update self rate, best head {up_rate[block].max():.2f}; sum over heads with residual {vo_sum[block]:.2f}")

# %% [markdown]
# **What to notice.** A tall blue bar is a head whose keys ignore the query. A tall orange bar is a
# head that, reading a noun, writes that noun back: the "preserves the key's meaning" of the paper
# in its strictest form (the same word, not a synonym). Synonyms and related words are visible in
# the tables, not in this count, which is why it is a lower bound on "meaning preserved".
#
# The full tables (every noun, every head of the probed blocks; also as the DataFrame `table`):

# %%
for probe in ("QK", "VO", "VO update"):
    wide = table[table.probe == probe].pivot_table(index=["block", "noun"], columns="head", values="tokens",
                                                   aggfunc="first", sort=False)
    wide = wide[[str(h) for h in range(H)] + (["sum"] if probe != "QK" else [])]
    display(HTML(f"<details><summary>Full {probe} table: {len(wide)} rows (block, noun) x heads</summary>"
                 f"{wide.to_html()}</details>"))

# %% [markdown]
# ## Does the claim hold on this model?
#
# The paper's statements are qualitative and were made on GPT-2. We turn them into numbers on the
# probed blocks: (1) *clear query-key patterns at the first block*: the first block's keys depend
# on the query (fewer than half of the nouns share a head's most common top key, averaged over
# heads) and some of them are the noun itself; (2) *subject-specific last-layer heads*: the same
# query dependence at the last block; (3) *some heads preserve the key's meaning*: at least one
# head's update, read alone, puts the noun or a variant in its top-5 for 20% of the slots or more.
# The chapter "Probe rates" repeats (1) for every block against a random-word baseline.

# %%
qk_self = heads_only[heads_only.probe == "QK"].groupby("block")["self rate"].mean()
first, last = layers[0], layers[-1]
checks = {
    "first block: keys depend on the query": share[first] < 0.5,
    "first block: some keys are the noun itself": qk_self[first] > 0,
    "last block: keys depend on the query": share[last] < 0.5,
    "some head's update preserves the noun": up_rate.max() >= 0.2,
}
print(f"first block {first}: {share[first]:.0%} of nouns share the common top key (mean over heads), "
      f"QK self rate {qk_self[first]:.3f}")
print(f"last block {last}: {share[last]:.0%} share the common top key, QK self rate {qk_self[last]:.3f}")
print(f"best VO-update self rate {up_rate.max():.2f} (block {up_rate.idxmax()[0]}, head {up_rate.idxmax()[1]})")
for claim, ok in checks.items():
    print(f"  {claim}: {'yes' if ok else 'no'}")

# %%
record({
    "model": model, "blocks": ", ".join(map(str, layers)), "k": k, "leading_space": leading_space,
    "n_nouns": len(nouns.words), "n_nouns_other_form": len(other.words), "dropped_nouns": ", ".join(nouns.dropped),
    "dropped_nouns_other_form": ", ".join(other.dropped),
    "tied": view.tied, "qk_common_key_share_first": share[first], "qk_common_key_share_middle": share[layers[len(layers) // 2]],
    "qk_common_key_share_last": share[last], "qk_self_rate_first": qk_self[first], "qk_self_rate_last": qk_self[last],
    "vo_update_best_head_rate": up_rate.max(), "vo_sum_self_rate_first": vo_sum[first], "vo_sum_self_rate_last": vo_sum[last],
    "first_block_query_dependent": bool(checks["first block: keys depend on the query"]),
    "last_block_query_dependent": bool(checks["last block: keys depend on the query"]),
    "some_head_preserves_noun": bool(checks["some head's update preserves the noun"]),
})
