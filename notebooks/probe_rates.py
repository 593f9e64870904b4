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
# rate for random words, the baseline a noun must beat, and the best head of each block.
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
# the top-5 slots that match, averaged over queries and heads. The **baseline** is the same rate for
# as many random "words" (seeded): lower-case alphabetic tokens of three letters or more that are
# single tokens both with and without a leading space (this rules out most word pieces), none a
# variant of a noun. Random words have fewer variant tokens in the vocabulary than common nouns
# (both counts are printed below), which caps their rate lower when a probe returns every form of
# the word. **Chance** is the rate if the top-5 were drawn uniformly from the vocabulary.
# The query-key score has no residual term, so a match there is the head itself; the value readout
# *with* the residual contains e, so it matches whenever the head's write is small compared with e:
# the update-alone readout is the one that tells what the head writes.
#
# **This model is not GPT-2.** The paper's GPT-2 has LayerNorm, twelve heads with their own keys
# and values, learned absolute positions and tied embeddings. SmolLM2 has RMSNorm (no centering),
# grouped-query attention (9 query heads share 3 key/value heads; the model view expands them, so
# every query head has its own W_QK^h and W_VO^h), rotary positions and tied embeddings: the readout
# W_U is W_E, as in the paper. Other models print what they have below.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
blocks: "list[Block] | None" = None  # blocks probed (None: every block)
k: int = 5  # top-k tokens per probe
leading_space: bool = False  # query form: the bare word (as the authors' code encodes it) or " word"
n_baseline: "int | None" = None  # random words in the baseline (None: as many as the nouns)
seed: int = 0  # which random words

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

import lotlib
from lotlib.traveling_words import probes
from lotlib.book.summary import record
from lotlib.models.bounds import block_indices

lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
V, H = view.W_E.shape[0], view.n_heads
vocab = probes.vocab_strings(lm.tokenizer, V)
words = lotlib.common_nouns()
nouns = probes.single_tokens(lm.tokenizer, words, leading_space)
other = probes.single_tokens(lm.tokenizer, words, not leading_space)
baseline = probes.random_words(vocab, n_baseline or len(nouns.words), leading_space, words, seed)
n = len(nouns.words)
ids = torch.cat([nouns.ids, baseline.ids])
mask = probes.variant_mask(vocab, nouns.words + baseline.words)
layers = list(range(view.n_layers)) if blocks is None else block_indices(blocks, view.n_layers, "blocks", lm.name)
form = "' word' (leading space)" if leading_space else "'word' (no leading space)"
print(f"{lm!r}: {view.heads(0).n_kv_heads} key/value heads for {H} query heads, "
      f"embed_scale {view.embed_scale:g}, tied embeddings: {view.tied}")
print(f"queries in the form {form}: {n} of {len(words)} nouns are single tokens; dropped: {nouns.dropped}")
print(f"in the other form {len(other.words)} are; dropped there: {other.dropped}")
print(f"baseline: {len(baseline.words)} random words (seed {seed}), e.g. {baseline.words[:8]}")
print(f"variant tokens per noun in the vocabulary: mean {mask[:n].sum(1).float().mean():.1f}; "
      f"per random word: {mask[n:].sum(1).float().mean():.1f}")

# %%
start = time.time()
rates = probes.probe_rates(view, layers, ids, mask, k)
seconds = time.time() - start
print(f"{len(layers)} blocks x {H} heads x {len(ids)} queries in {seconds:.0f} s")


def curve(name: str, queries: slice, heads: slice = slice(0, H)):
    """Mean rate per block over the chosen heads and queries, and a 95% band over queries."""
    per_query = rates[name][:, heads, queries].mean(1)  # (L, n)
    mean = per_query.mean(1)
    return mean, 1.96 * per_query.std(1, ddof=1) / np.sqrt(per_query.shape[1])


noun_q, base_q = slice(0, n), slice(n, None)
chance = {"nouns": mask[:n].sum(1).float().mean().item() / V, "random words": mask[n:].sum(1).float().mean().item() / V}

# %% [markdown]
# ## Rates by block, nouns against random words

# %%
panels = [("qk", "query-key: keys a head seeks"), ("vo_update", "value: the head's update alone"),
          ("vo", "value: residual + update (paper's readout)")]
fig, axes = plt.subplots(1, 3, figsize=(15, 4), sharex=True)
for ax, (name, title) in zip(axes, panels):
    for queries, label, style in ((noun_q, "nouns", "-"), (base_q, "random words", "--")):
        mean, band = curve(name, queries)
        ax.plot(layers, mean, style, marker="o", ms=3, label=f"{label}, mean over heads")
        ax.fill_between(layers, mean - band, mean + band, alpha=0.2)
    best = rates[name][:, :H, :n].mean(2).max(1)
    ax.plot(layers, best, ":", color="k", label="nouns, best head")
    ax.axhline(chance["nouns"], color="grey", lw=0.8, label="chance (nouns)")
    ax.set(title=title, xlabel="block", ylabel=f"share of top-{k} that is the word or a variant", ylim=(-0.02, 1.02))
axes[0].legend(fontsize=8)
fig.suptitle(f"Probe rates, {model}: {n} nouns and {len(baseline.words)} random words, {H} heads per block")
plt.tight_layout()
plt.show()

qk_noun, qk_noun_band = curve("qk", noun_q)
qk_base, qk_base_band = curve("qk", base_q)
up_noun, _ = curve("vo_update", noun_q)
up_base, _ = curve("vo_update", base_q)
vo_noun, _ = curve("vo", noun_q)
vo_base, _ = curve("vo", base_q)
sum_noun, _ = curve("vo", noun_q, slice(H, H + 1))
third = max(1, len(layers) // 3)
early, late = slice(0, third), slice(len(layers) - third, None)
for label, a, b in (("query-key", qk_noun, qk_base), ("update alone", up_noun, up_base), ("with residual", vo_noun, vo_base)):
    peak = int(np.argmax(a))
    print(f"{label:>14}: nouns {a[0]:.3f} at block {layers[0]}, peak {a[peak]:.3f} at block {layers[peak]}, "
          f"first third {a[early].mean():.3f}, last third {a[late].mean():.3f}; random words {b[0]:.3f} at "
          f"block {layers[0]}, mean {b.mean():.3f}")
print(f"chance: {chance['nouns']:.5f} (nouns), {chance['random words']:.5f} (random words); "
      f"sum over heads, with residual: nouns {sum_noun.min():.3f} to {sum_noun.max():.3f}")
e_norm = view.embed(nouns.ids).norm(dim=-1).mean().item()
write = np.array([probes.update_norms(view, layer, nouns.ids)[:H].mean().item() for layer in layers]) / e_norm
print(f"a head's write against the noun's embedding, mean ||u_h|| / ||e||: {write[0]:.2f} at block {layers[0]}, "
      f"{np.median(write):.2f} median over blocks, {write.max():.2f} at most (block {layers[int(np.argmax(write))]})")

# %% [markdown]
# **What to notice.** Compare each solid curve with its dashed baseline and with the grey chance
# line, far below both: any rate visibly above zero is far above chance. The query-key panel is the
# paper's claim: if early heads "show clear query-key patterns" in the sense of a noun seeking
# itself, the solid curve is high at the first blocks and falls later. The printed lines give the
# rate at the first block, the peak, and the means over the first and last third of the blocks.
# The value readout *with* the residual returns the noun where a head's write is small against the
# noun's own embedding (the ratio ||u_h|| / ||e|| printed last) and loses it where the writes are
# large, whatever they write; the update-alone readout is the one that says what a head writes.
#
# ## Which heads?
#
# The paper speaks of *some* heads. The rate of each head for the nouns, block by block:

# %%
fig, axes = plt.subplots(1, 2, figsize=(14, 3.8))
for ax, name, title in ((axes[0], "qk", "query-key"), (axes[1], "vo_update", "value, update alone")):
    image = ax.imshow(rates[name][:, :H, :n].mean(2).T, aspect="auto", cmap="viridis", vmin=0, vmax=1,
                      extent=(layers[0] - 0.5, layers[-1] + 0.5, H - 0.5, -0.5))
    ax.set(title=f"{title}: noun rate per head", xlabel="block", ylabel="head")
    fig.colorbar(image, ax=ax, label="rate")
plt.tight_layout()
plt.show()
head_qk = rates["qk"][:, :H, :n].mean(2)
head_up = rates["vo_update"][:, :H, :n].mean(2)
for label, table in (("query-key", head_qk), ("update alone", head_up)):
    print(f"{label}: heads with a noun rate >= 0.2, per block: {(table >= 0.2).sum(1).tolist()}")

# %% [markdown]
# **What to notice.** A bright column is a block where many heads map nouns to themselves; a
# bright cell in an otherwise dark column is one specialised head. With grouped-query attention
# (SmolLM2: query heads 0-2, 3-5 and 6-8 share their key and value projections) neighbouring heads
# read the same keys and values, yet their rates can differ: each has its own W_Q^h and W_O^h.
#
# ## Does the claim hold on this model?
#
# The paper's statement is qualitative, for GPT-2: early-layer (block 0) heads show clear
# query-key patterns. We test it twice. *At block 0*, the paper's layer: the noun query-key rate
# there must exceed the random-word baseline at block 0 and the mean over the last third of the
# blocks, each by more than the sum of the two 95% bands. *Over the first third of the blocks*, a
# looser reading of "early layers": the same comparisons with the first third's mean.

# %%
def exceeds(a: float, a_band: float, b: float, b_band: float) -> bool:
    return bool(a - b > a_band + b_band)


late_noun, late_band = qk_noun[late].mean(), qk_noun_band[late].mean()
block0 = exceeds(qk_noun[0], qk_noun_band[0], qk_base[0], qk_base_band[0]) and \
    exceeds(qk_noun[0], qk_noun_band[0], late_noun, late_band)
early_noun, early_band = qk_noun[early].mean(), qk_noun_band[early].mean()
early_base, early_base_band = qk_base[early].mean(), qk_base_band[early].mean()
first_third = exceeds(early_noun, early_band, early_base, early_base_band) and \
    exceeds(early_noun, early_band, late_noun, late_band)
verdict = {True: "holds", False: "does not hold"}
print(f"query-key rate of the nouns at block {layers[0]}: {qk_noun[0]:.3f} (random words {qk_base[0]:.3f}, "
      f"last third {late_noun:.3f}) -> the block-0 pattern {verdict[block0]}")
print(f"first third of the blocks: nouns {early_noun:.3f}, random words {early_base:.3f}, last third "
      f"{late_noun:.3f} -> the early-layers pattern {verdict[first_third]}; the rate peaks at block "
      f"{layers[int(np.argmax(qk_noun))]} ({qk_noun.max():.3f}, paper: block 0)")
print(f"value (update alone), nouns: best block {layers[int(np.argmax(up_noun))]} at {up_noun.max():.3f} "
      f"(random words there {up_base[int(np.argmax(up_noun))]:.3f}); "
      f"best single head {head_up.max():.3f} at block {layers[int(np.argmax(head_up.max(1)))]}")

# %%
record({
    "model": model, "n_blocks": len(layers), "n_heads": H, "k": k, "leading_space": leading_space,
    "n_nouns": n, "n_nouns_other_form": len(other.words), "dropped_nouns": ", ".join(nouns.dropped),
    "dropped_nouns_other_form": ", ".join(other.dropped),
    "n_baseline": len(baseline.words), "chance_rate": chance["nouns"], "seconds": seconds,
    "qk_rate_first_block": qk_noun[0], "qk_baseline_first_block": qk_base[0],
    "qk_rate_early": early_noun, "qk_rate_late": late_noun, "qk_baseline_early": early_base,
    "qk_peak_block": layers[int(np.argmax(qk_noun))], "qk_peak_rate": qk_noun.max(),
    "qk_best_head_rate": head_qk.max(), "qk_block0_pattern_holds": block0, "qk_first_third_pattern_holds": first_third,
    "vo_update_rate_first_block": up_noun[0], "vo_update_baseline_first_block": up_base[0],
    "vo_update_peak_block": layers[int(np.argmax(up_noun))], "vo_update_peak_rate": up_noun.max(),
    "vo_update_best_head_rate": head_up.max(),
    "vo_residual_rate_mean": vo_noun.mean(), "vo_residual_baseline_mean": vo_base.mean(),
    "write_over_embedding_first": write[0], "write_over_embedding_median": np.median(write),
})
