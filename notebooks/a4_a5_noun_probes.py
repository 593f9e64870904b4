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
# **How it is computed** (`lotlib.traveling_words.probes`, following the authors' `common_nouns.py`).
# Static probes: one token, no position, no context.
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
# center: block_norm(e) lies on the sphere but not on the hyperplane orthogonal to the ones vector.
#
# **Random words, the null of every query-key measurement.** The same probes run on random
# "words" (seeded): lower-case alphabetic tokens of three letters or more that are single tokens with
# and without a leading space, none a variant of a noun, drawn so that each has as many variant
# tokens in the vocabulary as a noun (plural, capitalised and spaced forms; the two count
# distributions are printed below). A pattern the random words show as clearly as the nouns is a
# property of the head for any word, not something the nouns reveal.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks probed (None: first, (L - 1) // 2, last)
k: int = 5  # tokens per probe
leading_space: bool = (
    False  # query form: the bare word (as the authors' code encodes it) or " word"
)
show: list[str] = ["time", "water", "car"]  # nouns shown in full in the readable tables
n_random: "int | None" = None  # random words of the null (None: as many as the nouns)
seed: int = 0  # which random words; the bootstrap resamples
n_boot: int = (
    1000  # bootstrap resamples of the queries (nouns, random words) for every interval
)

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import HTML, display

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes, closing_sentences
from lotlib.book.summary import record
from lotlib.models.bounds import block_indices
from lotlib.traveling_words import probes

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
L, H = view.n_layers, view.n_heads
layers = (
    [0, (L - 1) // 2, L - 1]
    if blocks is None
    else block_indices(blocks, L, "blocks", lm.name)
)
vocab = probes.vocab_strings(lm.tokenizer, view.vocab_size)
words = lotlib.common_nouns()
nouns = probes.single_tokens(lm.tokenizer, words, leading_space)
other = probes.single_tokens(lm.tokenizer, words, not leading_space)
randoms = probes.random_words(
    vocab,
    n_random or len(nouns.words),
    leading_space,
    words,
    seed,
    like=probes.variant_counts(vocab, nouns.words),
)
unmatched = probes.random_words(vocab, len(randoms.words), leading_space, words, seed)
n = len(nouns.words)
form = "' word' (leading space)" if leading_space else "'word' (no leading space)"
readout = (
    "W_E (tied embeddings)" if view.tied else "W_U (untied: the output matrix, not W_E)"
)
print(
    f"{lm!r}: d_head = {view.d_head}, {view.heads(0).n_kv_heads} key/value heads for {H} query heads, "
    f"embed_scale = {view.embed_scale:g}, readout against {readout}"
)
print(
    f"queries {form}: {n} of {len(words)} nouns are single tokens; dropped: {nouns.dropped}"
)
print(
    f"the other form: {len(other.words)} single tokens; dropped there: {other.dropped}"
)
print(
    f"null: {len(randoms.words)} random words (seed {seed}), e.g. {randoms.words[:8]}; blocks probed: {layers}"
)
display(
    probes.count_table(
        vocab,
        {
            "nouns": nouns.words,
            "random words (matched)": randoms.words,
            "random words (unmatched draw)": unmatched.words,
        },
    ).T
)

# %% [markdown]
# The table counts, for each query, how many tokens of the vocabulary are one of its variants: the
# most a probe can match. The matched random words have the nouns' distribution; an unmatched draw
# has fewer variants per word (most random words have no plural token), which would cap their rates
# lower than the nouns' for a reason that has nothing to do with the heads.

# %%
ids = torch.cat([nouns.ids, randoms.ids])
groups = {"nouns": slice(0, n), "random words": slice(n, None)}
tops = probes.probe_tops(view, layers, ids, k)
table = probes.noun_table(
    view, vocab, nouns, layers, k, tops={name: t[:, :, :n] for name, t in tops.items()}
)
shown = [w for w in show if w in nouns.words]


def readable(block: int) -> pd.DataFrame:
    """The shown nouns x every head of one block: the top-k tokens of each probe and ||u_h||."""
    part = table[(table.block == block) & table.noun.isin(shown)]
    wide = part.pivot_table(
        index=["noun", "head"], columns="probe", values="tokens", aggfunc="first"
    )
    norms = (
        part[part.probe == "VO"].set_index(["noun", "head"])["norm"].rename("||u_h||")
    )
    order = pd.MultiIndex.from_product(
        [shown, [str(h) for h in range(H)] + ["sum"]], names=["noun", "head"]
    )
    return (
        wide.join(norms)
        .reindex(order)
        .fillna({"QK": ""})[["QK", "VO", "VO update", "||u_h||"]]
    )


# %% [markdown]
# ## A few nouns, every head
#
# For each probed block, the nouns of `show` × every head (and the sum over heads): the top-5 keys
# (QK), the top-5 readout of the noun plus the head's write (VO), of the write alone (VO update),
# and the size of the write ||u_h||. A leading space is shown as ␣.

# %%
pd.set_option("display.max_colwidth", None)
print(
    f"mean ||e|| over the nouns: {view.embed(nouns.ids).norm(dim=-1).mean().item():.2f}"
)
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
# ## All nouns at once: three measurements per head
#
# The tables are read by eye in the paper. Over all nouns, each head gets three numbers, and each is
# also measured on the random words:
#
# - **QK variant rate**: the share of the top-5 keys that are the query word or a variant of it
#   (plural, capitalised, with or without a leading space: `lotlib.traveling_words.probes.variants`).
#   A head with a *clear query-key pattern* in the strictest sense seeks the query's own forms.
#   Chance (keys drawn uniformly from the vocabulary) is printed under the figure.
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
# The bars are means over the queries with 95% bootstrap intervals (resampling queries, `n_boot`).

# %%
mask = probes.variant_mask(vocab, nouns.words + randoms.words)
rates = {
    name: probes.variant_rates(mask, top) for name, top in tops.items()
}  # (B, H(+1), n + n_random)
specificity = {
    group: np.stack(
        [
            probes.key_specificity(view, layer, ids[part], tops["qk"][b][:, part])
            for b, layer in enumerate(layers)
        ]
    )
    for group, part in groups.items()
}  # (B, H, m)
chance = mask[:n].sum(1).float().mean().item() / view.vocab_size
measured = {
    group: {
        "QK variant rate": rates["qk"][:, :, part],
        "QK key specificity": specificity[group],
        "VO update variant rate": rates["vo_update"][:, :H, part],
    }
    for group, part in groups.items()
}
frames = []
for group, by_measure in measured.items():
    for measure, x in by_measure.items():  # (B, H, m)
        b, h, q = np.meshgrid(
            layers, np.arange(H), np.arange(x.shape[-1]), indexing="ij"
        )
        frames.append(
            pd.DataFrame(
                {
                    "block": b.ravel(),
                    "head": h.ravel(),
                    "query": q.ravel(),
                    "value": x.ravel(),
                    "queries": group,
                    "measure": measure,
                }
            )
        )
per_head = pd.concat(frames, ignore_index=True)
grid = sns.catplot(
    per_head,
    kind="bar",
    x="head",
    y="value",
    hue="queries",
    row="measure",
    col="block",
    errorbar=("ci", 95),
    n_boot=n_boot,
    seed=seed,
    height=2.6,
    aspect=1.9,
    sharey="row",
)
grid.set_titles("block {col_name}")
for (measure, block), ax in grid.axes_dict.items():
    ax.set_ylabel(measure if block == layers[0] else "")
    if measure == "QK key specificity":
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
grid.figure.suptitle(
    f"{model}: {n} nouns and {len(randoms.words)} random words, every head (bars: 95% bootstrap "
    f"over queries; dashed: 0.5, no specificity)",
    y=1.02,
)
plt.show()

summary_rows = (
    per_head.groupby(["measure", "queries", "block"])["value"].mean().unstack("block")
)
display(summary_rows.round(3))
print(
    f"chance of a variant in one top-{k} slot: {chance:.1e} (mean over nouns of variant tokens / vocabulary)"
)

# %% [markdown]
# **What to notice.** Compare each orange bar with the blue one beside it: a head that does the same
# for random words as for nouns does it for any word. The table under the figure gives the means over
# heads. The QK variant rate and the VO update rate are far above chance wherever a bar is visible at
# all (chance per slot printed above). A key specificity near 0.5 says the head's keys for a noun are
# no closer to that noun than to any other: either the head seeks the same keys whatever the query, or
# keys unrelated to it.
#
# The summary of the old reading, *the top key depends on the query* (the share of nouns whose top
# key is the head's most common top key: 1 means one key for every noun), is folded below with the
# other per-head numbers. It is not a test of the paper's claim: a random matrix gives every query
# its own top key, so random weights "pass" it.

# %%
grouped = table.groupby(["block", "probe", "head"], sort=False)
summary = pd.DataFrame(
    {
        "most common top-1": grouped["top1"].agg(lambda s: s.mode().iloc[0]),
        "share with it": grouped["top1"].agg(
            lambda s: s.value_counts(normalize=True).iloc[0]
        ),
        "distinct top-1": grouped["top1"].nunique(),
        "self rate": grouped["matches"].mean() / k,
        "mean ||u_h||": grouped["norm"].mean(),
    }
).reset_index()
display(
    HTML(
        f"<details><summary>Per block, probe and head ({len(summary)} rows)</summary>"
        f"{summary.to_html(index=False, float_format='{:.3f}'.format)}</details>"
    )
)
heads_only = summary[summary["head"] != "sum"]
share = heads_only[heads_only.probe == "QK"].groupby("block")["share with it"].mean()
vo_sum = summary[(summary["head"] == "sum") & (summary.probe == "VO")].set_index(
    "block"
)["self rate"]
for block in layers:
    print(
        f"block {block}: the most common top key is shared by {share[block]:.0%} of nouns (mean over heads); "
        f"sum over heads read with the residual returns the noun in {vo_sum[block]:.2f} of its top-{k}"
    )

# %% [markdown]
# The full tables (every noun, every head of the probed blocks; also as the DataFrame `table`):

# %%
for probe in ("QK", "VO", "VO update"):
    wide = table[table.probe == probe].pivot_table(
        index=["block", "noun"],
        columns="head",
        values="tokens",
        aggfunc="first",
        sort=False,
    )
    wide = wide[[str(h) for h in range(H)] + (["sum"] if probe != "QK" else [])]
    display(
        HTML(
            f"<details><summary>Full {probe} table: {len(wide)} rows (block, noun) x heads</summary>"
            f"{wide.to_html()}</details>"
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
#   itself or a variant).
# - **A4-early-qk-related**, the same claim read as meaning rather than form: the first block's key
#   specificity, averaged over heads, is at least 0.75 (a noun's own keys are nearer to it than
#   another noun's keys in three comparisons out of four).
# - **A4-last-subject**, *last-layer heads are subject-specific*: the same key specificity at the last
#   probed block, at least 0.75.
# - **A5-value-preserves**, *some heads preserve the key's meaning in their value output*: the best
#   head's VO update variant rate over the probed blocks is at least 0.2.
#
# Every finding has two nulls, judged by the same bound in the report: the same chapter run on the
# same architecture with random weights, where each of these values sits at chance (a rate near 0,
# a specificity near 0.5), and, for the query-key claims, the random words. When the random words pass
# as well (the report says *not diagnostic*), the test cannot tell a pattern of the nouns from one the
# head shows for any word it reads. The random words are not a null of A5: a head that copies
# whatever it reads preserves the key's meaning, which is the claim; their rate is shown beside it.


# %%
def estimate(values: np.ndarray, best_head: bool = False, unit: str = "nouns"):
    return probes.query_estimate(
        values, best_head=best_head, unit=unit, n_boot=n_boot, seed=seed
    )


noun_q, random_q = groups["nouns"], groups["random words"]
values = {
    "model": model,
    "blocks": ", ".join(map(str, layers)),
    "k": k,
    "leading_space": leading_space,
    "n_nouns": n,
    "n_nouns_other_form": len(other.words),
    "dropped_nouns": ", ".join(nouns.dropped),
    "dropped_nouns_other_form": ", ".join(other.dropped),
    "n_random_words": len(randoms.words),
    "seed": seed,
    "tied": view.tied,
    "chance_rate": chance,
    "qk_rate_best_head_first": estimate(rates["qk"][0, :, noun_q], best_head=True),
    "qk_rate_best_head_first_random": estimate(
        rates["qk"][0, :, random_q], best_head=True, unit="random words"
    ),
    "qk_rate_first": estimate(rates["qk"][0, :, noun_q]),
    "qk_rate_last": estimate(rates["qk"][-1, :, noun_q]),
    "qk_specificity_first": estimate(specificity["nouns"][0]),
    "qk_specificity_first_random": estimate(
        specificity["random words"][0], unit="random words"
    ),
    "qk_specificity_last": estimate(specificity["nouns"][-1]),
    "qk_specificity_last_random": estimate(
        specificity["random words"][-1], unit="random words"
    ),
    "vo_update_best_head_rate": estimate(
        rates["vo_update"][:, :H, noun_q], best_head=True
    ),
    "vo_update_best_head_rate_random": estimate(
        rates["vo_update"][:, :H, random_q], best_head=True, unit="random words"
    ),
    "qk_common_key_share_first": share[layers[0]],
    "qk_common_key_share_last": share[layers[-1]],
    "vo_sum_self_rate_first": vo_sum[layers[0]],
    "vo_sum_self_rate_last": vo_sum[layers[-1]],
}
best = np.unravel_index(
    rates["vo_update"][:, :H, noun_q].mean(-1).argmax(), (len(layers), H)
)
for label, key in (
    ("first block, best head's QK variant rate", "qk_rate_best_head_first"),
    ("first block, key specificity", "qk_specificity_first"),
    ("last block, key specificity", "qk_specificity_last"),
    ("best head's VO update variant rate", "vo_update_best_head_rate"),
):
    print(
        f"{label}: nouns {values[key]:.3f}, random words {values[key + '_random']:.3f}"
    )
print(f"the best VO update head is head {best[1]} of block {layers[best[0]]}")
outcomes = chapter_outcomes("a4_a5_noun_probes", values)
display(outcomes)
record(values)

# %%
print(
    "\n".join(
        closing_sentences(
            "a4_a5_noun_probes",
            values,
            model,
            "the head does this for any word, not for the nouns",
        )
    )
)
