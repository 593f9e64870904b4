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
# # A3 · Most and least reachable tokens
#
# **What you will see.** Every token of the vocabulary ranked by how large a logit the final norm
# lets it reach: the five most and the five least reachable tokens under each of the paper's four
# scores, and a check of what "reachable" means by putting the residual state where each listed
# token wants it and reading the model's actual prediction.
#
# **The paper's claim.** "Traveling Words" (Molina, 2023): after the final norm the state is
# γ ⊙ x̂ + β with x̂ on the sphere of radius √d, and the logit of token v is (γ ⊙ x̂ + β) · e_v with the
# tied embedding e_v. So the size of γ ⊙ e_v (how far the token sticks out of the stretched sphere) and
# the bias β · e_v decide which tokens can get large logits. The paper ranks tokens by ||e||,
# ||γ ⊙ e||, ||e|| + β · e and ||γ ⊙ e|| + β · e and lists the top and bottom five.
#
# **What differs on our model.** SmolLM2-135M's final norm is **RMSNorm: β = 0**, so the two β
# scores coincide with their β-free versions (checked below). Its embeddings are tied, so e is both
# the input embedding and the unembedding vector; for an untied model we use the unembedding vector
# (the column of W_U), which is what the logit reads.
#
# **Choices the paper leaves open.** The paper's scores add ||γ ⊙ e|| and β · e with weight one.
# The largest logit the norm allows is in fact sqrt(d) ||P(γ ⊙ e)|| + β · e (+ the unembedding bias),
# reached at x̂ = √d P(γ ⊙ e) / ||P(γ ⊙ e)||, where P removes the all-ones component for LayerNorm
# (x̂ must lie on the hyperplane) and is the identity for RMSNorm. We add it as a fifth score,
# `max logit`. On an RMSNorm model it ranks tokens exactly as ||γ ⊙ e||. Special tokens are not
# excluded; token strings are shown with `repr`, so leading spaces are visible.
#
# **What is measured, and how sure we are.** The scores and the lists are exact (every token, nothing
# sampled). That the largest logit is reached at the predicted state is an *identity* (it checks our
# formula against the model's own readout, for any weights). The paper's reading, that a low score
# makes a token hard to predict, is a *finding* we test: for `n_tokens` tokens drawn at random
# (seeded) from the least and from the most reachable tenth of the vocabulary we ask whether each can
# be the model's top prediction at its own best state, and compare the two shares, with a 95% bootstrap
# interval over the drawn tokens. An untrained model of the same architecture is its null.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
k: int = 5  # tokens listed at each end of each ranking
n_tokens: int = 300  # tokens drawn at random from each tenth (least and most reachable) for the win test
tail: float = 0.1  # share of the vocabulary at each end of the max-logit ranking that the tokens are drawn from
seed: int = 0  # which tokens are drawn, and the bootstrap's resamples
n_boot: int = 2000  # bootstrap resamples of the drawn tokens

# %%

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes
from lotlib.book.summary import not_applicable, record
from lotlib.intervals import bootstrap, exact, proportion
from lotlib.traveling_words import reachability

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
norm = view.final_norm

scores = reachability.reachability_scores(view)
beta_gap = float(
    max(
        (scores["||e|| + beta.e"] - scores["||e||"]).abs().max(),
        (scores["||gamma*e|| + beta.e"] - scores["||gamma*e||"]).abs().max(),
    )
)
print(f"{lm!r}; vocabulary V = {len(scores)}, tied embeddings: {view.tied}")
print(
    f"final norm: {norm.kind}Norm, β {'= 0 (none)' if norm.beta is None else 'present'}; "
    f"largest |β score − β-free score| = {beta_gap:.1e}; "
    f"unembedding bias: {'none' if view.b_U is None else 'yes'}"
)

# %% [markdown]
# ## The most reachable tokens

# %%
tables = reachability.extreme_tokens(scores, lm.tokenizer, k)
tables["top"]

# %% [markdown]
# ## The least reachable tokens

# %%
tables["bottom"]

# %% [markdown]
# **What to notice.** Compare the columns: how much γ reorders the tokens against ||e|| alone is
# measured by the rank correlations below (close to 1 when γ mostly rescales every token alike, as on
# SmolLM2; near 0 on Gemma 3 270M, whose γ reorders the vocabulary). On an RMSNorm model the β columns
# repeat the β-free ones. The bottom of the lists holds tokens whose (stretched) embedding is short,
# which says nothing yet about whether the model can predict them: that is the next check.
#
# ## How the scores relate

# %%
rho = scores.corr(method="spearman")
fig, ax = plt.subplots(figsize=(5.5, 4.5))
hb = ax.hexbin(
    scores["||e||"], scores["||gamma*e||"], gridsize=60, bins="log", cmap="viridis"
)
fig.colorbar(hb, ax=ax, label="tokens (log)")
ax.set(
    xlabel="||e||",
    ylabel="||γ ⊙ e||",
    title=f"{model}: every token, Spearman ρ = {rho.iloc[0, 1]:.3f}",
)
plt.show()
rho.style.format("{:.3f}")

# %% [markdown]
# ## Can a listed token actually be predicted?
#
# A low score caps a token's logit, but the prediction is the *largest* logit. For each listed token we
# put the residual state at its best point x̂* (the sphere point that maximizes its logit), pass it
# through the model's final norm and unembedding, and report the token's rank among all logits
# (0 = the model's top prediction) and its logit, which must equal the `max logit` score.

# %%
best = scores["max logit"]
defined = best[
    reachability.has_best_state(view)
]  # an all-zero row has no best state (same logit everywhere)
listed = {"top": defined.nlargest(k).index, "bottom": defined.nsmallest(k).index}
rows = []
for end, token_ids in listed.items():
    ranks, logits = reachability.rank_at_best_state(view, token_ids)
    rows += [
        {
            "end": end,
            "token": repr(lm.tokenizer.decode([int(i)])),
            "max logit": best[i],
            "logit at x̂*": lg,
            "rank at x̂*": int(r),
        }
        for i, r, lg in zip(token_ids, ranks, logits)
    ]
check = pd.DataFrame(rows)
logit_gap = float((check["max logit"] - check["logit at x̂*"]).abs().max())
predicted_bottom = int((check.loc[check["end"] == "bottom", "rank at x̂*"] == 0).sum())
print(
    f"largest |max logit − logit at x̂*| = {logit_gap:.1e} (float32, eps); of the {k} least reachable tokens, "
    f"{predicted_bottom} are the top prediction at their best state"
)
check.style.format({"max logit": "{:.2f}", "logit at x̂*": "{:.2f}"})

# %% [markdown]
# **What to notice.** The `max logit` score is exactly what the model computes at x̂* (the gap is
# float32 rounding and eps). The few most reachable tokens get the largest logits of the whole
# vocabulary at their best state, and most of them win there (the printed ranks). The least reachable
# tokens get a much smaller maximum logit, and at their best state they must beat every other token
# with that small logit: the table shows which of them still do (rank 0) and which lose to a
# neighbour. "Least reachable" means "reachable only with a small logit", not "unreachable": rank 0
# proves a token reachable, while a token that loses at x̂* may still win elsewhere, since x̂*
# maximizes its logit, not its margin over the others.
#
# ## Do the scores say which tokens can be predicted?
#
# Five tokens at each end prove little. We draw `n_tokens` tokens at random from the least reachable
# tenth and from the most reachable tenth of the vocabulary (by `max logit`) and put each at its best
# state, as above. If a low score made a token hard to predict, the most reachable tenth would win
# (rank 0) more often than the least reachable tenth.

# %%
drawn = reachability.win_shares(view, best, n_tokens, share=tail, seed=seed)
ends = {end: drawn[drawn["end"] == end] for end in ("bottom", "top")}
shares = {
    end: proportion(int(t["wins"].sum()), len(t), unit="tokens")
    for end, t in ends.items()
}
is_top = (drawn["end"] == "top").to_numpy()
wins = drawn["wins"].to_numpy()


def top_minus_bottom(rows: np.ndarray) -> float:
    """Win share of the most reachable tokens minus that of the least reachable, over the drawn `rows`."""
    top, bottom = wins[rows][is_top[rows]], wins[rows][~is_top[rows]]
    return top.mean() - bottom.mean() if len(top) and len(bottom) else np.nan


advantage = bootstrap(
    top_minus_bottom, len(drawn), unit="tokens", n_boot=n_boot, seed=seed
)
fig, ax = plt.subplots(figsize=(7, 3.5))
sns.ecdfplot(
    drawn.assign(**{"rank + 1": drawn["rank"] + 1}),
    x="rank + 1",
    hue="end",
    log_scale=True,
    ax=ax,
)
ax.set(
    title=f"{model}: rank of a token at its own best state ({n_tokens} tokens per tenth)",
    ylabel="share of drawn tokens",
)
plt.show()
print(
    f"wins at its best state: least reachable tenth {shares['bottom']:.3g}, most reachable tenth "
    f"{shares['top']:.3g} (Wilson 95% intervals); difference top − bottom {advantage:.3g} "
    f"(bootstrap over the {len(drawn)} drawn tokens); median rank {ends['bottom']['rank'].median():.0f} vs "
    f"{ends['top']['rank'].median():.0f}"
)

# %% [markdown]
# **What to notice.** Each curve starts at the share of its tokens that win (rank 0). Read the difference
# of the two shares with its interval: a positive difference would support the paper's reading (a low
# score makes a token hard to predict). On SmolLM2 it is the other way round: the most reachable tokens,
# whose long vectors share the embedding's large common direction, mostly lose at their own best state
# to tokens that share it even more, while a quarter of the least reachable tokens, short vectors with
# idiosyncratic directions, win at theirs. The rest of the curves tells the other half: every most
# reachable token gets within a few hundred places of the top (its median rank is printed), while half
# of the least reachable ones stay hundreds or thousands of places below. The scores measure how large a
# token's logit can get and roughly how high it can climb, not whether it can beat every other token.
# The reading is a property of the model, not of the architecture: on Gemma 3 270M
# (`-p model gemma3-270m`) the most reachable tokens do win at their best state and the least reachable
# ones mostly do not, as the paper's reading predicts. On an untrained model every token wins at its
# best state (random rows are nearly orthogonal), so the difference is zero.
#
# ## Does the claim hold on this model?
#
# The paper's lists are qualitative: the final norm's γ (and β) and the embedding norms decide which
# tokens can get large logits. That the largest logit is what the model computes at the best state is
# an identity. How strongly γ reorders the tokens (ρ between ||e|| and ||γ ⊙ e||) and whether β matters
# (not on an RMSNorm model) are shown without a verdict. The one tested finding is the difference of
# win shares above.

# %%
rho_gamma = float(rho.loc["||e||", "||gamma*e||"])
values = {
    "vocab_size": len(scores),
    "final_norm": norm.kind,
    "has_beta": norm.beta is not None,
    "tied": view.tied,
    "beta_score_gap": not_applicable("the final norm has no β (RMSNorm)")
    if norm.beta is None
    else beta_gap,
    "spearman_norm_vs_gamma_norm": exact(rho_gamma, n=len(scores), unit="tokens"),
    **{f"top_{name}": tables["top"][name].tolist() for name in scores},
    **{f"bottom_{name}": tables["bottom"][name].tolist() for name in scores},
    "max_logit_top": float(best.max()),
    "max_logit_bottom": float(best.min()),
    "tokens_without_best_state": int(len(best) - len(defined)),
    "max_logit_vs_model_gap": exact(logit_gap, n=len(check), unit="tokens"),
    "bottom_tokens_top1_at_best_state": predicted_bottom,
    "win_share_least_reachable": shares["bottom"],
    "win_share_most_reachable": shares["top"],
    "win_share_top_minus_bottom": advantage,
}
record(values)
outcomes = chapter_outcomes("a3_reachable_tokens", values)
judged = outcomes.set_index("claim")["outcome"]
print(
    f"γ's reordering: Spearman ρ(||e||, ||γ ⊙ e||) = {rho_gamma:.4f}; β: "
    f"{'none (RMSNorm), the β scores coincide' if norm.beta is None else f'largest shift {beta_gap:.3g}'}. "
    f"Max logit = the model's logit at the best state to {logit_gap:.1e} ({judged['A3-logits']}). "
    f"Most minus least reachable win share {advantage:.3g}: {judged['A3-predictable']} the test."
)
outcomes
