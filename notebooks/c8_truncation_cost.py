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
# # Open questions · What truncation costs the next token
#
# **What you will see.** For pseudo-sentences the fit never saw, what truncating every block's output to its
# top-K ensemble directions costs the next token: the rise of the next-token loss and the top-1 accuracy,
# beside the KL divergence that Lines of Thought reports.
#
# **Why it matters.** Lines of Thought says that D/4 directions keep the next-token distribution within
# about 0.5 nats of KL; a reviewer asked what that costs in the model's own currency, the loss on the true
# next token. It is answered here in numbers, which the paper does not state.
#
# :::{dropdown} How it is computed
# The bases are the per-layer singular vectors of the first pseudo-sentences; the following `n_scored`
# ones, held out, are truncated after every block to the top K directions and propagated through the later blocks (B2's "every
# layer" protocol). Each has a true next token, the first token of the pseudo-sentence after it. For each K:
# the mean KL(p_K ‖ p), the mean rise of the next-token loss −log p_K(next) over −log p(next), and the top-1
# accuracy of p_K, each with a bootstrap interval over the held-out pseudo-sentences.
#
# **Code:** `lotlib.chapters.c8_truncation_cost.truncation_cost`.
# :::
#
# **No verdict.** The paper gives no number for this question, and no bound for it comes from outside our
# results, so the claims below are shown with their intervals and judged by nothing (test kind none). The
# report sets each beside the untrained model's value.

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "FullBasis" = "2D"  # pseudo-sentences of Walden read (the first ones)
n_scored: "Pilots" = "0.5D"  # the last of them, held out: truncated and scored
seed: int = 0  # the bootstrap resamples
n_boot: "Count" = 1000  # bootstrap resamples of the pseudo-sentences

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters import c8_truncation_cost as c8
from lotlib.lines_of_thought.ensemble import open_ensemble
from lotlib.verdicts import conclude

plots.apply_theme()
ens = open_ensemble(model, n_k=n_k, n_s=n_s, device=device, dtype=dtype)
ens

# %% [markdown]
# ## What truncation costs the next token
#
# The {glue:text}`n_scored` held-out pseudo-sentences, truncated after every block to the top K directions of
# bases fit on the {glue:text}`n_fit` before them. Left, the KL divergence of B2 (c), here out of sample;
# middle, what it costs the true next token; right, how often p_K's most likely token is the true one.

# %%
cost = c8.truncation_cost(ens, n_scored, n_boot=n_boot, seed=seed)
c8.truncation_cost_figure(cost, ens.D, model)
plt.show()

# %% [markdown]
# **What to notice.** At K = D/4 the held-out KL is {glue:text}`kl_quarter_d_held_out` nats (Lines of
# Thought: about 0.5 nats at K = D/4 on GPT-2 medium, with the basis fit on the pilots it truncates). On the
# true next token, that truncation raises the loss by {glue:text}`loss_rise_quarter_d` nats over the
# model's own {glue:text}`loss_full` nats, and the top-1 accuracy is {glue:text}`top1_quarter_d` against the
# model's {glue:text}`top1_full`. The KL weighs every token by p_K's probability; the loss rise looks at one
# token, the one that came next, so the two need not move together.
#
# ## The claims on this model

# %% tags=["remove-input"]
values = c8.claim_values(ens, cost)
conclude("c8_truncation_cost", values, model)
