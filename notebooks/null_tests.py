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
# # Null tests: gibberish, an untrained model, re-initialised blocks
#
# **What you will see.** Three experiments that take away part of what makes lines of thought what they
# are. (1) The input is no longer language: pseudo-sentences of uniformly random tokens ("gibberish"), whose
# pilots we try to tell from Walden's with a linear classifier at every layer. (2) The model is no longer
# trained: the same architecture with random weights, whose trajectories and extrapolation residuals we
# compare with the trained model's. (3) Only the second half of the model is untrained: the blocks from
# L/2 on are re-initialised, and we watch what the trajectories do once they leave the trained blocks.
#
# **The paper's claims** (Sarfati et al., ICLR 2025, appendix "null tests"): gibberish and language are
# linearly separable at every layer (a perceptron on a 70/30 split); an untrained model gives straight,
# quasi-parallel paths, residuals with excess kurtosis about 1–1.5, and a residual variance that is no
# longer a function of t + τ alone; with the second half re-initialised the trajectories stall and diffuse.
# **Why it matters:** these are the controls that make the main results mean something. If an untrained
# model had the same statistics, the "noise law" of chapter B4 would say nothing about what training
# builds; if gibberish moved like language, the lines would say nothing about text.
#
# **How it is computed.** Trajectories as in chapter B1: x(t) is block t's output at the pilot (the last
# token), the final norm is never applied, no BOS token. The paper leaves several choices open; ours:
#
# - **Gibberish** has N_k = 10 tokens drawn uniformly from the model's whole vocabulary (seeded,
#   `lotlib.gibberish`); the language side is Walden cut at the same N_k = 10, the first `n_s_gibberish`
#   pseudo-sentences, so both classes have the same size.
# - **The classifier** is a `sklearn` perceptron (the paper's choice; `classifier = "logistic"` switches to
#   logistic regression) on standardized states, trained on a seeded, stratified 70% of the pilots and
#   scored on the other 30%, layer by layer with the same split. A second curve runs the same pipeline on
#   two random halves of Walden: what "not separable" scores here.
# - **The untrained model** is the same configuration with fresh, seeded weights
#   (`lotlib.load_model(model, untrained=True, seed=seed)`, the library's default initialisation); the
#   **re-initialised model** keeps blocks 0..L/2−1 and draws blocks L/2..L−1 afresh (`reinit_from = L/2`),
#   so x(1)..x(L/2) are the trained model's and every later step comes from a random block. Both run on the
#   first `n_s` pseudo-sentences of Walden at N_k = 50, as does the trained model they are compared with.
# - **Residual statistics** follow chapter B4 exactly: uncentered SVD per layer, bases aligned from layer 0,
#   Eq. 1 for every pair 1 ≤ t < t + τ ≤ L, coordinates in the aligned arrival basis; the variance law is
#   fitted to ln(mean variance over coordinates) over all pairs.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k_gibberish: "Tokens" = 10  # tokens per pseudo-sentence in the language vs gibberish test (paper: 10)
n_s_gibberish: "Pilots | None" = 2000  # pseudo-sentences per class (None: all of Walden at that N_k)
classifier: "Literal['perceptron', 'logistic']" = "perceptron"  # "perceptron" (the paper's) or "logistic"
train_fraction: float = 0.7  # share of the pilots the classifier is trained on
n_k: "Tokens" = 50  # tokens per pseudo-sentence for the untrained and re-initialised models
n_s: "Pilots | None" = 1000  # pseudo-sentences run through them (None: all of Walden)
reinit_from: "Block | None" = None  # first re-initialised block (None: L // 2)
n_pilots: int = 300  # trajectories drawn
seed: int = 0  # gibberish tokens, random weights, the classifier's split, the drawn pilots

# %%
import matplotlib.pyplot as plt
import numpy as np

import lotlib
from lotlib import plots
from lotlib.lines_of_thought.null_tests import (arrival_spread, layer_separability, relative_steps, residual_statistics, stalling,
                               step_coherence, step_cosines, straightness)
from lotlib.lines_of_thought.residuals import coordinate_moments, fit_variance, pair_mask
from lotlib.book.summary import record
from lotlib.models.bounds import block_index, pilot_count
from lotlib.lines_of_thought.ensemble import ensemble_svd

lm = lotlib.load_model(model, device=device, dtype=dtype)
L, D = lm.view.n_layers, lm.view.d_model
T = L + 1
vocab = min(len(lm.tokenizer), lm.view.W_E.shape[0])
language = lotlib.walden(lm.tokenizer, n_k=n_k_gibberish, n_s=pilot_count(n_s_gibberish, D, "n_s_gibberish"))
noise = lotlib.gibberish(vocab, n_s=language.n_s, n_k=n_k_gibberish, seed=seed)
X_lang = lotlib.trajectories(lm, language)  # (N_s, L+1, D)
X_gib = lotlib.trajectories(lm, noise)
print(f"{lm!r}\nlanguage {language!r}, gibberish {noise!r} drawn from {vocab} tokens; trajectories {X_lang.shape} each")
print("a gibberish pseudo-sentence:", repr(lm.tokenizer.decode(noise.ids[0])))

# %% [markdown]
# ## 1 · Language vs gibberish: linearly separable at every layer?
#
# Test accuracy of the classifier at every layer t = 0..L (t = 0 is the pilot's input embedding, before any
# block). The paper's claim is about the block outputs t = 1..L; the number we report is the minimum over
# them.

# %%
acc_gib = layer_separability(X_lang, X_gib, train_fraction, seed, classifier)
halves = np.random.default_rng(seed).permutation(language.n_s)
half = language.n_s // 2
acc_null = layer_separability(X_lang[halves[:half]], X_lang[halves[half:2 * half]], train_fraction, seed, classifier)
layers_all = np.arange(T)
fig, ax = plt.subplots(figsize=(7.5, 3.8))
ax.plot(layers_all, acc_gib, marker="o", label="Walden vs gibberish")
ax.plot(layers_all, acc_null, marker="s", label="Walden vs Walden (two random halves)")
ax.axhline(0.5, color="grey", ls=":")
ax.set(xlabel="layer t", ylabel=f"test accuracy ({1 - train_fraction:.0%} held out)", ylim=(0.3, 1.03),
       title=f"Linear separability of pilots, {classifier}, N_k = {n_k_gibberish}, {language.n_s} per class, {model}")
ax.legend()
plt.show()
sep_min = float(acc_gib[1:].min())
sep_argmin = int(1 + np.argmin(acc_gib[1:]))
print(f"Walden vs gibberish: test accuracy {acc_gib[0]:.3f} at t = 0 (embedding); over t = 1..{L}: "
      f"min {sep_min:.3f} (t = {sep_argmin}), mean {acc_gib[1:].mean():.3f}")
print(f"Walden vs Walden: mean {acc_null[1:].mean():.3f}, max {acc_null[1:].max():.3f} over t = 1..{L}")

# %% [markdown]
# **What to notice.** The blue curve stays near 1 at every layer: a single hyperplane puts gibberish pilots on
# one side and language pilots on the other, from the embedding to the last block. The orange control runs
# the identical pipeline on two halves of the same text and stays near chance (0.5), so the separation is not
# an artefact of fitting many dimensions with few pilots. Random tokens are mostly rare tokens (the
# vocabulary is dominated by them), so part of the separation is already in the embedding at t = 0; the
# curve says whether the blocks keep the two populations apart.
#
# ## 2 · The untrained model
#
# The same architecture with random weights, on the same Walden pseudo-sentences (N_k = `n_k`). First the
# picture of chapter B1: the trajectories on the first three singular directions of their own last layer.

# %%
walden = lotlib.walden(lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, D, "n_s"))
untrained = lotlib.load_model(model, untrained=True, seed=seed, device=device, dtype=dtype)
X_trained = lotlib.trajectories(lm, walden)
X_untrained = lotlib.trajectories(untrained, walden)
N = walden.n_s
pilots = np.sort(np.random.default_rng(seed).choice(N, size=min(n_pilots, N), replace=False))
layers = np.arange(1, T)


def last_layer_view(X: np.ndarray) -> np.ndarray:
    """The drawn pilots' states t = 1..L on u1..u3 of the ensemble's last layer: `(n_pilots, L, 3)`."""
    U, _ = ensemble_svd(X[:, [L], :])
    return X[pilots][:, layers].astype(np.float64) @ U[0][:, :3]


P_untrained = last_layer_view(X_untrained)
title = f"{len(pilots)} lines of thought, untrained {model} (seed {seed}), t = 1..{L}, on u1..u3 of U({L})"
plots.show(plots.paths_3d(P_untrained, layers, title))
print(f"{untrained!r}; trajectories {X_untrained.shape}")

# %% [markdown]
# Are the paths straight and parallel? Two measures on all pilots, over the block outputs t = 1..L. Straightness:
# the distance from x(1) to x(L) over the length of the path, Σ‖x(t+1) − x(t)‖ (1 for a straight line, about
# 1/√(L−1) for a random walk of independent steps), in the full space and in the three plotted coordinates.
# Parallel steps: at each layer, the norm of the mean unit step over pilots (1 when every pilot steps in the same
# direction, about 1/√N for independent directions).

# %%
step_layers = np.arange(1, L)  # steps t -> t+1 between block outputs
models_compared = {"trained": X_trained, "untrained": X_untrained}
straight = {name: straightness(X[:, 1:]) for name, X in models_compared.items()}
straight_3d = {"trained": straightness(last_layer_view(X_trained)), "untrained": straightness(P_untrained)}
coherence = {name: step_coherence(X)[step_layers] for name, X in models_compared.items()}
walk = 1 / np.sqrt(L - 1)
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
for name in models_compared:
    axes[0].hist(straight[name], bins=40, range=(0, 1), alpha=0.6, label=name)
    axes[1].plot(step_layers, coherence[name], marker="o", label=name)
axes[0].axvline(walk, color="grey", ls=":", label="random walk, 1/√(L−1)")
axes[1].axhline(1 / np.sqrt(N), color="grey", ls=":", label="independent directions, 1/√N")
axes[0].set(xlabel="‖x(L) − x(1)‖ / path length", ylabel="pilots", title="Straightness (full space)")
axes[1].set(xlabel="step t → t+1", ylabel="‖mean unit step‖", title="Parallel steps across pilots", ylim=(0, 1.02))
for ax in axes:
    ax.legend(fontsize=8)
fig.suptitle(f"Paths of the trained and untrained {model}, {N} pilots")
plt.show()
for name in models_compared:
    print(f"{name:>9}: straightness {np.mean(straight[name]):.3f} in the full space (random walk {walk:.3f}), "
          f"{np.mean(straight_3d[name]):.3f} on u1..u3 of U({L}) ({len(pilots)} drawn pilots); "
          f"mean coherence of steps {coherence[name].mean():.3f} (independent: {1 / np.sqrt(N):.3f})")

# %% [markdown]
# **What to notice.** The paper's "straight, quasi-parallel paths" means high values in both panels for the
# untrained model: each pilot keeps its direction from block to block, and all pilots move the same way. A
# straightness on the random-walk line (dotted) means the opposite: every random block adds a step in a direction
# unrelated to the previous one, as a sum of independent random updates does. A step coherence above the
# independent level but well below 1 says the random blocks share a common component of their updates without
# moving the pilots in parallel. The same straightness measured in the three plotted coordinates (printed) is
# higher: a projection on the directions where the ensemble ends up farthest from the origin makes paths look
# straighter than they are, because those directions are chosen by where the paths arrive. A figure of projected
# paths can show "straight lines" that the full space does not have.
#
# ### Residual statistics of the untrained model
#
# The extrapolation residuals of chapter B4, for both models on the same pilots: the excess kurtosis of the
# residual coordinates, and whether the log variance is a function of the arrival layer t + τ alone. "Arrival
# R²" is the share of the variance of ln(mean variance) over all pairs explained by the arrival layer (any
# function of it); "spread" is the standard deviation of ln(mean variance) across departure layers t at a fixed
# arrival layer, averaged over arrival layers (0 if the variance depends on t + τ only).

# %%
all_pairs = pair_mask(T, 1, L)
late_pairs = pair_mask(T, L // 4, L)
noise_law = {}
for name, X in models_compared.items():
    st = residual_statistics(X, *ensemble_svd(X))
    log_var = st.log_mean_var()
    noise_law[name] = {"stats": st, "log_var": log_var, "fit": fit_variance(log_var, all_pairs),
                       "kurtosis": float(np.mean(st.mean_abs_kurtosis()[all_pairs])),
                       "kurtosis_signed": float(np.mean(st.kurtosis[all_pairs])),
                       "kurtosis_late": float(np.mean(st.mean_abs_kurtosis()[late_pairs])),
                       "spread": arrival_spread(log_var, all_pairs)}

gauss_kurt = float(np.mean(np.abs(coordinate_moments(
    np.random.default_rng(seed).standard_normal((N, min(N, D)), dtype=np.float32))[2])))
print(f"Gaussian reference for N = {N}: mean |excess kurtosis| {gauss_kurt:.3f}")

t_idx, s_idx = np.nonzero(all_pairs)
fig, axes = plt.subplots(1, 2, figsize=(13, 4.3))
for ax, (name, law) in zip(axes, noise_law.items()):
    points = ax.scatter(s_idx, law["log_var"][t_idx, s_idx], c=t_idx, cmap="viridis", s=10)
    f = law["fit"]
    grid = np.linspace(1, L, 50)
    ax.plot(grid, np.log(f["alpha"]) + f["lambda"] * grid, color="crimson",
            label=f"α e^(λ(t+τ)): λ = {f['lambda']:.3f}, R² = {f['r2']:.2f}")
    ax.set(xlabel="arrival layer t + τ", ylabel="ln(mean variance)", title=f"{name} {model}")
    ax.legend(fontsize=8)
fig.colorbar(points, ax=axes, label="departure layer t")
plt.show()
for name, law in noise_law.items():
    f = law["fit"]
    print(f"{name:>9}: mean |excess kurtosis| {law['kurtosis']:.2f} over all pairs ({law['kurtosis_late']:.2f} for "
          f"t >= {L // 4}), mean excess kurtosis {law['kurtosis_signed']:.2f}; variance law R2 {f['r2']:.3f}, "
          f"arrival R2 {f['arrival_r2']:.3f}, spread across departures {law['spread']:.3f} (ln units)")

# %% [markdown]
# **What to notice.** In the trained model (left) the points of one arrival layer (one column) nearly share a
# value whatever their colour: the variance is close to a function of t + τ. For the untrained model (right) the
# colours separate within a column, in order: at a fixed arrival layer, late departures (short jumps τ) leave a
# smaller residual than early ones. That is what a random walk does, whose increment over τ steps grows with τ
# rather than with where it arrives; the arrival R² printed above measures how much of the variation the arrival
# layer explains. The spread across departures, in ln units, has to be read against the range of the law: the
# untrained variance grows much more slowly with depth (its λ), so the same spread weighs more. The kurtosis
# line compares the tails with the Gaussian reference printed above (what a Gaussian sample of this size scores):
# the paper reports an excess kurtosis of about 1–1.5 for the untrained GPT-2 medium. Where the untrained value
# sits at the Gaussian reference, the sum of many independent random updates has done what the central limit
# theorem says it does.
#
# ## 3 · The second half re-initialised
#
# Blocks `reinit_from`..L−1 get fresh random weights; the first half is the trained model's. How far does a pilot
# move per block, relative to where it is, ‖x(t+1) − x(t)‖ / ‖x(t)‖ (median over pilots), and does it keep
# its direction (cosine between consecutive steps)? The trained and untrained models are shown for reference.

# %%
split = L // 2 if reinit_from is None else block_index(reinit_from, L, "reinit_from", lm.name)
reinit = lotlib.load_model(model, reinit_from=split, seed=seed, device=device, dtype=dtype)
X_reinit = lotlib.trajectories(reinit, walden)
models_compared["reinit"] = X_reinit
labels = {"trained": "trained", "untrained": "untrained", "reinit": f"blocks {split}.. re-initialised"}
stall = {name: stalling(X, split) for name, X in models_compared.items()}
cos_layers = np.arange(2, L)  # the cosine at layer t pairs the steps t-1 -> t and t -> t+1 (block outputs only)

fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
for name, X in models_compared.items():
    axes[0].semilogy(np.arange(1, L), np.median(relative_steps(X)[:, 1:], axis=0), marker="o", ms=3, label=labels[name])
    axes[1].plot(cos_layers, step_cosines(X)[:, cos_layers - 1].mean(0), marker="o", ms=3, label=labels[name])
for ax in axes:
    ax.axvline(split, color="grey", ls="--")
axes[0].set(xlabel="step t → t+1", ylabel="median ‖x(t+1) − x(t)‖ / ‖x(t)‖", title="Relative step length")
axes[1].set(xlabel="layer t", ylabel="mean cos(consecutive steps)", title="Change of direction", ylim=(-0.2, 1.02))
axes[0].legend(fontsize=8)
fig.suptitle(f"Stalling after re-initialisation of blocks {split}..{L - 1} (dashed), {model}")
plt.show()
for name, s in stall.items():
    print(f"{labels[name]:>26}: median relative step {s['step_before']:.4f} before t = {split}, {s['step_after']:.4f} after "
          f"(ratio {s['step_ratio']:.3f}); mean cos of consecutive steps {s['cos_before']:.3f} before, "
          f"{s['cos_after']:.3f} after")

# %%
fig = plt.figure(figsize=(13, 5.5))
for i, name in enumerate(["untrained", "reinit"]):
    ax = fig.add_subplot(1, 2, i + 1, projection="3d")
    plots.paths_static(last_layer_view(models_compared[name]), layers, f"{labels[name]}, on u1..u3 of U({L})", ax=ax)
plt.show()
P_reinit = last_layer_view(X_reinit)
plots.show(plots.paths_3d(P_reinit, layers, f"{len(pilots)} lines of thought, {model} with blocks {split}.. "
                          f"re-initialised, on u1..u3 of U({L})"))

# %% [markdown]
# **What to notice.** Up to the dashed line the re-initialised model *is* the trained model, and its curves lie
# on the trained ones. After it, the relative step collapses: a random block adds an update much smaller than the
# state it receives (trained states have grown large by L/2, a fresh block's output has the scale of its random
# initialisation), so the pilots barely move; that is the stalling. The cosine after the line says what the small
# steps look like: near 0 they turn at random, a diffusion around the point where the trained blocks left the
# pilot, rather than a drift. In the 3-D picture the layers past L/2 pile up on top of each other.
#
# **This model vs GPT-2 medium.** The paper's null tests ran on GPT-2 medium (LayerNorm, 24 layers, learned
# position embeddings). SmolLM2 normalizes with RMSNorm (no centering), uses rotary positions and grouped-query
# attention; its random initialisation is the transformers default for its family (normal, std 0.02, norm
# scales 1), and a different initialisation scale would change how strongly fresh blocks stall.
#
# ## Does the claim hold on this model?

# %%
u, t_ = noise_law["untrained"], noise_law["trained"]
r = stall["reinit"]
print(f"Gibberish vs language separable at every layer (paper: perceptron, 70/30): min test accuracy over "
      f"t = 1..{L} = {sep_min:.3f} (control, two halves of Walden: {acc_null[1:].mean():.3f}) -> "
      f"{'holds' if sep_min >= 0.95 else 'differs'}")
print(f"Untrained: straight paths? straightness {np.mean(straight['untrained']):.3f} in the full space (random walk "
      f"{walk:.3f}, trained {np.mean(straight['trained']):.3f}), {np.mean(straight_3d['untrained']):.3f} on u1..u3 -> "
      f"{'holds' if np.mean(straight['untrained']) >= 0.5 else 'differs'} (judged in the full space, straight >= 0.5)")
print(f"Untrained: quasi-parallel paths? step coherence {coherence['untrained'].mean():.3f} (trained "
      f"{coherence['trained'].mean():.3f}, independent {1 / np.sqrt(N):.3f}) -> "
      f"{'holds' if coherence['untrained'].mean() >= 0.5 else 'differs'} (parallel >= 0.5)")
print(f"Untrained: mean |excess kurtosis| {u['kurtosis']:.2f} (paper ~1-1.5; trained {t_['kurtosis']:.2f}) -> "
      f"{'holds' if 0.75 <= u['kurtosis'] <= 1.75 else 'differs'}")
print(f"Untrained: variance not a function of t+tau alone: arrival R2 {u['fit']['arrival_r2']:.3f} vs trained "
      f"{t_['fit']['arrival_r2']:.3f}; spread across departures {u['spread']:.3f} vs {t_['spread']:.3f} -> "
      f"{'holds' if u['fit']['arrival_r2'] < t_['fit']['arrival_r2'] else 'differs'} (judged on the arrival R2)")
print(f"Re-initialised second half: relative step after / before t = {split}: {r['step_ratio']:.3f} (trained model "
      f"{stall['trained']['step_ratio']:.3f}); cos of consecutive steps after: {r['cos_after']:.3f} -> "
      f"{'stalls' if r['step_ratio'] < 0.5 * stall['trained']['step_ratio'] else 'does not stall'}")

# %%
record({
    "n_layers": L, "d_model": D, "n_k_gibberish": n_k_gibberish, "n_s_gibberish": language.n_s,
    "classifier": classifier, "train_fraction": train_fraction, "n_k": n_k, "n_s": N, "reinit_from": split,
    "separability_by_layer": acc_gib, "separability_min": sep_min, "separability_argmin": sep_argmin,
    "separability_embedding": acc_gib[0], "separability_mean": acc_gib[1:].mean(),
    "separability_control_mean": acc_null[1:].mean(), "separability_control_max": acc_null[1:].max(),
    **{f"{name}_{key}": law[key] for name, law in noise_law.items() for key in ("kurtosis", "kurtosis_signed",
                                                                               "kurtosis_late", "spread")},
    **{f"{name}_{key}": law["fit"][key] for name, law in noise_law.items()
       for key in ("alpha", "lambda", "r2", "arrival_r2")},
    "untrained_arrival_r2_below_trained": u["fit"]["arrival_r2"] < t_["fit"]["arrival_r2"],
    **{f"{name}_straightness": np.mean(straight[name]) for name in straight},
    **{f"{name}_straightness_3d": np.mean(straight_3d[name]) for name in straight_3d},
    "straightness_random_walk": walk, "kurtosis_gaussian": gauss_kurt,
    **{f"{name}_step_coherence": coherence[name].mean() for name in coherence},
    **{f"{name}_{key}": s[key] for name, s in stall.items() for key in s},
    "reinit_stalls": r["step_ratio"] < 0.5 * stall["trained"]["step_ratio"],
})
