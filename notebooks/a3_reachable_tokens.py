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

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
k: int = 5  # tokens listed at each end of each ranking

# %%
import matplotlib.pyplot as plt
import pandas as pd

import lotlib
from lotlib.traveling_words import reachability
from lotlib.book.summary import record

lm = lotlib.load_model(model, device=device, dtype=dtype)
view = lm.view
norm = view.final_norm

scores = reachability.reachability_scores(view)
beta_gap = float(max((scores["||e|| + beta.e"] - scores["||e||"]).abs().max(),
                     (scores["||gamma*e|| + beta.e"] - scores["||gamma*e||"]).abs().max()))
print(f"{lm!r}; vocabulary V = {len(scores)}, tied embeddings: {view.tied}")
print(f"final norm: {norm.kind}Norm, β {'= 0 (none)' if norm.beta is None else 'present'}; "
      f"largest |β score − β-free score| = {beta_gap:.1e}; "
      f"unembedding bias: {'none' if view.b_U is None else 'yes'}")

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
# measured by the rank correlations below (close to 1: γ mostly rescales every token alike). On an
# RMSNorm model the β columns repeat the β-free ones. The bottom of the lists holds tokens whose
# (stretched) embedding is short, which says nothing yet about whether the model can predict them:
# that is the next check.
#
# ## How the scores relate

# %%
rho = scores.corr(method="spearman")
fig, ax = plt.subplots(figsize=(5.5, 4.5))
hb = ax.hexbin(scores["||e||"], scores["||gamma*e||"], gridsize=60, bins="log", cmap="viridis")
fig.colorbar(hb, ax=ax, label="tokens (log)")
ax.set(xlabel="||e||", ylabel="||γ ⊙ e||", title=f"{model}: every token, Spearman ρ = {rho.iloc[0, 1]:.3f}")
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
listed = {"top": best.nlargest(k).index, "bottom": best.nsmallest(k).index}
rows = []
for end, token_ids in listed.items():
    ranks, logits = reachability.rank_at_best_state(view, token_ids)
    rows += [{"end": end, "token": repr(lm.tokenizer.decode([int(i)])), "max logit": best[i], "logit at x̂*": lg,
              "rank at x̂*": int(r)} for i, r, lg in zip(token_ids, ranks, logits)]
check = pd.DataFrame(rows)
logit_gap = float((check["max logit"] - check["logit at x̂*"]).abs().max())
predicted_bottom = int((check.loc[check["end"] == "bottom", "rank at x̂*"] == 0).sum())
print(f"largest |max logit − logit at x̂*| = {logit_gap:.1e} (float32, eps); of the {k} least reachable tokens, "
      f"{predicted_bottom} are the top prediction at their best state")
check.style.format({"max logit": "{:.2f}", "logit at x̂*": "{:.2f}"})

# %% [markdown]
# **What to notice.** The `max logit` score is exactly what the model computes at x̂* (the gap is
# float32 rounding and eps). The most reachable tokens win at their best state. The least reachable
# tokens get a much smaller maximum logit, and at their best state they must beat every other token
# with that small logit: the table shows which of them still do (rank 0) and which lose to a
# neighbour. "Least reachable" means "reachable only with a small logit", not "unreachable": rank 0
# proves a token reachable, while a token that loses at x̂* may still win elsewhere, since x̂*
# maximizes its logit, not its margin over the others.
#
# ## Does the claim hold on this model?
#
# The paper's claim is qualitative: the final norm's γ (and β) and the embedding norms decide which
# tokens can be reached. Measured here: how strongly γ reorders the tokens (ρ between ||e|| and
# ||γ ⊙ e||), whether β matters (not on an RMSNorm model), and whether the least reachable tokens can
# still be predicted.

# %%
rho_gamma = float(rho.loc["||e||", "||gamma*e||"])
print(f"γ's reordering: Spearman ρ(||e||, ||γ ⊙ e||) = {rho_gamma:.4f}; β: "
      f"{'none (RMSNorm), the β scores coincide' if norm.beta is None else 'present'}; "
      f"top token by ||γ ⊙ e||: {tables['top']['||gamma*e||'].iloc[0]}, "
      f"bottom: {tables['bottom']['||gamma*e||'].iloc[0]}")

# %%
record({
    "vocab_size": len(scores), "final_norm": norm.kind, "has_beta": norm.beta is not None, "tied": view.tied,
    "beta_score_gap": beta_gap, "spearman_norm_vs_gamma_norm": rho_gamma,
    **{f"top_{name}": tables["top"][name].tolist() for name in scores},
    **{f"bottom_{name}": tables["bottom"][name].tolist() for name in scores},
    "max_logit_top": float(best.max()), "max_logit_bottom": float(best.min()),
    "max_logit_vs_model_gap": logit_gap, "bottom_tokens_top1_at_best_state": predicted_bottom,
})
