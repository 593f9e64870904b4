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
# **How it is computed** (the probes of the A4/A5 chapter, for every block). A query token's
# residual input e (its embedding, times the model's embedding scale; no position) goes through the
# block's own first norm, q = block_norm(e).
#
# - *Query-key:* the key direction q W_QK^h is scored against block_norm(e_v) for every vocabulary
#   token v; the top-5 are the keys head h seeks most (biases left out, as in the paper). With
#   rotary positions (Llama, SmolLM2, Gemma) a position-free score is the score of a key at the
#   query's own position: the rotations cancel at relative distance 0.
# - *Value, update alone:* u_h = q W_VO^h + b_V^h W_O^h, read out as final_norm(u_h) @ W_U.
# - *Value, with the residual* (the paper's readout): final_norm(e + u_h + b_O) @ W_U.
#
# A top token *matches* when its text is in the query word's **variant set**
# `lotlib.traveling_words.probes.variants`: {word, plural} × {lower case, Capitalised} × {no space, leading space}
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
# baseline drawn at random would be capped lower for that reason alone. So each random word is drawn
# among those with as many variant tokens as a noun (`random_words(..., like=variant_counts(nouns))`);
# the table below shows both distributions and an unmatched draw.
#
# *Uncertainty.* The unit of sampling is the query word: every interval and band is a 95% bootstrap
# over the nouns (or over the random words), `n_boot` resamples, seeded. The heads and blocks are the
# model's and are not resampled.
#
# **This model is not GPT-2.** The paper's GPT-2 has LayerNorm, twelve heads with their own keys
# and values, learned absolute positions and tied embeddings. SmolLM2 has RMSNorm (no centering),
# grouped-query attention (9 query heads share 3 key/value heads; the model view expands them, so
# every query head has its own W_QK^h and W_VO^h), rotary positions and tied embeddings: the readout
# W_U is W_E, as in the paper. Other models print what they have below.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks probed (None: every block)
k: int = 5  # top-k tokens per probe
leading_space: bool = (
    False  # query form: the bare word (as the authors' code encodes it) or " word"
)
n_baseline: "int | None" = (
    None  # random words in the baseline (None: as many as the nouns)
)
seed: int = 0  # which random words; the bootstrap resamples
n_boot: int = 1000  # bootstrap resamples of the queries for every band and interval

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import display

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes, closing_sentences
from lotlib.book.summary import record
from lotlib.models.bounds import block_indices
from lotlib.traveling_words import probes

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
V, H, L = view.vocab_size, view.n_heads, view.n_layers
vocab = probes.vocab_strings(lm.tokenizer, V)
words = lotlib.common_nouns()
nouns = probes.single_tokens(lm.tokenizer, words, leading_space)
other = probes.single_tokens(lm.tokenizer, words, not leading_space)
n = len(nouns.words)
baseline = probes.random_words(
    vocab,
    n_baseline or n,
    leading_space,
    words,
    seed,
    like=probes.variant_counts(vocab, nouns.words),
)
unmatched = probes.random_words(vocab, len(baseline.words), leading_space, words, seed)
ids = torch.cat([nouns.ids, baseline.ids])
mask = probes.variant_mask(vocab, nouns.words + baseline.words)
layers = (
    list(range(L)) if blocks is None else block_indices(blocks, L, "blocks", lm.name)
)
form = "' word' (leading space)" if leading_space else "'word' (no leading space)"
print(
    f"{lm!r}: {view.heads(0).n_kv_heads} key/value heads for {H} query heads, "
    f"embed_scale {view.embed_scale:g}, tied embeddings: {view.tied}"
)
print(
    f"queries in the form {form}: {n} of {len(words)} nouns are single tokens; dropped: {nouns.dropped}"
)
print(f"in the other form {len(other.words)} are; dropped there: {other.dropped}")
print(
    f"baseline: {len(baseline.words)} random words (seed {seed}), e.g. {baseline.words[:8]}"
)
counts = probes.count_table(
    vocab,
    {
        "nouns": nouns.words,
        "random words (matched)": baseline.words,
        "random words (unmatched draw)": unmatched.words,
    },
)
display(counts.T)
mean_counts = (counts * counts.index.to_numpy()[:, None]).sum() / counts.sum()
print(
    "variant tokens per word, mean: "
    + ", ".join(f"{name} {value:.2f}" for name, value in mean_counts.items())
)

# %% [markdown]
# **What to notice.** The matched random words have the nouns' distribution of variant tokens, row
# for row; the unmatched draw has fewer per word (mean printed last), which is the cap the matching
# removes. Matching makes the random words more noun-like (a word with a plural token is usually a
# noun): they are *other* words of the same kind, not a different kind of word.

# %%
start = time.time()
rates = probes.probe_rates(view, layers, ids, mask, k)  # (B, H(+1), n + n_baseline)
seconds = time.time() - start
print(f"{len(layers)} blocks x {H} heads x {len(ids)} queries in {seconds:.0f} s")
groups = {"nouns": slice(0, n), "random words": slice(n, None)}
chance = mask[:n].sum(1).float().mean().item() / V
names = {
    "qk": "query-key: keys a head seeks",
    "vo_update": "value: the head's update alone",
    "vo": "value: residual + update (paper's readout)",
}
frames = []
for name, title in names.items():
    for group, part in groups.items():
        per_query = rates[name][:, :H, part].mean(1)  # (B, m): mean over heads
        b, q = np.meshgrid(layers, np.arange(per_query.shape[1]), indexing="ij")
        frames.append(
            pd.DataFrame(
                {
                    "block": b.ravel(),
                    "query": q.ravel(),
                    "rate": per_query.ravel(),
                    "queries": group,
                    "probe": title,
                }
            )
        )
curves = pd.concat(frames, ignore_index=True)

# %% [markdown]
# ## Rates by block, nouns against random words

# %%
grid = sns.relplot(
    curves,
    kind="line",
    x="block",
    y="rate",
    hue="queries",
    col="probe",
    marker="o",
    errorbar=("ci", 95),
    n_boot=n_boot,
    seed=seed,
    height=3.6,
    aspect=1.2,
    facet_kws={"sharey": False},
)
for name, ax in zip(names, grid.axes.flat):
    ax.plot(
        layers,
        rates[name][:, :H, :n].mean(2).max(1),
        ":",
        color="k",
        label="nouns, best head",
    )
    ax.axhline(chance, color="grey", lw=0.8, label="chance")
    ax.set(ylabel="rate")
grid.axes.flat[0].legend(fontsize=8)
grid.set_titles("{col_name}")
grid.figure.suptitle(
    f"Probe rates, {model}: share of the top-{k} that is the query word or a variant, mean over "
    f"{H} heads; {n} nouns and {len(baseline.words)} random words (bands: 95% bootstrap over "
    f"queries)",
    y=1.03,
)
plt.show()

curve = {
    (name, group): rates[name][:, :H, part].mean((1, 2))
    for name in names
    for group, part in groups.items()
}
third = max(1, len(layers) // 3)
early, late = slice(0, third), slice(len(layers) - third, None)
for name, label in (
    ("qk", "query-key"),
    ("vo_update", "update alone"),
    ("vo", "with residual"),
):
    a, b = curve[name, "nouns"], curve[name, "random words"]
    peak = int(np.argmax(a))
    print(
        f"{label:>14}: nouns {a[0]:.3f} at block {layers[0]}, peak {a[peak]:.3f} at block {layers[peak]}, "
        f"first third {a[early].mean():.3f}, last third {a[late].mean():.3f}; random words {b[0]:.3f} at "
        f"block {layers[0]}, mean {b.mean():.3f}"
    )
sum_noun = rates["vo"][:, H, :n].mean(1)
print(
    f"chance: {chance:.1e}; sum over heads, with residual: nouns {sum_noun.min():.3f} to {sum_noun.max():.3f}"
)
e_norm = view.embed(nouns.ids).norm(dim=-1).mean().item()
write = (
    np.array(
        [
            probes.update_norms(view, layer, nouns.ids)[:H].mean().item()
            for layer in layers
        ]
    )
    / e_norm
)
print(
    f"a head's write against the noun's embedding, mean ||u_h|| / ||e||: {write[0]:.2f} at block {layers[0]}, "
    f"{np.median(write):.2f} median over blocks, {write.max():.2f} at most (block {layers[int(np.argmax(write))]})"
)

# %% [markdown]
# **What to notice.** Compare each noun curve with the random-word curve beside it and with the grey
# chance line, far below both: any rate visibly above zero is far above chance. The query-key panel
# is the paper's claim: if early heads "show clear query-key patterns" in the sense of a noun seeking
# itself, the noun curve is high at the first blocks and falls later. The printed lines give the
# rate at the first block, the peak, and the means over the first and last third of the blocks.
# Where the two curves overlap, whatever the heads do, they do it for any word of the same kind.
# The value readout *with* the residual returns the noun where a head's write is small against the
# noun's own embedding (the ratio ||u_h|| / ||e|| printed last) and loses it where the writes are
# large, whatever they write; the update-alone readout is the one that says what a head writes.
#
# ## Which heads?
#
# The paper speaks of *some* heads. The rate of each head for the nouns, block by block:

# %%
fig, axes = plt.subplots(1, 2, figsize=(14, 0.35 * H + 1.5))
for ax, name, title in (
    (axes[0], "qk", "query-key"),
    (axes[1], "vo_update", "value, update alone"),
):
    per_head = pd.DataFrame(
        rates[name][:, :H, :n].mean(2).T,
        index=pd.RangeIndex(H, name="head"),
        columns=pd.Index(layers, name="block"),
    )
    sns.heatmap(per_head, ax=ax, cmap="viridis", vmin=0, cbar_kws={"label": "rate"})
    ax.set(title=f"{title}: noun rate per head")
plt.tight_layout()
plt.show()
head_qk = rates["qk"][:, :H, :n].mean(2)
head_up = rates["vo_update"][:, :H, :n].mean(2)
for label, table in (("query-key", head_qk), ("update alone", head_up)):
    print(
        f"{label}: heads with a noun rate >= 0.2, per block: {(table >= 0.2).sum(1).tolist()}"
    )

# %% [markdown]
# **What to notice.** A bright column is a block where many heads map nouns to themselves; a
# bright cell in an otherwise dark column is one specialised head. With grouped-query attention
# (SmolLM2: query heads 0-2, 3-5 and 6-8 share their key and value projections) neighbouring heads
# read the same keys and values, yet their rates can differ: each has its own W_Q^h and W_O^h.
#
# ## Does the claim hold on this model?
#
# The paper's statement is qualitative, for GPT-2: early-layer (block 0) heads show clear
# query-key patterns. We turn it into three measured values, each a bootstrap interval over the
# nouns, with bounds that are ours:
#
# - **A-rates-qk-block0**: at the first probed block, the nouns' query-key rate (mean over heads
#   and nouns) is at least 0.1: one top-5 slot in ten, over every head, is the noun or a variant.
# - **A-rates-qk-early-third**: the same over the first third of the blocks, a looser reading of
#   "early layers".
# - **A-rates-qk-peak**: the pattern is an early-layer one: the rate over the first third of the
#   blocks exceeds the rate over the last third by at least 0.05 (half the level above). Where the
#   curve peaks is printed too, but a peak's location is no test: on random weights the curve is flat
#   at zero and its maximum falls anywhere.
# - **A-rates-vo-update**: some heads preserve the key's meaning in their value output: the best
#   single head's update-alone rate over all blocks is at least 0.2.
#
# Every finding is also judged on the untrained model of the same architecture, where the rates are
# at chance, and the three query-key findings on the random words: when those pass as well (the
# report says *not diagnostic*), the test cannot tell a pattern of the nouns from one the heads show
# for any word of the same kind. The random words are not a null of the value claim: a head that
# copies whatever it reads preserves the key's meaning, which is the claim; their rate is shown.


# %%
def estimate(values: np.ndarray, best_head: bool = False, unit: str = "nouns"):
    return probes.query_estimate(
        values, best_head=best_head, unit=unit, n_boot=n_boot, seed=seed
    )


def contrast(qk: np.ndarray, unit: str):
    """First third minus last third of the blocks, mean over heads: qk `(B, H, m)`."""
    per_query = qk[early].mean((0, 1)) - qk[late].mean((0, 1))
    return probes.query_estimate(per_query, unit=unit, n_boot=n_boot, seed=seed)


noun_q, base_q = groups["nouns"], groups["random words"]
peak = probes.peak_depth(
    rates["qk"][:, :H, noun_q].mean(1), layers, L, n_boot=n_boot, seed=seed
)
values = {
    "model": model,
    "n_blocks": len(layers),
    "n_heads": H,
    "k": k,
    "leading_space": leading_space,
    "n_nouns": n,
    "n_nouns_other_form": len(other.words),
    "dropped_nouns": ", ".join(nouns.dropped),
    "dropped_nouns_other_form": ", ".join(other.dropped),
    "n_baseline": len(baseline.words),
    "seed": seed,
    "chance_rate": chance,
    "seconds": seconds,
    "variant_tokens_nouns": mean_counts["nouns"],
    "variant_tokens_baseline": mean_counts["random words (matched)"],
    "variant_tokens_unmatched": mean_counts["random words (unmatched draw)"],
    "qk_rate_first_block": estimate(rates["qk"][0, :H, noun_q]),
    "qk_baseline_first_block": estimate(
        rates["qk"][0, :H, base_q], unit="random words"
    ),
    "qk_rate_early": estimate(rates["qk"][early, :H, noun_q]),
    "qk_baseline_early": estimate(rates["qk"][early, :H, base_q], unit="random words"),
    "qk_rate_late": estimate(rates["qk"][late, :H, noun_q]),
    "qk_early_minus_late": contrast(rates["qk"][:, :H, noun_q], "nouns"),
    "qk_early_minus_late_baseline": contrast(
        rates["qk"][:, :H, base_q], "random words"
    ),
    "qk_peak_block": layers[int(np.argmax(curve["qk", "nouns"]))],
    "qk_peak_rate": curve["qk", "nouns"].max(),
    "qk_peak_depth": peak
    if np.isfinite(peak.value)
    else "no peak: the rate is zero at every probed block",
    "qk_best_head_rate": estimate(rates["qk"][:, :H, noun_q], best_head=True),
    "vo_update_rate_first_block": estimate(rates["vo_update"][0, :H, noun_q]),
    "vo_update_peak_block": layers[int(np.argmax(curve["vo_update", "nouns"]))],
    "vo_update_peak_rate": curve["vo_update", "nouns"].max(),
    "vo_update_best_head_rate": estimate(
        rates["vo_update"][:, :H, noun_q], best_head=True
    ),
    "vo_update_best_head_rate_baseline": estimate(
        rates["vo_update"][:, :H, base_q], best_head=True, unit="random words"
    ),
    "vo_residual_rate_mean": estimate(rates["vo"][:, :H, noun_q]),
    "vo_residual_baseline_mean": estimate(
        rates["vo"][:, :H, base_q], unit="random words"
    ),
    "write_over_embedding_first": write[0],
    "write_over_embedding_median": np.median(write),
}
print(
    f"the nouns' query-key rate peaks at block {values['qk_peak_block']} of {L} (depth {peak:.2f})"
    if np.isfinite(peak.value)
    else "the nouns' query-key rate is zero at every probed block: no peak"
)
outcomes = chapter_outcomes("c1_probe_rates", values)
display(outcomes)
record(values)

# %%
print(
    "\n".join(
        closing_sentences(
            "c1_probe_rates",
            values,
            model,
            "the heads do this for any word of the kind, not for the nouns",
        )
    )
)
