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
#   needs: [causal, readout]
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
# model without the anomaly would fail.
#
# It also has to measure the model, not the way its states were read: in
# Hugging Face models the last entry of `output_hidden_states` is taken *after* the final norm, while every
# other entry is a raw block output, so a trajectory read that way ends on a different scale from the rest.
#
# :::{dropdown} How it is computed
# Every model runs on Walden cut into pseudo-sentences of N_k tokens (no BOS, as in the paper), the pilot is
# the last token, x(t) is block t's output, all with the conventions of chapters B2 and B4.
#
# **Spectrum decay**: σ_1/σ_2 and the least-squares slope of ln σ_i against ln i for i = 10..k/2 at the last
# layer (uncentered SVD of the fitted half of the pilots; k = min(N_s / 2, D)), as in chapter B2.
#
# **Truncation**: the last-layer protocol of chapter B2 (x(L) projected on the top-K singular directions of
# U(L), then final norm and unembedding) on `n_kl` held-out pilots: the mean KL(p_K ‖ p) at K = 1 and K = D/4,
# their ratio (the authors' criterion: about 5 nats falling by about 90%), and how many of the `top` most
# likely next tokens p_{D/4} shares with p.
#
# **Noise law**: Eq. 1 residuals for every pair 1 ≤ t < t + τ ≤ L, bases aligned from layer 0, coordinates in
# the aligned arrival basis, and the fit ln(mean variance) = ln α + λ(t + τ) over all pairs (chapter B4's
# first convention). Across models only dimensionless numbers are compared: **λL**, the total growth of the
# noise over the model's depth (λ per layer is not comparable between 18 and 30 layers), and **α relative to
# the arrival spread**, the residual variance as a share of the variance of the states it should predict
# (geometric mean over pairs; α itself is in the units of each model's residual stream).
#
# **The last layer, left out.** A law fitted on all layers and tested on the last one compares a layer the fit
# must extrapolate to with layers the fit has seen; any cut-off layer can look anomalous that way (where the
# states grow ever more slowly with depth, the extrapolated line overshoots the flattening curve, and the
# in-sample layers sit on it by construction).
#
# So every arrival layer s is treated alike: the law is refitted without the pairs that touch s, and r(s) is
# how far the mean ln variance of the pairs arriving at s lies from that refit (in ln units, 0 = on the law).
# The last layer "breaks the law" when |r(L)| exceeds |r(s)| for every other layer from L/2 to L−1 (the
# paper's early layers deviate; they are left out of the comparison): the **excess** |r(L)| − max |r(s)| > 0.
#
# The excess is computed three ways: on B4's ln(mean variance); on the residual variance relative to the
# arrival layer's spread (the growth of the states divided out); and with the final norm applied to x(L), as
# `output_hidden_states` reports it.
#
# **Nulls.** The report runs this chapter on the untrained model of the same architecture. The chapter adds a
# **structureless cloud**: Gaussian points with the same mean and per-coordinate variance as the model's
# states at every layer, independent across layers: the same norm growth and nothing else.
#
# **Separability**: chapter "Null tests" with one classifier split: Walden vs uniformly random tokens at
# N_k = `n_k_gibberish`, a seeded perceptron on a 70/30 split at every layer; the minimum over t = 1..L.
# :::
#
# :::{dropdown} How sure we are
# The claims' numbers carry 95% intervals from a bootstrap over pilots (`n_boot` resamples; normal intervals
# from the bootstrap standard error, because the excess, a difference of absolute values and a maximum, is
# shifted on resamples while its spread is not).
#
# The singular bases are fitted on a seeded half of each model's pilots and everything above is scored, and
# bootstrapped, on the other half, so the intervals carry the fit: a basis fitted on the pilots it is scored
# on would make their residuals smaller than a new pilot's. The cloud is split the same way.
# :::
#
# **Code:** `lotlib.chapters.c5_other_models.measure_model`.

# %% tags=["parameters", "remove-cell"]
model: str = "smollm2-135m"  # the book's model, whose claims are judged
others: "list[str] | None" = None  # shown beside it (None: other default models)
device: str = "auto"  # auto (a GPU when there is one), cpu, cuda, mps
dtype: "Dtype" = "float32"  # the models' weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "HeldOutBasis | None" = None  # None: all of Walden; "3D": per model
n_kl: int = 300  # held-out pilots for the truncated KL
ks: "list[int] | None" = None  # K grid (None: powers of 2 below D); 1, D/4, D added
top: int = 5  # next tokens compared, truncated vs full (the authors: 5)
n_k_gibberish: "Tokens" = 10  # tokens per pseudo-sentence in the separability test
n_s_gibberish: "Pilots | None" = 2000  # pseudo-sentences per class, separability
classifier: "Literal['perceptron', 'logistic']" = "perceptron"  # the paper's
train_fraction: float = 0.7  # share of the pilots the classifier is trained on
n_bos: int = 200  # pseudo-sentences for the BOS check (0 skips it)
seed: int = 0  # gibberish, the classifier's split, the cloud, the bootstrap
n_boot: "Count" = 1000  # bootstrap resamples of pilots

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.chapters import c5_other_models as c5
from lotlib.models.sources import default_models
from lotlib.stats import side_word
from lotlib.summary import glue
from lotlib.verdicts import conclude

plots.apply_theme()
# a null: its own claims alone are read
untrained_book = model.startswith("untrained:")
default_others = (
    [] if untrained_book else [m for m in default_models() if m != model]
)
names = [
    model,
    *(default_others if others is None else [m for m in others if m != model]),
]
glue("others_shown", ", ".join(names[1:]) or "none")

# %% [markdown]
# ## Every model, measured the same way
#
# One pass per model: trajectories, singular bases, truncation, the noise law with its bootstrap, the last layer
# with the final norm, separability and the BOS check. The structureless cloud is drawn for the book's model only
# (it is the null of its claims). The logits of a 262k-token vocabulary (Gemma 3) take a gigabyte for a thousand
# states, so the truncation runs in batches sized to the vocabulary (about 16 million logits at a time). The models shown beside {glue:text}`model`: {glue:text}`others_shown`.
#
# One pass per model gives its summary row and the arrays the figures draw. Code: `c5_other_models.measure_model`.

# %%
protocol = c5.MeasurementProtocol(
    n_k=n_k,
    n_s=n_s,
    n_kl=n_kl,
    ks=ks,
    top=top,
    n_k_gibberish=n_k_gibberish,
    n_s_gibberish=n_s_gibberish,
    classifier=classifier,
    train_fraction=train_fraction,
    n_bos=n_bos,
    n_boot=n_boot,
    seed=seed,
)
measures = {
    name: c5.measure_model(
        name, protocol, cloud=name == model, device=device, dtype=dtype
    )
    for name in names
}

# %% [markdown]
# ## The noise law and the last layer

# %%
c5.last_layer_law_figure(measures)
plt.show()

# %% [markdown]
# **What to notice.** The dots of the last column (dashed line) are the pairs arriving at the last layer, x(L) as
# the last block leaves it; the crosses are the same pairs with the final norm applied to x(L). Where the columns
# bend around the straight line of the law, a last layer can only be called anomalous against how far the other
# layers are off the same law, which is why every layer is measured that way below. The final norm divides every state by its
# root mean square, so after it x(L) has the norm's scale, not the scale the residual stream grew to; the
# crosses sit wherever that puts them, whatever the model does.
#
# Next, each arrival layer against a law fitted without it (leave-one-out), on relative depth s/L so that models
# of different depths share an axis. Left: B4's ln(mean variance). Middle: the same relative to the arrival
# layer's spread. Right: for the book's model, the structureless cloud with its norm growth. Bands: 95% bootstrap
# over pilots.

# %%
c5.leave_one_out_figure(measures, model)
plt.show()
m = measures[model].row
words = ("does not break it", "may or may not break it", "breaks the law as well")
for key in ("last_layer_excess", "last_layer_excess_relative"):
    glue(f"{key}_cloud_word", side_word(m[f"{key}_cloud"], words))

# %% [markdown]
# **What to notice.** On {glue:text}`model` the last layer lies r(L) = {glue:text}`last_layer_log_ratio` (ln
# units) off its leave-one-out law; its excess over the layers L/2..L−1 is {glue:text}`last_layer_excess` on
# ln(mean variance), {glue:text}`last_layer_excess_relative` relative to the spread and
# {glue:text}`last_layer_excess_final_norm` with the final norm; the mean |r| of the early layers is
# {glue:text}`early_layers_mean_abs_log_ratio:.2f`, of the late ones {glue:text}`late_layers_mean_abs_log_ratio:.2f`.
# The structureless cloud shaped like it gives {glue:text}`last_layer_excess_cloud` on ln(mean variance) and
# {glue:text}`last_layer_excess_relative_cloud` relative to the spread (the table below has every model).
#
# A circle marks the last layer of each model. On ln(mean variance) (left) the layers wander
# around the law, on {glue:text}`model` by a mean |r| of {glue:text}`early_layers_mean_abs_log_ratio:.2f` in the
# early layers (left of the dotted line, the paper's "early layers deviate") and
# {glue:text}`late_layers_mean_abs_log_ratio:.2f` in the late ones, and the last layer's circle is anomalous only
# if it sits further out than every other point right of the dotted line. The right panel is the test of that test: the structureless cloud has
# the model's norm growth and nothing else; where on ln(mean variance) its curve follows the model's, last layer
# included, whatever the left panel shows at the last layer is a property of how the spread of the states grows,
# not of how well the lines of thought are extrapolated: a last block that enlarges the states more than its
# predecessors "breaks the law" in a cloud as well.
#
# Relative to the arrival spread (middle), a cloud has nothing
# but its growth, which that reading divides out, and the model's last layer has to stand out on its own.
#
# ## The truncated next-token distribution, the spectrum and separability

# %%
c5.spectra_truncation_separability_figure(measures, n_k_gibberish)
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
# Every model reads its pseudo-sentences as its tokenizer starts a text (the default): GPT-2 and SmolLM2 without a BOS token, as the paper's pseudo-sentences are; Gemma with one, because it
# was trained with a BOS at the start of every sequence. A direct check of what
# BOS changes: the negative log-likelihood of the true next token (the first token of the next pseudo-sentence)
# from x(L), on the first `n_bos` pseudo-sentences, with and without the tokenizer's BOS token (the table below).
# Code: `lotlib.walden(..., bos=None)`.
#
# ## All models side by side
#
# Every number of this chapter for every model; a value with an interval is `value [lo, hi]` (95%, bootstrap over
# pilots). The rows marked (claim) are judged on the book's model in the closing paragraph.

# %%
nll = {n: r.row for n, r in measures.items() if "nll_bos" in r.row}
bos = [
    f"{n}, {r['nll_no_bos']:.2f} and {r['nll_bos']:.2f} nats"
    for n, r in nll.items()
]
glue("bos_text", "; ".join(bos) or "no model shown names a BOS token")
c5.measures_table({name: m.row for name, m in measures.items()}, top)

# %% [markdown]
# **What to notice.** Read the table row by row. The spectrum rows say how dominant the common direction u_1 is
# (σ1/σ2) and how fast the rest decays. The truncation rows give the authors' own criterion: the KL at K = 1
# (about 5 nats for GPT-2 medium), at K = D/4 (about 0.5) and their ratio (about 0.1), and the top-5 overlap (the
# authors: about 2.5 of 5 at D/4).
#
# λL is the total growth of the noise over the model's depth; the paper's
# models have λL ≈ 0.18 × 24 ≈ 4.3 (GPT-2 medium) and 0.27 × 32 ≈ 8.6 (Llama 2 7B). α relative to the arrival
# spread says how large the extrapolation's residual is compared with the states it predicts (1 = as large as
# the spread itself). The last-layer rows are the diagnostic; the early and late |r| rows say how well the law
# holds elsewhere.
#
# A model with a BOS token the tokenizer names (SmolLM2's `<|im_start|>` is a chat marker, not
# a start of text) gets the NLL check: for a model trained with BOS at the start of every sequence, leaving it out
# makes the first word of a pseudo-sentence play the role BOS plays in its attention (the "attention sink"). The
# next-token NLL from x(L) without and with BOS: {glue:text}`bos_text`. Every other number here is measured on
# each model's default reading above.
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

# %% tags=["remove-input"]
conclude(
    "c5_other_models",
    c5.claim_values(measures, model, protocol),
    model,
    why_not_diagnostic=(
        "what a structureless cloud with the same norm growth shows too is "
        "norm growth"
    ),
)

# %% [markdown]
# Read the table with the two figures of the noise law. The claim of the paper is judged twice. On B4's ln(mean
# variance) a last layer "breaks the law" whenever the last block enlarges the states more than its predecessors
# did, and the structureless cloud with the same norm growth shows whether that is all the test sees: on
# {glue:text}`model` it {glue:text}`last_layer_excess_cloud_word` on ln(mean variance), and it
# {glue:text}`last_layer_excess_relative_cloud_word` relative to the spread. Where the cloud breaks the law as well, the finding is *not diagnostic* of anything about the lines of
# thought. Relative to the arrival layer's spread the growth of the spread is divided out, and only a last layer
# whose extrapolation is worse (or better) than its spread predicts stands out; not quite all of the growth,
# though: the extrapolation scales each direction by a ratio of *uncentered* singular values, which follow the
# growth of the ensemble's mean as well as of its spread, so a cloud whose mean jumps at the last layer can still
# put that layer slightly off the relative law.
#
# Where the cloud passes this test too, the model's
# excess has to be read as "no larger than norm growth alone can make it", not as an anomaly. The final-norm row is
# an identity of the reading, not of the model: after the final norm x(L) has the norm's scale, off any law fitted
# on the stream's growth unless the stream happened to end at that scale, so the paper's anomaly, if read from
# `output_hidden_states`, would be there whatever the model does. λL compares the total growth over the depth with
# the paper's models.
#
# It need not tell lines of thought from a cloud: the residual of a linear map grows as the
# states it predicts grow, and the structureless cloud with the same norm growth reaches
# λL = {glue:text}`lambda_L_cloud` against the model's {glue:text}`lambda_L`; what it does tell is how much the model's states
# grow, to be set against the untrained model (the report's other null).
