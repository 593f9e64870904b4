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
# # Other models and the last-layer anomaly
#
# **What you will see.** The summary numbers of Part II, measured the same way on several models side by
# side: how fast the last layer's singular values decay, how many singular directions the next-token
# distribution needs, the growth rate of the residual noise, whether language and gibberish stay linearly
# separable, and how far the last layer breaks the noise law. One table collects them; one figure per model
# shows the residual variance against the arrival layer with the fitted law and the last layer marked.
#
# **The paper's claims** (Sarfati et al., ICLR 2025, appendix on Llama 2 7B, Mistral 7B, Llama 3.2 1B and 3B):
# the picture of GPT-2 medium carries over to other models, with two exceptions: the early layers deviate
# from the noise law, and the **last layer** breaks it (its residual variance is off the exponential trend of
# the others). Llama 2 7B has λ ≈ 0.27 where GPT-2 medium has λ ≈ 0.18. **Why it matters:** the reviewers
# asked for the last-layer anomaly as a diagnostic across models, and a diagnostic has to be a number. It
# also has to measure the model, not the way its states were read: in Hugging Face models the last entry of
# `output_hidden_states` is taken *after* the final norm, while every other entry is a raw block output. A
# trajectory read that way ends with a normalized state, on a different scale from the rest. So we measure
# the anomaly twice, on x(L) as the block leaves it (our trajectories) and on final_norm(x(L)).
#
# **How it is computed.** Every model runs on Walden cut into pseudo-sentences of N_k tokens (no BOS, as in
# the paper), the pilot is the last token, x(t) is block t's output, all with the conventions of chapters B2
# and B4:
#
# - **Spectrum decay**: σ_1/σ_2 and the least-squares slope of ln σ_i against ln i for i = 10..k/2 at the last
#   layer (uncentered SVD of all pilots; k = min(N_s, D)), as in chapter B2.
# - **K for the KL threshold**: the smallest K of the grid whose mean KL(p_K ‖ p) falls below the median KL
#   between consecutive pseudo-sentences, with the last-layer truncation protocol of chapter B2 (x(L) projected
#   on the top-K singular directions of U(L), then final norm and unembedding), on the first `n_kl` pilots;
#   reported as K and K/D.
# - **Noise law**: Eq. 1 residuals for every pair 1 ≤ t < t + τ ≤ L, bases aligned from layer 0, coordinates in
#   the aligned arrival basis, and the fit ln(mean variance) = ln α + λ(t + τ) over all pairs: the first
#   convention of chapter B4 (the natural log of the mean variance over coordinates, a trace, the same in any
#   basis). λL is the total growth over the model's depth, comparable across depths.
# - **Last-layer ratio**: the law refitted without the last layer (pairs with t + τ ≤ L − 1), then the observed
#   variance of the pairs (t, L) over the law's prediction α e^(λL), a geometric mean over departures t: 1 when
#   the last layer follows the law. "With final norm" replaces x(L) by the final norm of x(L) (RMSNorm here,
#   with its gain) and recomputes U(L) and the residuals of the pairs (t, L); the fitted law is unchanged.
# - **Separability**: chapter "Null tests": Walden vs uniformly random tokens at N_k = 10, `n_s_gibberish`
#   pseudo-sentences each, a seeded perceptron on a 70/30 split at every layer; the minimum over t = 1..L.

# %% tags=["parameters"]
models: list[str] = ["smollm2-135m", "gemma3-270m"]  # embedded names, local folders or hub ids (e.g. "gpt2-medium" online)
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k: int = 50  # tokens per pseudo-sentence
n_s: "int | None" = None  # cap on pseudo-sentences (None: all of Walden)
n_kl: int = 300  # pilots for the truncated KL and its baseline (the first n_kl)
ks: "list[int] | None" = None  # K grid for the KL threshold (None: powers of two below D, D/4 and D)
n_k_gibberish: int = 10  # tokens per pseudo-sentence in the separability test
n_s_gibberish: int = 2000  # pseudo-sentences per class in the separability test
classifier: "Literal['perceptron', 'logistic']" = "perceptron"  # "perceptron" (the paper's) or "logistic"
train_fraction: float = 0.7  # share of the pilots the classifier is trained on
n_bos: int = 200  # pseudo-sentences for the BOS check (0 skips it)
seed: int = 0  # gibberish tokens and the classifier's split

# %%
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import lotlib
from lotlib.lines_of_thought.null_tests import (arrival_log_variance, last_layer_normalized, law_ratio, layer_separability,
                               next_token_nll, residual_statistics)
from lotlib.lines_of_thought.residuals import fit_variance, pair_mask
from lotlib.book.summary import record
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.truncation import consecutive_kl, truncated_kl

lms, Xs, bases = {}, {}, {}
for name in models:
    lms[name] = lotlib.load_model(name, device=device, dtype=dtype)
    Xs[name] = lotlib.trajectories(lms[name], lotlib.walden(lms[name].tokenizer, n_k=n_k, n_s=n_s))  # (N_s, L+1, D)
    bases[name] = ensemble_svd(Xs[name])  # U (L+1, D, k), S (L+1, k), sorted by decreasing sigma
    v = lms[name].view
    print(f"{lms[name]!r}: vocabulary {v.W_U.shape[1]}, tied embeddings {v.tied}; trajectories {Xs[name].shape}")

# %% [markdown]
# ## Spectrum decay at the last layer

# %%
spectrum = {}
for name in models:
    S = bases[name][1]
    L, k = S.shape[0] - 1, S.shape[1]
    index = np.arange(1, k + 1)
    fitted = (index >= 10) & (index <= k // 2)
    spectrum[name] = {"sigma1_over_sigma2": S[L, 0] / S[L, 1],
                      "spectrum_slope": np.polyfit(np.log(index[fitted]), np.log(S[L, fitted]), 1)[0]}
    print(f"{name}: sigma_1 / sigma_2 = {spectrum[name]['sigma1_over_sigma2']:.2f}; log-log slope over i = 10..{k // 2} "
          f"= {spectrum[name]['spectrum_slope']:.3f}")

# %% [markdown]
# ## How many directions the next-token distribution needs
#
# The logits of a 262k-token vocabulary (Gemma 3) take a gigabyte for a thousand states, so the KL runs in
# batches sized to the vocabulary (about 16 million logits at a time). The criterion depends on the baseline: two
# unrelated pseudo-sentences have very different next-token distributions, and when the baseline is that large,
# even a handful of directions can fall below it. Read K together with the KL curve (the figure below).

# %%
def first_below(grid: list[int], curve: np.ndarray, level: float) -> int | None:
    """The smallest K of the grid whose mean KL is below `level` (None if none is)."""
    below = np.flatnonzero(curve < level)
    return grid[below[0]] if len(below) else None


truncation = {}
for name in models:
    view, X, (U, S) = lms[name].view, Xs[name], bases[name]
    L, D, k = X.shape[1] - 1, X.shape[2], S.shape[1]
    grid = sorted({2 ** j for j in range(int(np.log2(D)) + 1) if 2 ** j < D} | {D // 4, D}) if ks is None else ks
    grid = sorted({K for K in grid if K <= k})  # the basis of N_s pilots has k = min(N_s, D) directions
    batch = max(1, 2 ** 24 // view.W_U.shape[1])
    x_L = X[:n_kl, L]
    curve = truncated_kl(view, x_L, U[L], grid, batch_size=batch).mean(1)
    baseline = float(np.median(consecutive_kl(view, x_L, batch_size=batch)))
    K0 = first_below(grid, curve, baseline)
    truncation[name] = {"grid": grid, "curve": curve, "kl_baseline": baseline, "k_below_baseline": K0,
                        "k_over_d_below_baseline": K0 / D if K0 else None}
    print(f"{name}: baseline {baseline:.3f} nats on {len(x_L)} pilots; mean KL below it from K = {K0} "
          f"(K/D = {K0 / D if K0 else float('nan'):.3f}, D = {D}); grid {grid}; mean KL at K = {grid[0]}: {curve[0]:.3f}"
          + (" (the first K of the grid is already below the baseline)" if K0 == grid[0] else ""))

# %% [markdown]
# ## The noise law and the last layer

# %%
noise = {}
for name in models:
    view, X, (U, S) = lms[name].view, Xs[name], bases[name]
    T = X.shape[1]
    L = T - 1
    log_var = residual_statistics(X, U, S).log_mean_var()  # (T, T), [t, t + tau]
    fit_all = fit_variance(log_var, pair_mask(T, 1, L))
    fit_law = fit_variance(log_var, pair_mask(T, 1, L - 1))  # the law without the last layer
    normalized = arrival_log_variance(*last_layer_normalized(view, X, U, S))  # pairs (t, L), t = 1..L-1
    noise[name] = {"log_var": log_var, "log_var_normalized": normalized, "fit_law": fit_law,
                   "alpha": fit_all["alpha"], "lambda": fit_all["lambda"], "lambda_L": fit_all["lambda"] * L,
                   "r2": fit_all["r2"], "arrival_r2": fit_all["arrival_r2"], "lambda_without_last": fit_law["lambda"],
                   "last_layer_ratio": law_ratio(log_var[1:L, L], fit_law, L),
                   "last_layer_ratio_final_norm": law_ratio(normalized, fit_law, L),
                   "late_arrival_max_abs_log_ratio": max(abs(np.log(law_ratio(log_var[1:s, s], fit_law, s)))
                                                         for s in range(L // 2, L))}
    n = noise[name]
    for suffix in ("", "_final_norm"):  # "breaks": further off the law than every other arrival layer from L/2 on
        n[f"last_layer_breaks_law{suffix}"] = bool(abs(np.log(n[f"last_layer_ratio{suffix}"]))
                                                   > n["late_arrival_max_abs_log_ratio"])
    print(f"{name}: alpha = {n['alpha']:.3f}, lambda = {n['lambda']:.4f} (lambda L = {n['lambda_L']:.2f}), R2 = {n['r2']:.3f}, "
          f"arrival R2 = {n['arrival_r2']:.3f}; without the last layer lambda = {fit_law['lambda']:.4f}; last layer "
          f"observed / law: {n['last_layer_ratio']:.2f} as the block leaves it, {n['last_layer_ratio_final_norm']:.3g} "
          f"after the final norm; other arrival layers {L // 2}..{L - 1} are off the law by at most a factor "
          f"{np.exp(n['late_arrival_max_abs_log_ratio']):.2f}")

# %%
fig, axes = plt.subplots(1, len(models), figsize=(6.2 * len(models), 4.3), squeeze=False)
for ax, name in zip(axes[0], models):
    n = noise[name]
    T = n["log_var"].shape[0]
    L = T - 1
    t_idx, s_idx = np.nonzero(pair_mask(T, 1, L))
    points = ax.scatter(s_idx, n["log_var"][t_idx, s_idx], c=t_idx, cmap="viridis", s=8)
    grid = np.linspace(1, L, 50)
    f = n["fit_law"]
    ax.plot(grid, np.log(f["alpha"]) + f["lambda"] * grid, color="crimson",
            label=f"law fitted on t+τ ≤ {L - 1}: λ = {f['lambda']:.3f}")
    ax.scatter(np.full(L - 1, L), n["log_var_normalized"], marker="x", color="crimson", s=25,
               label=f"arrival L, final norm applied")
    ax.axvline(L, color="grey", ls="--", lw=1)
    ax.set(xlabel="arrival layer t + τ", ylabel="ln(mean variance)", title=f"{name}, L = {L}")
    ax.legend(fontsize=8, loc="upper left")
    fig.colorbar(points, ax=ax, label="departure layer t")
fig.suptitle("Residual variance of the linear extrapolation against the arrival layer; dashed: the last layer")
plt.tight_layout()
plt.show()

# %% [markdown]
# **What to notice.** In each panel the dots of the last column (dashed line) are the pairs arriving at the last
# layer, x(L) as the last block leaves it; the crosses are the same pairs with the final norm applied to x(L).
# Read the last-layer ratio printed above against this picture: how far the last column sits from the red line
# (fitted without it), compared with how far the other late columns sit from it (the factor printed last: the
# law itself is only approximate, so "breaks the law" has to mean "further off than the other layers are"). The final norm divides every state by its root mean square, so after it x(L) no longer
# has the scale the residual stream grew to: a trajectory whose last state is read after the final norm (as
# `output_hidden_states` does in Hugging Face models) shows an "anomaly" at the last layer whatever the model
# does. The ratio without the norm is the model's own last-layer behaviour. Look also at the darkest dots,
# departures from the first layers: where they sit off the line, that is the paper's "early layers deviate".
#
# ## Language vs gibberish in every model

# %%
separable = {}
for name in models:
    lm = lms[name]
    vocab = min(len(lm.tokenizer), lm.view.W_E.shape[0])
    language = lotlib.walden(lm.tokenizer, n_k=n_k_gibberish, n_s=n_s_gibberish)
    gibberish = lotlib.gibberish(vocab, n_s=language.n_s, n_k=n_k_gibberish, seed=seed)
    separable[name] = layer_separability(lotlib.trajectories(lm, language), lotlib.trajectories(lm, gibberish),
                                         train_fraction, seed, classifier)
    print(f"{name}: test accuracy min over t = 1..{len(separable[name]) - 1} = {separable[name][1:].min():.3f}, "
          f"at t = 0 {separable[name][0]:.3f} ({language.n_s} pilots per class)")

fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
for name in models:
    S, D = bases[name][1], Xs[name].shape[2]
    axes[0].loglog(np.arange(1, S.shape[1] + 1), S[-1] / S[-1, 0], label=name)
    axes[1].loglog(np.array(truncation[name]["grid"][:-1]) / D, truncation[name]["curve"][:-1], marker="o",
                   label=f"{name} (baseline dotted)")
    axes[1].axhline(truncation[name]["kl_baseline"], ls=":", color=axes[1].lines[-1].get_color())
    depth = np.arange(len(separable[name])) / (len(separable[name]) - 1)
    axes[2].plot(depth, separable[name], marker="o", ms=3, label=name)
axes[0].set(xlabel="index i", ylabel="σ_i(L) / σ_1(L)", title="Last layer's spectrum")
axes[1].set(xlabel="K / D", ylabel="mean KL(p_K ‖ p) (nats)", title="Truncated next-token distribution")
axes[2].set(xlabel="relative depth t / L", ylabel="test accuracy", ylim=(0.4, 1.02), title="Walden vs gibberish")
for ax in axes:
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# **What to notice.** Left: the decay of each model's last-layer spectrum, normalized by σ_1. Middle: where each
# KL curve crosses its own baseline (dotted) is the K of the table, here as a fraction of D; a curve that starts
# below its baseline makes K the smallest value of the grid, and then says only that the baseline is lenient. Right: the
# separability of language and gibberish at every relative depth.
#
# ## Gemma without BOS
#
# Both models run without a BOS token, as the paper's pseudo-sentences do (`lotlib.walden(..., bos=False)`, the
# default; `bos=True` prepends the tokenizer's BOS token to every pseudo-sentence, in every chapter that has
# a `bos` parameter). Gemma is trained with a BOS token at the start of every sequence. A direct check: the
# negative log-likelihood of the true next token (the first token of the next pseudo-sentence) from x(L), on
# the first `n_bos` pseudo-sentences, with and without BOS.

# %%
bos_check = {}
for name in models if n_bos else []:
    lm = lms[name]
    if lm.tokenizer.bos_token_id is None:
        print(f"{name}: no BOS token")
        continue
    L = Xs[name].shape[1] - 1
    following = lotlib.walden(lm.tokenizer, n_k=n_k, n_s=n_bos + 1).ids[1:, 0]
    plain = lotlib.trajectories(lm, lotlib.walden(lm.tokenizer, n_k=n_k, n_s=n_bos))[:, L]
    with_bos = lotlib.trajectories(lm, lotlib.walden(lm.tokenizer, n_k=n_k, n_s=n_bos, bos=True))[:, L]
    bos_check[name] = {"nll_no_bos": next_token_nll(lm.view, plain, following).mean(),
                       "nll_bos": next_token_nll(lm.view, with_bos, following).mean()}
    print(f"{name}: BOS token {lm.tokenizer.bos_token!r}; next-token NLL {bos_check[name]['nll_no_bos']:.3f} nats "
          f"without BOS, {bos_check[name]['nll_bos']:.3f} with it ({len(following)} pilots): BOS changes it by "
          f"{bos_check[name]['nll_bos'] - bos_check[name]['nll_no_bos']:+.3f} nats")

# %% [markdown]
# **What to notice.** A model that reads the text well predicts the next pseudo-sentence's first token with a
# low NLL. For Gemma the BOS token makes a large difference (its two numbers above): Gemma is trained with BOS at
# the start of every sequence, and without it the first word of a pseudo-sentence has to play the role BOS plays in
# its attention (the "attention sink"), so the whole pseudo-sentence is read oddly and the last layer predicts
# worse. Every Gemma number in this chapter is nonetheless measured, like the paper's, without BOS; set `bos=True`
# in chapters B1–B3 to see how much they move. SmolLM2's tokenizer names `<|im_start|>`, a chat-template token, as
# its BOS, so for SmolLM2 this check prepends a chat marker rather than a true start of text.
#
# ## All models side by side
#
# The noise law uses ln(mean variance) (chapter B4's first convention); α is in the units of each model's residual
# stream and is not comparable across models, λ is per layer and λL over the whole depth.

# %%
rows = {name: {"layers L": Xs[name].shape[1] - 1, "D": Xs[name].shape[2], "pilots N_s": Xs[name].shape[0],
               "σ1/σ2 at L": spectrum[name]["sigma1_over_sigma2"], "log-log slope at L": spectrum[name]["spectrum_slope"],
               "K below KL baseline": truncation[name]["k_below_baseline"],
               "K / D": truncation[name]["k_over_d_below_baseline"],
               "α": noise[name]["alpha"], "λ": noise[name]["lambda"], "λL": noise[name]["lambda_L"],
               "R² of the law": noise[name]["r2"], "arrival R²": noise[name]["arrival_r2"],
               "λ without last layer": noise[name]["lambda_without_last"],
               "last layer / law": noise[name]["last_layer_ratio"],
               "last layer / law, final norm": noise[name]["last_layer_ratio_final_norm"],
               "separability, min over t": separable[name][1:].min(),
               **({"next-token NLL, no BOS": bos_check[name]["nll_no_bos"],
                   "next-token NLL, BOS": bos_check[name]["nll_bos"]} if name in bos_check else {})}
        for name in models}
table = pd.DataFrame(rows)
table.map(lambda v: f"{v:.4g}" if isinstance(v, float) else v)

# %% [markdown]
# **What to notice.** Read the table row by row. The spectrum rows say how dominant the common direction u_1 is
# (σ1/σ2) and how fast the rest decays. The K rows inherit the leniency of their baseline (see above). λL is the
# total growth of the noise over the model's depth; the paper's GPT-2 medium has λL ≈ 0.18 × 24 ≈ 4.3. The two
# last-layer rows are the diagnostic: the first is the model's own last block, the second what a reader of
# `output_hidden_states` would see.
#
# **These models vs GPT-2.** Both models normalize with RMSNorm (no centering step) and tie their unembedding to
# the embedding, like GPT-2 for the second; both use rotary positions instead of GPT-2's learned position
# embeddings, and grouped-query attention (SmolLM2: 9 query heads share 3 key-value heads; Gemma 3 270M: 4 query
# heads share one). Gemma 3 also scales its embedding by √D, normalizes the *output* of every attention and MLP
# sublayer before adding it to the residual stream (an extra norm per sublayer that GPT-2 and SmolLM2 do not have),
# alternates sliding-window and global attention (the window of 512 tokens is longer than our pseudo-sentences, so
# it makes no difference here), and has a 262k-token vocabulary. α is in each model's own units: Gemma's residual
# stream is orders of magnitude larger.
#
# ## Does the claim hold on these models?

# %%
print("Paper: the last layer breaks the noise law in other models (appendix); lambda ~ 0.18 (GPT-2 medium, 24 layers, "
      "lambda L ~ 4.3), ~ 0.27 (Llama 2 7B); K0/D ~ 0.25 (GPT-2 medium); language and gibberish separable at every layer.")
verdict = {True: "breaks the law", False: "no further off than other layers"}
for name in models:
    n = noise[name]
    print(f"{name}: last layer / law = {n['last_layer_ratio']:.2f} ({verdict[n['last_layer_breaks_law']]}) as the block "
          f"leaves it, {n['last_layer_ratio_final_norm']:.3g} ({verdict[n['last_layer_breaks_law_final_norm']]}) after the "
          f"final norm (other late layers: within a factor {np.exp(n['late_arrival_max_abs_log_ratio']):.2f}); "
          f"lambda = {n['lambda']:.3f}, lambda L = "
          f"{n['lambda_L']:.2f}; K/D = {truncation[name]['k_over_d_below_baseline'] or float('nan'):.3f}; "
          f"separability min {separable[name][1:].min():.3f}")

# %%
slug = {name: re.sub(r"[^0-9a-z]+", "_", name.lower().split("/")[-1]).strip("_") for name in models}
record({
    "models": models, "n_k": n_k, "n_kl": n_kl, "n_s_gibberish": n_s_gibberish, "classifier": classifier,
    **{f"{slug[name]}_{key}": value for name in models for key, value in {
        "n_layers": Xs[name].shape[1] - 1, "d_model": Xs[name].shape[2], "n_s": Xs[name].shape[0],
        **spectrum[name],
        **{key: truncation[name][key] for key in ("kl_baseline", "k_below_baseline", "k_over_d_below_baseline")},
        **{key: value for key, value in noise[name].items() if not key.startswith(("log_var", "fit"))},
        "separability_min": separable[name][1:].min(), "separability_by_layer": separable[name],
        **bos_check.get(name, {}),
    }.items()},
})
