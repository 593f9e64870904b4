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
# **What you will see.** The summary numbers of Part II, measured the same way on the book's model and, beside
# it, on other models: how fast the last layer's singular values decay, how much of the next-token
# distribution survives a truncation to D/4 singular directions, the growth of the residual noise over the
# model's depth, whether language and gibberish stay linearly separable, and whether the last layer breaks the
# noise law. The claims are judged on the book's model (`model`); the other models (`others`) are shown, not
# judged (the report's atlas page sets whole books side by side).
#
# **The paper's claims** (Sarfati et al., ICLR 2025, appendix on Llama 2 7B, Mistral 7B, Llama 3.2 1B and 3B):
# the picture of GPT-2 medium carries over to other models, with two exceptions: the early layers deviate
# from the noise law, and the **last layer** breaks it (its residual variance is off the exponential trend of
# the others). Llama 2 7B has λ ≈ 0.27 where GPT-2 medium has λ ≈ 0.18. **Why it matters:** the reviewers
# asked for the last-layer anomaly as a diagnostic across models, and a diagnostic has to be a number that a
# model without the anomaly would fail. It also has to measure the model, not the way its states were read: in
# Hugging Face models the last entry of `output_hidden_states` is taken *after* the final norm, while every
# other entry is a raw block output, so a trajectory read that way ends on a different scale from the rest.
#
# **How it is computed.** Every model runs on Walden cut into pseudo-sentences of N_k tokens (no BOS, as in
# the paper), the pilot is the last token, x(t) is block t's output, all with the conventions of chapters B2
# and B4:
#
# - **Spectrum decay**: σ_1/σ_2 and the least-squares slope of ln σ_i against ln i for i = 10..k/2 at the last
#   layer (uncentered SVD of all pilots; k = min(N_s, D)), as in chapter B2.
# - **Truncation**: the last-layer protocol of chapter B2 (x(L) projected on the top-K singular directions of
#   U(L), then final norm and unembedding) on the first `n_kl` pilots: the mean KL(p_K ‖ p) at K = 1 and
#   K = D/4, their ratio (the authors' criterion: about 5 nats falling by about 90%), and how many of the
#   `top` most likely next tokens p_{D/4} shares with p.
# - **Noise law**: Eq. 1 residuals for every pair 1 ≤ t < t + τ ≤ L, bases aligned from layer 0, coordinates in
#   the aligned arrival basis, and the fit ln(mean variance) = ln α + λ(t + τ) over all pairs (chapter B4's
#   first convention). Across models only dimensionless numbers are compared: **λL**, the total growth of the
#   noise over the model's depth (λ per layer is not comparable between 18 and 30 layers), and **α relative to
#   the arrival spread**, the residual variance as a share of the variance of the states it should predict
#   (geometric mean over pairs; α itself is in the units of each model's residual stream).
# - **The last layer, left out.** A law fitted on all layers and tested on the last one compares a layer the
#   fit must extrapolate to with layers the fit has seen; any cut-off layer looks anomalous that way (an earlier
#   version of this chapter did so, and an untrained Gemma 3, whose states grow ever more slowly with depth,
#   "broke the law" at its last layer while the trained one did not: the extrapolated line overshoots the
#   flattening curve, and the in-sample layers sit on it by construction). So every
#   arrival layer s is treated alike: the law is refitted without the pairs that touch s, and r(s) is how far
#   the mean ln variance of the pairs arriving at s lies from that refit (in ln units, 0 = on the law). The
#   last layer "breaks the law" when |r(L)| exceeds |r(s)| for every other layer from L/2 to L−1 (the paper's
#   early layers deviate; they are left out of the comparison): the **excess** |r(L)| − max |r(s)| > 0. It is
#   computed three ways: on B4's ln(mean variance); on the residual variance relative to the arrival layer's
#   spread (the growth of the states divided out); and with the final norm applied to x(L), as
#   `output_hidden_states` reports it.
# - **Nulls.** The report runs this chapter on the untrained model of the same architecture. The chapter adds a
#   **structureless cloud**: Gaussian points with the same mean and per-coordinate variance as the model's
#   states at every layer, independent across layers: the same norm growth and nothing else.
# - **Separability**: chapter "Null tests" with one classifier split: Walden vs uniformly random tokens at
#   N_k = `n_k_gibberish`, a seeded perceptron on a 70/30 split at every layer; the minimum over t = 1..L.
#
# **How sure we are.** The claims' numbers carry 95% intervals from a bootstrap over pilots (`n_boot`
# resamples, the singular bases computed once on all pilots and not resampled; normal intervals from the
# bootstrap standard error, because the excess, a difference of absolute values and a maximum, is shifted on
# resamples while its spread is not).

# %% tags=["parameters"]
model: str = "smollm2-135m"  # the book's model, whose claims are judged: embedded name, local folder or hub id
others: "list[str] | None" = None  # models shown beside it (None: the embedded models other than `model`; none for an untrained model, a null whose own claims alone are read)
device: str = (
    "auto"  # where the models run: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the models' weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = (
    None  # cap on pseudo-sentences (None: all of Walden; "D": the width of each model)
)
n_kl: int = 300  # pilots for the truncated KL (the first n_kl)
ks: "list[int] | None" = None  # K grid of the KL curve (None: powers of two below D); K = 1, D/4 and D are added
top: int = (
    5  # next tokens compared between truncated and full distributions (the authors: 5)
)
n_k_gibberish: "Tokens" = 10  # tokens per pseudo-sentence in the separability test
n_s_gibberish: "Pilots | None" = (
    2000  # pseudo-sentences per class in the separability test
)
classifier: "Literal['perceptron', 'logistic']" = (
    "perceptron"  # "perceptron" (the paper's) or "logistic"
)
train_fraction: float = 0.7  # share of the pilots the classifier is trained on
n_bos: int = 200  # pseudo-sentences for the BOS check (0 skips it)
seed: int = 0  # gibberish tokens, the classifier's split, the structureless cloud, the bootstrap
n_boot: int = 1000  # bootstrap resamples of pilots

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes, format_value
from lotlib.book.summary import record
from lotlib.intervals import Estimate
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.null_tests import (
    last_layer_excess,
    last_layer_normalized,
    layer_separability,
    loo_log_ratios,
    next_token_nll,
    pilot_residuals,
    resampled_estimate,
    resampling_weights,
    structureless_cloud,
)
from lotlib.lines_of_thought.residuals import fit_laws, fit_variance, pair_mask
from lotlib.lines_of_thought.truncation import truncation_scores
from lotlib.models.bounds import pilot_count

plots.apply_theme()
default_others = (
    [] if model.startswith("untrained:") else [m for m in lotlib.EMBEDDED if m != model]
)
names = [
    model,
    *(default_others if others is None else [m for m in others if m != model]),
]
print(f"the book's model: {model}; shown beside it: {', '.join(names[1:]) or 'none'}")


def noise_law(X: np.ndarray, U: np.ndarray, S: np.ndarray, weights: np.ndarray) -> dict:
    """The noise law of trajectories X on every bootstrap row of `weights`: ln variances, leave-one-out ratios."""
    residuals = pilot_residuals(X, U, S, progress=False)
    log_var, log_rel = (
        residuals.log_mean_var(weights),
        residuals.log_relative_var(weights),
    )  # (1 + n_boot, T, T)
    all_pairs = pair_mask(X.shape[1], 1, X.shape[1] - 1)
    return {
        "log_var": log_var[0],
        "log_rel": log_rel[0],
        "loo": loo_log_ratios(log_var),
        "loo_relative": loo_log_ratios(log_rel),
        "lambda": fit_laws(log_var, all_pairs)["lambda"],
        "log_alpha_relative": np.nanmean(log_rel, axis=(1, 2)),
    }


# %% [markdown]
# ## Every model, measured the same way
#
# One pass per model: trajectories, singular bases, truncation, the noise law with its bootstrap, the last layer
# with the final norm, separability and the BOS check. The structureless cloud is drawn for the book's model only
# (it is the null of its claims). The logits of a 262k-token vocabulary (Gemma 3) take a gigabyte for a thousand
# states, so the truncation runs in batches sized to the vocabulary (about 16 million logits at a time).

# %%
measured, laws, curves, spectra, separable = {}, {}, {}, {}, {}
for name in names:
    lm = lotlib.load_model(name, device=device, dtype=dtype)
    view = lm.view
    L, D = view.n_layers, view.d_model
    corpus = lotlib.walden(
        lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, D, "n_s", model=name)
    )
    X = lotlib.trajectories(lm, corpus)  # (N_s, L+1, D)
    N = len(X)
    U, S = ensemble_svd(X)  # U (L+1, D, k), S (L+1, k), sorted by decreasing sigma
    k = S.shape[1]
    weights = resampling_weights(N, n_boot, seed)
    row = {"n_layers": L, "d_model": D, "n_s": N, "vocabulary": view.vocab_size}

    index = np.arange(1, k + 1)
    fitted = (index >= 10) & (index <= k // 2)
    spectra[name] = S[L] / S[L, 0]
    row["sigma1_over_sigma2"] = S[L, 0] / S[L, 1]
    row["spectrum_slope"] = (
        np.polyfit(np.log(index[fitted]), np.log(S[L, fitted]), 1)[0]
        if fitted.sum() >= 2
        else None
    )

    grid = sorted(
        {K for K in (ks or [2**j for j in range(int(np.log2(D)) + 1)]) if K <= k}
        | {1, D // 4, min(D, k)}
    )
    scores = truncation_scores(
        view,
        X[:n_kl, L],
        U[L],
        grid,
        top=top,
        batch_size=max(1, 2**24 // view.vocab_size),
        progress=False,
    )
    n_kl_used = scores.kl.shape[1]
    kl_weights = resampling_weights(n_kl_used, n_boot, seed)
    kl_1, kl_quarter = (
        kl_weights @ scores.kl[grid.index(K)] / n_kl_used for K in (1, D // 4)
    )
    quarter_usable = (
        D // 4 < k
    )  # with fewer pilots than D/4 the basis spans every state: nothing is truncated
    row |= {
        "kl_at_1": resampled_estimate(kl_1, n_kl_used, unit="pilots"),
        "kl_at_quarter": resampled_estimate(kl_quarter, n_kl_used, unit="pilots")
        if quarter_usable
        else None,
        "kl_ratio_quarter": resampled_estimate(
            kl_quarter / kl_1, n_kl_used, unit="pilots"
        )
        if quarter_usable
        else None,
        f"top{top}_overlap_quarter": float(scores.overlap[grid.index(D // 4)].mean())
        if quarter_usable
        else None,
    }
    curves[name] = pd.DataFrame(
        {
            "K / D": np.array(grid) / D,
            "mean KL (nats)": scores.kl.mean(1),
            "model": name,
        }
    )

    law = noise_law(X, U, S, weights)
    normalized = noise_law(*last_layer_normalized(view, X, U, S), weights)
    compared = L // 2
    row |= {
        "lambda": resampled_estimate(law["lambda"], N, unit="pilots"),
        "lambda_L": resampled_estimate(law["lambda"] * L, N, unit="pilots"),
        "alpha_relative": resampled_estimate(
            np.exp(law["log_alpha_relative"]), N, unit="pilots"
        ),
        "arrival_r2": fit_variance(law["log_var"], pair_mask(L + 1, 1, L))[
            "arrival_r2"
        ],
        "last_layer_log_ratio": resampled_estimate(law["loo"][:, L], N, unit="pilots"),
        "last_layer_excess": resampled_estimate(
            last_layer_excess(law["loo"], compared), N, unit="pilots"
        ),
        "last_layer_excess_relative": resampled_estimate(
            last_layer_excess(law["loo_relative"], compared), N, unit="pilots"
        ),
        "last_layer_excess_final_norm": resampled_estimate(
            last_layer_excess(normalized["loo"], compared), N, unit="pilots"
        ),
        "early_layers_mean_abs_log_ratio": float(
            np.nanmean(np.abs(law["loo"][0, : max(3, L // 4)]))
        ),
        "late_layers_mean_abs_log_ratio": float(
            np.nanmean(np.abs(law["loo"][0, compared:L]))
        ),
    }
    laws[name] = {"law": law, "normalized": normalized, "L": L}
    if name == model:
        cloud_X = structureless_cloud(X, seed)
        cloud = noise_law(cloud_X, *ensemble_svd(cloud_X), weights)
        laws[name]["cloud"] = cloud
        row |= {
            "lambda_L_cloud": resampled_estimate(cloud["lambda"] * L, N, unit="pilots"),
            "last_layer_excess_cloud": resampled_estimate(
                last_layer_excess(cloud["loo"], compared), N, unit="pilots"
            ),
            "last_layer_excess_relative_cloud": resampled_estimate(
                last_layer_excess(cloud["loo_relative"], compared), N, unit="pilots"
            ),
        }

    vocab = min(len(lm.tokenizer), view.vocab_size)
    language = lotlib.walden(
        lm.tokenizer,
        n_k=n_k_gibberish,
        n_s=pilot_count(n_s_gibberish, D, "n_s_gibberish"),
    )
    noise = lotlib.gibberish(
        vocab,
        n_s=language.n_s,
        n_k=n_k_gibberish,
        seed=seed,
        prefix=language.prefix_ids,
    )
    separable[name] = layer_separability(
        lotlib.trajectories(lm, language),
        lotlib.trajectories(lm, noise),
        train_fraction,
        seed,
        classifier,
        progress=False,
    )
    row["separability_min"] = separable[name][1:].min()

    if n_bos and lm.tokenizer.bos_token_id is not None:
        following = lotlib.walden(lm.tokenizer, n_k=n_k, n_s=n_bos + 1, bos=False).ids[
            1:, 0
        ]
        plain = lotlib.trajectories(
            lm,
            lotlib.walden(lm.tokenizer, n_k=n_k, n_s=n_bos, bos=False),
            progress=False,
        )[:, L]
        with_bos = lotlib.trajectories(
            lm,
            lotlib.walden(lm.tokenizer, n_k=n_k, n_s=n_bos, bos=True),
            progress=False,
        )[:, L]
        row |= {
            "bos_token": lm.tokenizer.bos_token,
            "nll_no_bos": next_token_nll(view, plain, following).mean(),
            "nll_bos": next_token_nll(view, with_bos, following).mean(),
        }
    measured[name] = row
    print(
        f"{lm!r}: vocabulary {view.vocab_size}, tied embeddings {view.tied}; trajectories {X.shape}"
    )
    del lm, view

# %% [markdown]
# ## The noise law and the last layer

# %%
fig, axes = plt.subplots(1, len(names), figsize=(6.2 * len(names), 4.3), squeeze=False)
for ax, name in zip(axes[0], names):
    law, L = laws[name]["law"], laws[name]["L"]
    t_idx, s_idx = np.nonzero(pair_mask(L + 1, 1, L))
    points = ax.scatter(
        s_idx, law["log_var"][t_idx, s_idx], c=t_idx, cmap="viridis", s=8
    )
    f = fit_variance(law["log_var"], pair_mask(L + 1, 1, L))
    grid = np.linspace(1, L, 50)
    ax.plot(
        grid,
        np.log(f["alpha"]) + f["lambda"] * grid,
        color="crimson",
        label=f"law on all pairs: λL = {f['lambda'] * L:.2f}",
    )
    ax.scatter(
        np.full(L - 1, L),
        laws[name]["normalized"]["log_var"][1:L, L],
        marker="x",
        color="crimson",
        s=25,
        label="arrival L, final norm applied",
    )
    ax.axvline(L, color="grey", ls="--", lw=1)
    ax.set(
        xlabel="arrival layer t + τ",
        ylabel="ln(mean variance)",
        title=f"{name}, L = {L}",
    )
    ax.legend(fontsize=8, loc="upper left")
    fig.colorbar(points, ax=ax, label="departure layer t")
fig.suptitle(
    "Residual variance of the linear extrapolation against the arrival layer; dashed: the last layer"
)
plt.tight_layout()
plt.show()

# %% [markdown]
# **What to notice.** The dots of the last column (dashed line) are the pairs arriving at the last layer, x(L) as
# the last block leaves it; the crosses are the same pairs with the final norm applied to x(L). The law is a
# straight line only roughly: the columns bend around it, which is why a last layer can only be called
# anomalous against how far the other layers are off the same law. The final norm divides every state by its
# root mean square, so after it x(L) has the norm's scale, not the scale the residual stream grew to; the
# crosses sit wherever that puts them, whatever the model does.
#
# Next, each arrival layer against a law fitted without it (leave-one-out), on relative depth s/L so that models
# of different depths share an axis. Left: B4's ln(mean variance). Middle: the same relative to the arrival
# layer's spread. Right: for the book's model, the structureless cloud with its norm growth. Bands: 95% bootstrap
# over pilots.

# %%
fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), sharey=False)
panels = [(axes[0], "loo", name, name) for name in names] + [
    (axes[1], "loo_relative", name, name) for name in names
]
panels += [
    (axes[2], key, model, label)
    for key, label in (("loo", "model"), ("loo_relative", "model, relative"))
]
for ax, key, name, label in panels:
    L = laws[name]["L"]
    depth = np.arange(2, L + 1) / L
    r = laws[name]["law"][key][:, 2:]
    half = 1.96 * np.nanstd(r[1:], axis=0)
    line = ax.plot(depth, r[0], marker="o", ms=3, label=label)[0]
    ax.fill_between(depth, r[0] - half, r[0] + half, alpha=0.2, color=line.get_color())
    ax.scatter([1.0], [r[0, -1]], s=80, facecolors="none", edgecolors=line.get_color())
for key, label in (("loo", "cloud"), ("loo_relative", "cloud, relative")):
    r, L = laws[model]["cloud"][key][:, 2:], laws[model]["L"]
    axes[2].plot(np.arange(2, L + 1) / L, r[0], ls="--", marker=".", label=label)
for ax, title in zip(
    axes,
    [
        "ln(mean variance)",
        "relative to the arrival spread",
        f"{model} vs a structureless cloud",
    ],
):
    ax.axhline(0, color="grey", lw=1)
    ax.axvline(0.5, color="grey", ls=":", lw=1)
    ax.set(
        xlabel="relative depth s / L",
        ylabel="r(s): off the leave-one-out law (ln units)",
        title=title,
    )
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
for name in names:
    m = measured[name]
    print(
        f"{name}: last layer off its leave-one-out law by r(L) = {m['last_layer_log_ratio']:.2f} (ln units); excess over "
        f"the layers {m['n_layers'] // 2}..{m['n_layers'] - 1}: {m['last_layer_excess']:.2f} on ln(mean variance), "
        f"{m['last_layer_excess_relative']:.2f} relative to the spread, {m['last_layer_excess_final_norm']:.2f} with "
        f"the final norm; mean |r| of the early layers {m['early_layers_mean_abs_log_ratio']:.2f}, of the late ones "
        f"{m['late_layers_mean_abs_log_ratio']:.2f}"
    )
m = measured[model]
print(
    f"structureless cloud shaped like {model}: excess {m['last_layer_excess_cloud']:.2f} on ln(mean variance), "
    f"{m['last_layer_excess_relative_cloud']:.2f} relative to the spread"
)

# %% [markdown]
# **What to notice.** A circle marks the last layer of each model. On ln(mean variance) (left) the layers wander
# around the law by several tenths of a nat, more in the early layers (left of the dotted line, the paper's
# "early layers deviate"), and the last layer's circle is anomalous only if it sits further out than every
# other point right of the dotted line. The right panel is the test of that test: the structureless cloud has
# the model's norm growth and nothing else, and on ln(mean variance) its curve follows the model's almost point
# for point, last layer included. Whatever the left panel shows at the last layer is then a property of how the
# spread of the states grows, not of how well the lines of thought are extrapolated: a last block that enlarges
# the states more than its predecessors "breaks the law" in a cloud as well. Relative to the arrival spread
# (middle), the cloud sits on 0 everywhere, and the model's last layer has to stand out on its own.
#
# ## The truncated next-token distribution, the spectrum and separability

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
sns.lineplot(
    pd.concat(
        [
            pd.DataFrame(
                {"i": np.arange(1, len(s) + 1), "σ_i(L) / σ_1(L)": s, "model": name}
            )
            for name, s in spectra.items()
        ]
    ),
    x="i",
    y="σ_i(L) / σ_1(L)",
    hue="model",
    ax=axes[0],
)
sns.lineplot(
    pd.concat(curves.values()),
    x="K / D",
    y="mean KL (nats)",
    hue="model",
    marker="o",
    ax=axes[1],
    legend=False,
)
sns.lineplot(
    pd.concat(
        [
            pd.DataFrame(
                {
                    "relative depth t / L": np.arange(len(a)) / (len(a) - 1),
                    "test accuracy": a,
                    "model": name,
                }
            )
            for name, a in separable.items()
        ]
    ),
    x="relative depth t / L",
    y="test accuracy",
    hue="model",
    marker="o",
    ax=axes[2],
    legend=False,
)
axes[0].set(xscale="log", yscale="log", title="Last layer's spectrum")
axes[1].set(xscale="log", title="Truncated next-token distribution (last layer)")
axes[1].axvline(0.25, color="grey", ls=":", lw=1)
axes[2].set(ylim=(0.4, 1.02), title=f"Walden vs gibberish, N_k = {n_k_gibberish}")
plt.tight_layout()
plt.show()

# %% [markdown]
# **What to notice.** Left: the decay of each model's last-layer spectrum, normalized by σ_1. Middle: the mean KL
# of the truncated distribution against K/D; the dotted line is D/4, the authors' K0 for GPT-2 medium, where they
# report a fall of about 90% from about 5 nats at K = 1. The curve reaches 0 where K equals the number of
# singular directions the pilots span (k = min(N_s, D)): with fewer pilots than D, the truncation at D/4 keeps a
# larger share of what there is, and the ratio at D/4 is not measured when k ≤ D/4. Right: the separability of
# language and gibberish at every relative depth (one classifier split; chapter "Null tests" has the interval
# over splits and the untrained control).
#
# ## With or without BOS
#
# Every model reads its pseudo-sentences as its tokenizer starts a text (`lotlib.walden(..., bos=None)`, the
# default): GPT-2 and SmolLM2 without a BOS token, as the paper's pseudo-sentences are; Gemma with one, because it
# was trained with a BOS at the start of every sequence and reads text badly without it. A direct check of what
# BOS changes: the negative log-likelihood of the true next token (the first token of the next pseudo-sentence)
# from x(L), on the first `n_bos` pseudo-sentences, with and without the tokenizer's BOS token (the table below).
#
# ## All models side by side
#
# Every number of this chapter for every model; a value with an interval is `value [lo, hi]` (95%, bootstrap over
# pilots). The rows marked (claim) are judged on the book's model in the closing paragraph.

# %%
labels = {
    "n_layers": "layers L",
    "d_model": "width D",
    "n_s": "pilots N_s",
    "vocabulary": "vocabulary",
    "sigma1_over_sigma2": "σ1/σ2 at L",
    "spectrum_slope": "log-log slope of σ_i at L",
    "kl_at_1": "mean KL at K = 1 (nats)",
    "kl_at_quarter": "mean KL at K = D/4 (nats)",
    "kl_ratio_quarter": "KL(D/4) / KL(1)",
    f"top{top}_overlap_quarter": f"top-{top} overlap at D/4",
    "lambda": "λ (per layer)",
    "lambda_L": "λL, total growth (claim)",
    "lambda_L_cloud": "λL, cloud (null)",
    "alpha_relative": "α relative to the arrival spread",
    "arrival_r2": "arrival R² of ln(mean variance)",
    "last_layer_log_ratio": "r(L), last layer off its law (ln)",
    "last_layer_excess": "last-layer excess (claim)",
    "last_layer_excess_relative": "last-layer excess, relative (claim)",
    "last_layer_excess_final_norm": "last-layer excess, final norm (claim)",
    "last_layer_excess_cloud": "last-layer excess, cloud (null)",
    "last_layer_excess_relative_cloud": "last-layer excess, relative, cloud (null)",
    "early_layers_mean_abs_log_ratio": "mean |r| of the early layers",
    "late_layers_mean_abs_log_ratio": "mean |r| of the late layers",
    "separability_min": "separability, min over t ≥ 1",
    "bos_token": "BOS token",
    "nll_no_bos": "next-token NLL without BOS",
    "nll_bos": "next-token NLL with BOS",
}
cell = lambda value: (
    format(value, ".3g") if isinstance(value, Estimate) else format_value(value)
)  # noqa: E731
table = pd.DataFrame(
    {
        name: {labels[key]: cell(value) for key, value in row.items()}
        for name, row in measured.items()
    }
)
table.reindex([label for label in labels.values() if label in table.index])

# %% [markdown]
# **What to notice.** Read the table row by row. The spectrum rows say how dominant the common direction u_1 is
# (σ1/σ2) and how fast the rest decays. The truncation rows give the authors' own criterion: the KL at K = 1
# (about 5 nats for GPT-2 medium), at K = D/4 (about 0.5) and their ratio (about 0.1), and the top-5 overlap (the
# authors: about 2.5 of 5 at D/4). λL is the total growth of the noise over the model's depth; the paper's
# models have λL ≈ 0.18 × 24 ≈ 4.3 (GPT-2 medium) and 0.27 × 32 ≈ 8.6 (Llama 2 7B). α relative to the arrival
# spread says how large the extrapolation's residual is compared with the states it predicts (1 = as large as
# the spread itself). The last-layer rows are the diagnostic; the early and late |r| rows say how well the law
# holds elsewhere. A model with a BOS token the tokenizer names (SmolLM2's `<|im_start|>` is a chat marker, not
# a start of text) gets the NLL check: for Gemma, trained with BOS at the start of every sequence, leaving it out
# makes the first word of a pseudo-sentence play the role BOS plays in its attention (the "attention sink"), and
# the last layer predicts worse; every number here is nonetheless measured, like the paper's, without BOS.
#
# **These models vs GPT-2.** Gemma 3 and SmolLM2 normalize with RMSNorm (no centering step) and tie their
# unembedding to the embedding, like GPT-2 for the second; both use rotary positions instead of GPT-2's learned
# position embeddings, and grouped-query attention. Gemma 3 also scales its embedding by √D, normalizes the
# *output* of every attention and MLP sublayer before adding it to the residual stream, alternates
# sliding-window and global attention (the window of 512 tokens is longer than our pseudo-sentences, so it makes
# no difference here), and has a 262k-token vocabulary.
#
# ## Does the claim hold on this model?
#
# The claims of `book/claims/c5_other_models.yml`, judged on the book's model only, each with our value, its 95%
# interval and whether the whole interval passes, fails or straddles the test.

# %%
values = {
    **measured[model],
    "model": model,
    "others": {name: measured[name] for name in names[1:]},
    "n_k": n_k,
    "n_kl": n_kl,
    "n_boot": n_boot,
    "n_s_gibberish": n_s_gibberish,
    "classifier": classifier,
}
record(values)
outcomes = chapter_outcomes("c5_other_models", values)
display(outcomes)
m = measured[model]
for key, quantity in (
    ("last_layer_excess", "ln(mean variance)"),
    ("last_layer_excess_relative", "the relative variance"),
):
    ours, cloud = m[key], m[f"{key}_cloud"]
    print(
        f"{model}, on {quantity}: the last layer's excess is {ours:.3f}; the structureless cloud with the same norm "
        f"growth gives {cloud:.3f}"
        + (
            ": the cloud breaks the law as well, so this test cannot tell lines of thought "
            "from norm growth"
            if cloud.lo > 0
            else ""
        )
    )

# %% [markdown]
# Read the table with the two figures of the noise law. The claim of the paper is judged twice. On B4's ln(mean
# variance) a last layer "breaks the law" whenever the last block enlarges the states more than its predecessors
# did, and the structureless cloud with the same norm growth shows whether that is all the test sees (printed
# above): where the cloud breaks the law as well, the finding is *not diagnostic* of anything about the lines of
# thought. Relative to the arrival layer's spread the growth of the spread is divided out, and only a last layer
# whose extrapolation is worse (or better) than its spread predicts stands out; not quite all of the growth,
# though: the extrapolation scales each direction by a ratio of *uncentered* singular values, which follow the
# growth of the ensemble's mean as well as of its spread, so a cloud whose mean jumps at the last layer can still
# put that layer slightly off the relative law. Where the cloud passes this test too (printed above), the model's
# excess has to be read as "no larger than norm growth alone can make it", not as an anomaly. The final-norm row is
# an identity of the reading, not of the model: after the final norm x(L) has the norm's scale, off any law fitted
# on the stream's growth unless the stream happened to end at that scale, so the paper's anomaly, if read from
# `output_hidden_states`, would be there whatever the model does. λL compares the total growth over the depth with
# the paper's models. It cannot tell lines of thought from a cloud: the structureless cloud with the same norm
# growth reaches most of the model's λL (the table), because the residual of a linear map grows as the states it
# predicts grow; what it does tell is how much the model's states grow, which the untrained model (the report's
# other null) does far less.
