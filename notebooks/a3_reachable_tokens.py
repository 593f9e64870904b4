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
#   needs: [readout]
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
# :::{dropdown} How it is computed
# **What may differ on our model.** An **RMSNorm** final norm has **no β**: the two β scores then
# coincide with their β-free versions (checked below). This run's final norm is
# {glue:text}`norm_name`. With tied embeddings e is both the input embedding and the unembedding
# vector; for an untied model we use the unembedding vector (the column of W_U), which is what the
# logit reads. This run's embeddings are {glue:text}`tied_word`.
#
# **Choices the paper leaves open.** The paper's scores add ||γ ⊙ e|| and β · e with weight one.
# The largest logit the norm allows is in fact sqrt(d) ||P(γ ⊙ e)|| + β · e (+ the unembedding bias),
# reached at x̂ = √d P(γ ⊙ e) / ||P(γ ⊙ e)||, where P removes the all-ones component for LayerNorm
# (x̂ must lie on the hyperplane) and is the identity for RMSNorm. We add it as a fifth score,
# `max logit`. On an RMSNorm model it ranks tokens exactly as ||γ ⊙ e||. Special tokens are not
# excluded; token strings are shown with `repr`, so leading spaces are visible.
#
# **Code:** `lotlib.chapters.a3_reachable_tokens.reachability_study`; `lotlib.traveling_words.reachability`.
# :::
#
# :::{dropdown} What is measured, and how sure we are
# The scores and the lists are exact (every token, nothing
# sampled). That the largest logit is reached at the predicted state is an *identity* (it checks our
# formula against the model's own readout, for any weights). The paper's reading, that a low score
# makes a token hard to predict, is a *finding* we test: for `n_tokens` tokens drawn at random
# (seeded) from the least and from the most reachable tenth of the vocabulary we ask whether each can
# be the model's top prediction at its own best state, and compare the two shares, with a 95% bootstrap
# interval over the drawn tokens. An untrained model of the same architecture is its null.
# :::

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
k: int = 5  # tokens listed at each end of each ranking
n_tokens: int = 300  # tokens from the least and the most reachable tenth (win test)
tail: float = 0.1  # share of the vocabulary at each end of the max-logit ranking
seed: int = 0  # which tokens are drawn, and the bootstrap's resamples
n_boot: "Count" = 2000  # bootstrap resamples of the drawn tokens

# %% tags=["hide-input"]
import lotlib
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters import a3_reachable_tokens as a3
from lotlib.summary import glue, not_applicable
from lotlib.verdicts import conclude

plots.apply_theme()
lm = lotlib.load_model(model, device=device, dtype=dtype)

# %% [markdown]
# ## The most reachable tokens
#
# One call computes the scores of every token, the lists, the check at the best state and the win
# test below. The vocabulary has {glue:text}`vocab_size` tokens; the embeddings are
# {glue:text}`tied_word`. The final norm is {glue:text}`norm_name` ({glue:text}`beta_word`): the
# largest difference between a β score and its β-free version is {glue:text}`beta_gap:.1e`. The
# model {glue:text}`unembedding_bias_word` unembedding bias.

# %%
study = a3.reachability_study(
    lm.view, lm.tokenizer, k, n_tokens, tail, seed, n_boot
)
study.extremes["top"]

# %% [markdown]
# ## The least reachable tokens

# %%
study.extremes["bottom"]

# %% [markdown]
# **What to notice.** Compare the columns: how much γ reorders the tokens against ||e|| alone is
# measured by the rank correlations below (close to 1 when γ mostly rescales every token alike, near 0
# when γ reorders the vocabulary; here ρ(||e||, ||γ ⊙ e||) = {glue:text}`spearman_norm_vs_gamma_norm`).
# On an RMSNorm model the β columns repeat the β-free ones. The bottom of the lists holds tokens whose
# (stretched) embedding is short, which says nothing yet about whether the model can predict them:
# that is the next check.
#
# ## How the scores relate

# %%
a3.score_hexbin(study.scores, model)
plt.show()
study.rho.style.format("{:.3f}")

# %% [markdown]
# **What to notice.** Each hexagon counts tokens; a thin diagonal band means γ keeps the order of
# ||e|| (ρ = {glue:text}`spearman_norm_vs_gamma_norm` here), a wide cloud means it reorders the
# tokens. The table gives the rank correlation of every pair of scores.
#
# ## Can a listed token actually be predicted?
#
# A low score caps a token's logit, but the prediction is the *largest* logit. For each listed token we
# put the residual state at its best point x̂* (the sphere point that maximizes its logit), pass it
# through the model's final norm and unembedding, and report the token's rank among all logits
# (0 = the model's top prediction) and its logit, which must equal the `max logit` score.

# %%
study.check.style.format({"max logit": "{:.2f}", "logit at x̂*": "{:.2f}"})

# %% [markdown]
# **What to notice.** The `max logit` score is what the model computes at x̂*: the largest gap is
# {glue:text}`max_logit_vs_model_gap` (float32 rounding and eps). At its best state a token's logit
# reaches at most {glue:text}`max_logit_top:.2f` at the top of the ranking and
# {glue:text}`max_logit_bottom:.2f` at its bottom. The least reachable tokens must beat every other
# token with that small logit: at their best state,
# {glue:text}`bottom_tokens_top1_at_best_state` of the {glue:text}`k` least reachable tokens are the
# model's top prediction (rank 0). "Least reachable" means "reachable only with a small logit", not "unreachable": rank 0
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
a3.rank_ecdf(study.drawn, model)
plt.show()

# %% [markdown]
# **What to notice.** Each curve starts at the share of its tokens that win (rank 0): at its best
# state a token of the least reachable tenth wins with a share of
# {glue:text}`win_share_least_reachable`, one of the most reachable tenth with
# {glue:text}`win_share_most_reachable` (Wilson 95% intervals). The difference top − bottom is
# {glue:text}`win_share_top_minus_bottom` (bootstrap over the {glue:text}`n_drawn` drawn tokens):
# {glue:text}`advantage_reading`. The rest of the curves tells the other half: the median rank is
# {glue:text}`median_rank_bottom:.0f` for the least and {glue:text}`median_rank_top:.0f` for the most
# reachable tokens ({glue:text}`median_word`). A score measures how large a token's logit can get,
# not whether it can beat every other token: long vectors that share the embedding's large common
# direction can lose at their own best state to tokens that share it even more, while short vectors
# with idiosyncratic directions can win at theirs. On an untrained model, whose random rows are
# nearly orthogonal, one expects every token to win at its best state and a difference near zero;
# the report compares this chapter with that model's run.

# %% tags=["remove-input"]
view, advantage = lm.view, study.advantage
glue(
    "tied_word", "tied" if view.tied else "untied (we use the unembedding vectors)"
)
glue("norm_name", {"layer": "LayerNorm", "rms": "RMSNorm"}[view.final_norm.kind])
glue("beta_word", "β = 0, none" if view.final_norm.beta is None else "with a β")
glue("beta_gap", study.beta_gap)
glue("unembedding_bias_word", "has no" if view.b_U is None else "has an")
glue("k", k)
glue("n_drawn", len(study.drawn))
medians = study.drawn.groupby("end")["rank"].median()
glue("median_rank_bottom", float(medians["bottom"]))
glue("median_rank_top", float(medians["top"]))
lower = medians["top"] < medians["bottom"]
ties = medians["top"] == medians["bottom"]
glue(
    "median_word",
    "the same" if ties else "lower at the top" if lower else "lower at the bottom",
)
glue(
    "advantage_reading",
    "positive, as the paper's reading predicts (a low score: hard to predict)"
    if advantage.lo > 0
    else "negative, against the paper's reading: the least reachable win more often"
    if advantage.hi < 0
    else "its interval contains zero: this sample cannot tell the two ends apart",
)
values = study.summary(view)
if view.final_norm.beta is None:
    values["beta_score_gap"] = not_applicable("the final norm has no β (RMSNorm)")

# %% [markdown]
# ## Does the claim hold on this model?
#
# The paper's lists are qualitative: the final norm's γ (and β) and the embedding norms decide which
# tokens can get large logits. That the largest logit is what the model computes at the best state is
# an identity. How strongly γ reorders the tokens (ρ between ||e|| and ||γ ⊙ e||) and whether β matters
# (not on an RMSNorm model) are shown without a verdict. The one tested finding is the difference of
# win shares above.

# %% tags=["remove-input"]
conclude("a3_reachable_tokens", values, model)
