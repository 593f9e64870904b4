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
# # B4 · What the linear map misses: residual statistics
#
# **What you will see.** Carry every pilot from layer t to layer t + τ with the linear extrapolation of
# Eq. 1 and look at what is left over, the residual w = x(t+τ) − x̃(t, τ), for **every** pair of layers at
# once. Three heatmaps over (t, t+τ) summarize each pair: how far the residual coordinates are from zero
# mean (|μ/σ|), how large they are (log variance) and how far from Gaussian their tails are (|excess
# kurtosis|). Then the fit of the variance law, the shape of one coordinate's noise, the variance of each
# coordinate layer by layer, and the correlation matrix of the residual coordinates.
#
# **The paper's claim** (Sarfati et al., Eq. 2 and Fig. 4): the residuals are i.i.d. Gaussian coordinates
# with zero mean and variance α e^(λ(t+τ)), a function of the *arrival* layer t + τ only, growing
# exponentially; for GPT-2 medium α ≈ 0.64 and λ ≈ 0.18; the excess kurtosis is about zero except at the
# first layers. **Why it matters:** this is the noise term of the Langevin equation (chapter B5). If the
# residuals are not a simple Gaussian with a law in t + τ, the stochastic model has the wrong noise.
#
# **How it is computed.** Trajectories of all pseudo-sentences, per-layer **uncentered** SVD, singular
# vectors aligned across layers (optimal assignment and sign, `lotlib.lines_of_thought.ensemble.align_bases`), Eq. 1 from
# `lotlib.lines_of_thought.extrapolation`. With y(t) = U(t)ᵀx(t) computed once per layer, the residual's coordinates in the
# arrival basis are y(t+τ) − Σ(t+τ)Σ(t)⁻¹ y(t): every pair costs a vector operation over the ensemble
# (`lotlib.lines_of_thought.residuals`; the tests check it against the direct Eq. 1 residual). The layers are the block
# outputs t = 1..L (x(0), the embedding, is not a block output and is left out, as in the paper).

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = None  # cap on pseudo-sentences (None: all of Walden)
raw_coordinates: bool = True  # also the statistics in raw residual-stream coordinates (one matrix product per pair)
fit_first: "Layer" = 1  # the variance law is fitted on pairs with t >= fit_first
fit_last: "Layer | None" = None  # and arrival t + tau at most fit_last (None: L, the last layer included)
early_layers: "Layer | None" = None  # departures t < early_layers count as "early layers" (None: L // 4)
t_pdf: "Layer | None" = None  # departure layer of the noise PDFs and the correlation matrix (None: L // 2)
pdf_taus: list[int] = [1, 2, 4, 8]  # tau of the noise PDFs
n_corr: int = 40  # coordinates shown in the correlation matrix (the largest sigma at the arrival layer)
seed: int = 0  # the synthetic Gaussian reference

# %%
import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import norm

import lotlib
from lotlib.lines_of_thought.extrapolation import residuals
from lotlib.lines_of_thought.residuals import (coordinate_moments, fit_variance, mean_abs_offdiagonal, pair_mask, pair_statistics,
                              residual_coordinates, singular_coordinates)
from lotlib.book.summary import record
from lotlib.models.bounds import layer_index
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd

lm, corpus, X = lotlib.walden_trajectories(model, n_k=n_k, n_s=n_s, device=device, dtype=dtype)  # X: (N_s, L+1, D)
N_s, T, D = X.shape
L = T - 1
layers = np.arange(1, L + 1)
fit_first = layer_index(fit_first, L, "fit_first", lm.name)
fit_last = L if fit_last is None else layer_index(fit_last, L, "fit_last", lm.name)
early_layers = L // 4 if early_layers is None else layer_index(early_layers, L, "early_layers", lm.name)
t_pdf = L // 2 if t_pdf is None else layer_index(t_pdf, L, "t_pdf", lm.name)
U, S = align_bases(*ensemble_svd(X))
Y = singular_coordinates(X, U)  # (N_s, T, k)
k = U.shape[2]
print(f"{lm!r}\n{corpus!r}: trajectories {X.shape}; aligned bases {U.shape} (k = {k} directions per layer)")

# %% [markdown]
# Which coordinates? The natural ones for Eq. 2 are those of the aligned singular basis U(t+τ) of the
# arrival layer (the basis the extrapolation lands in). The paper does not say; we compute both that basis
# and, when `raw_coordinates` is on, the raw residual-stream coordinates. The *mean* variance over
# coordinates is a trace and is the same in both bases; |μ/σ|, the kurtosis and the mean of log variances
# are not.
#
# What "about zero" means at this ensemble size: a Gaussian sample of N_s points gives |μ/σ| and |excess
# kurtosis| of order 1/√N_s and √(24/N_s). We measure the reference directly on a synthetic Gaussian matrix of
# the same shape (seeded).

# %%
st = pair_statistics(Y, S, layers)
raw = pair_statistics(Y, S, layers, U=U) if raw_coordinates else None
gauss_z, _, gauss_kurt = coordinate_moments(np.random.default_rng(seed).standard_normal((N_s, k), dtype=np.float32))
null_z, null_kurt = float(np.mean(np.abs(gauss_z))), float(np.mean(np.abs(gauss_kurt)))
all_pairs = pair_mask(T, 1, L)
late_pairs = pair_mask(T, early_layers, L)
early_pairs = all_pairs & ~late_pairs
print(f"{all_pairs.sum()} pairs (t, t+tau), 1 <= t < t+tau <= {L}; Gaussian reference for N_s = {N_s}: "
      f"mean |mu/sigma| = {null_z:.4f}, mean |excess kurtosis| = {null_kurt:.3f}")
for name, s in (("aligned singular basis", st), ("raw coordinates", raw)):
    if s is not None:
        print(f"{name:>22}: mean |mu/sigma| {np.mean(s.mean_abs_z()[all_pairs]):.4f} (max {np.max(s.mean_abs_z()[all_pairs]):.4f}); "
              f"mean |excess kurtosis| {np.mean(s.mean_abs_kurtosis()[all_pairs]):.2f} "
              f"(early departures t < {early_layers}: {np.mean(s.mean_abs_kurtosis()[early_pairs]):.2f}, "
              f"later: {np.mean(s.mean_abs_kurtosis()[late_pairs]):.2f})")

# %%
def heatmaps(s, title):
    panels = [(s.mean_abs_z(), "mean |μ/σ|", "viridis"), (s.mean_log_var(), "mean of ln variance", "magma"),
              (s.mean_abs_kurtosis(), "mean |excess kurtosis|", "viridis")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (values, label, cmap) in zip(axes, panels):
        image = ax.imshow(np.where(all_pairs, values, np.nan), origin="lower", cmap=cmap, aspect="auto")
        ax.set(xlabel="arrival layer t + τ", ylabel="departure layer t", title=label, xlim=(0.5, L + 0.5),
               ylim=(0.5, L - 0.5))
        fig.colorbar(image, ax=ax)
    fig.suptitle(f"{title}, {model}")
    plt.show()


heatmaps(st, "Residual coordinates in the aligned singular basis U(t+τ)")
if raw is not None:
    heatmaps(raw, "Residual coordinates in raw residual-stream coordinates")

# %% [markdown]
# **What to notice.** The left panels: |μ/σ| is small everywhere. In the aligned singular basis it is even
# below the Gaussian reference, which is structural rather than evidence: the uncentered SVD puts the ensemble's
# mean into the first direction, and every other coordinate then has a near-zero mean by construction (its right
# singular vector is nearly orthogonal to the all-ones vector). The raw coordinates are the fair test: compare
# their value with the reference. The middle panels: the log variance changes along the horizontal axis
# (arrival layer) and hardly along the vertical one (departure layer), the paper's "function of t + τ only".
# The right panels: the excess kurtosis is largest for early departures; compare its level with the Gaussian
# reference printed above.
#
# ## The variance law α e^(λ(t+τ))
#
# Two conventions give two fits (the paper does not say which it used; natural log in both): the log of the
# mean variance over coordinates, ln(mean_i σ²_i), and the mean over coordinates of the log variance,
# mean_i ln σ²_i. The second weights every coordinate equally, the first is dominated by the largest
# variances. Both are fitted by least squares on ln variance = ln α + λ (t+τ) over all pairs of the chosen
# layers. R² is the fit's; "arrival R²" is the share of the variance of the log variance explained by the
# arrival layer alone (any function of it: 1 means it depends on t + τ only).

# %%
conventions = {"log_mean": ("ln(mean variance)", st.log_mean_var()), "mean_log": ("mean(ln variance)", st.mean_log_var())}
subsets = {"default": (f"t >= {fit_first}, t+tau <= {fit_last} (parameters)", fit_first, fit_last),
           "all": (f"all layers 1..{L}", 1, L), "no_last": (f"without the last layer (t+tau <= {L - 1})", 1, L - 1),
           "no_early": (f"without early departures (t >= {early_layers})", early_layers, L),
           "no_both": ("without both", early_layers, L - 1)}
fits = {(c, s): fit_variance(values, pair_mask(T, first, last))
        for c, (_, values) in conventions.items() for s, (_, first, last) in subsets.items()}
print(f"{'convention':<18} {'layers fitted':<42} {'alpha':>7} {'lambda':>7} {'R2':>6} {'arrival R2':>10} {'pairs':>6}")
for (c, s), f in fits.items():
    print(f"{conventions[c][0]:<18} {subsets[s][0]:<42} {f['alpha']:7.3f} {f['lambda']:7.4f} {f['r2']:6.3f} "
          f"{f['arrival_r2']:10.3f} {f['n_pairs']:6d}")
fit_lm, fit_ml = fits["log_mean", "default"], fits["mean_log", "default"]
print(f"\npaper (GPT-2 medium): alpha ~ 0.64, lambda ~ 0.18 (lambda L = {0.18 * 24:.1f} over its 24 layers); "
      f"ours: lambda L = {fit_lm['lambda'] * L:.1f} / {fit_ml['lambda'] * L:.1f} over {L} layers")

# %%
mask = pair_mask(T, fit_first, fit_last)
t_idx, s_idx = np.nonzero(all_pairs)
fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharex=True)
for ax, (c, (label, values)) in zip(axes, conventions.items()):
    points = ax.scatter(s_idx, values[t_idx, s_idx], c=t_idx, cmap="viridis", s=10)
    f = fits[c, "default"]
    grid = np.linspace(1, L, 50)
    ax.plot(grid, np.log(f["alpha"]) + f["lambda"] * grid, color="crimson",
            label=f"α = {f['alpha']:.2f}, λ = {f['lambda']:.3f}, R² = {f['r2']:.3f}")
    ax.set(xlabel="arrival layer t + τ", ylabel=label, title=f"{label} of the residual coordinates")
    ax.legend()
fig.colorbar(points, ax=axes, label="departure layer t")
plt.show()

# %% [markdown]
# **What to notice.** Points of one arrival layer (one column) nearly coincide whatever their departure layer
# (their colour), so the variance is close to a function of t + τ alone (arrival R² printed above). Whether a
# straight line in t + τ fits as well is what R² says; the last layer and the first layers bend away from the
# line in many models (the paper's "last-layer anomaly"), and the table shows how much α and λ move when they
# are left out. λ is per layer: SmolLM2 has 30 layers, GPT-2 medium 24, so λL is the comparable total growth.
#
# ## Noise PDF of one coordinate
#
# The coordinate along the largest singular direction of the arrival layer, standardized, from the departure
# layer t = `t_pdf`, for several τ, against the standard normal density (log scale shows the tails).

# %%
u_top = lambda layer: int(np.argmax(S[layer]))  # aligned column of the largest sigma at that layer
taus = [tau for tau in pdf_taus if t_pdf + tau <= L]
fig, axes = plt.subplots(1, len(taus), figsize=(4 * len(taus), 3.5), sharey=True)
grid = np.linspace(-6, 6, 200)
for ax, tau in zip(np.atleast_1d(axes), taus):
    w = residual_coordinates(Y, S, t_pdf, tau)[:, u_top(t_pdf + tau)]
    z = (w - w.mean()) / w.std()
    ax.hist(z, bins=60, range=(-6, 6), density=True, alpha=0.6, label="residual")
    ax.plot(grid, norm.pdf(grid), color="crimson", label="N(0, 1)")
    kurt = float(np.mean(z ** 4) - 3)
    ax.set(yscale="log", ylim=(1e-4, 1), xlabel="standardized residual", title=f"t = {t_pdf}, τ = {tau}: κ = {kurt:.2f}")
np.atleast_1d(axes)[0].legend()
plt.show()

# %% [markdown]
# **What to notice.** The bulk follows the Gaussian; the excess kurtosis κ in each title measures the tails.
#
# ## Variance per coordinate over layers
#
# For τ = 1, the variance of every residual coordinate (aligned singular basis) against the arrival layer:
# grey lines are single coordinates, the thick line their mean, the dashed line the fitted law.

# %%
var_tau1 = np.array([st.var[t, t + 1] for t in layers[:-1]])  # (L-1, k) arrival layers 2..L
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.plot(layers[1:], var_tau1, color="grey", alpha=0.05, lw=0.5)
ax.plot(layers[1:], var_tau1.mean(1), color="black", lw=2, label="mean over coordinates")
ax.plot(layers[1:], fit_lm["alpha"] * np.exp(fit_lm["lambda"] * layers[1:]), "--", color="crimson",
        label="α e^(λ(t+τ)), ln(mean) fit")
ax.set(yscale="log", xlabel="arrival layer t + 1", ylabel="residual variance", title=f"Per-coordinate residual variance, τ = 1, {model}")
ax.legend()
plt.show()
spread = np.log10(np.percentile(var_tau1, 95, axis=1) / np.percentile(var_tau1, 5, axis=1))
print(f"ratio of the 95th to the 5th percentile of the coordinates' variances: 10^{spread.min():.1f} .. 10^{spread.max():.1f} "
      f"over the arrival layers")

# %% [markdown]
# **What to notice.** Eq. 2 says every coordinate has the same variance. The width of the grey band (printed
# above in decades) says how far from isotropic the residual is. The mean over coordinates is what the
# exponential law describes, and what the isotropic noise of the Langevin model uses.
#
# ## Residual correlations
#
# The correlation matrix of the residual coordinates (the `n_corr` largest singular directions of the arrival
# layer) for t = `t_pdf`, τ = 1. Eq. 2 says it is the identity. The raw-coordinate residual comes straight from
# `lotlib.lines_of_thought.extrapolation.residuals` (Eq. 1), a check that the fast coordinates above are the same residual.

# %%
w_sing = residual_coordinates(Y, S, t_pdf, 1).astype(np.float64)
w_raw = residuals(X, U, S, t_pdf, 1)
consistency = np.abs(w_raw @ U[t_pdf + 1] - w_sing).max() / np.abs(w_sing).max()
top = np.argsort(S[t_pdf + 1])[::-1][:n_corr]
C = np.corrcoef(w_sing[:, top], rowvar=False)
fig, ax = plt.subplots(figsize=(5.5, 4.5))
image = ax.imshow(C, cmap="RdBu_r", vmin=-1, vmax=1)
fig.colorbar(image, ax=ax)
ax.set(title=f"Residual correlations, t = {t_pdf}, τ = 1, top {n_corr} directions", xlabel="coordinate", ylabel="coordinate")
plt.show()
offdiag_top = mean_abs_offdiagonal(w_sing[:, top])
offdiag_all = mean_abs_offdiagonal(w_sing)
offdiag_raw = mean_abs_offdiagonal(w_raw)
offdiag_null = float(np.sqrt(2 / (np.pi * N_s)))
print(f"fast residual coordinates vs Eq. 1 residual mapped to U(t+1): max relative difference {consistency:.1e}")
print(f"mean |off-diagonal correlation|: top {n_corr} directions {offdiag_top:.3f}, all {k} directions {offdiag_all:.3f}, "
      f"raw coordinates {offdiag_raw:.3f}; independent coordinates would give {offdiag_null:.3f}")

# %% [markdown]
# **What to notice.** The matrix is dominated by its diagonal; what remains sits mostly next to it, between
# directions of neighbouring singular values, which mix from one layer to the next. The mean absolute
# off-diagonal correlation is printed against what independent coordinates would give at this N_s (the
# singular-basis value is again held down by construction: the uncentered coordinates of one layer are
# orthogonal; the raw coordinates are the fair test).
#
# **This model vs GPT-2.** SmolLM2 normalizes with RMSNorm (no centering) and has 30 narrow layers (D = 576)
# against GPT-2 medium's 24 layers of D = 1024 with LayerNorm; α is in the units of each model's residual
# stream and is not comparable across models, λ only per layer (see λL above).
#
# ## Does the claim hold on this model?

# %%
z_all = float(np.mean(st.mean_abs_z()[all_pairs]))
z_test, z_basis = (float(np.mean(raw.mean_abs_z()[all_pairs])), "raw coordinates") if raw is not None else (z_all, "singular basis")
kurt_late = float(np.mean(st.mean_abs_kurtosis()[late_pairs]))
kurt_early = float(np.mean(st.mean_abs_kurtosis()[early_pairs]))
print(f"zero mean: mean |mu/sigma| = {z_test:.4f} in {z_basis} (Gaussian reference {null_z:.4f}) -> "
      f"{'holds' if z_test < 0.05 else 'differs'} (a mean offset of a few percent of a standard deviation at most)")
print(f"kurtosis ~ 0 except early layers: mean |excess kurtosis| {kurt_late:.2f} for t >= {early_layers}, "
      f"{kurt_early:.2f} before (Gaussian reference {null_kurt:.3f}) -> {'holds' if kurt_late < 0.5 else 'differs: heavier tails'}")
print(f"variance depends on t+tau only: arrival R2 = {fit_lm['arrival_r2']:.3f} (ln mean) / {fit_ml['arrival_r2']:.3f} (mean ln)")
print(f"exponential law: R2 = {fit_lm['r2']:.3f} / {fit_ml['r2']:.3f}; alpha = {fit_lm['alpha']:.2f} / {fit_ml['alpha']:.2f} "
      f"(paper 0.64), lambda = {fit_lm['lambda']:.3f} / {fit_ml['lambda']:.3f} (paper 0.18)")
print(f"diagonal correlation matrix: mean |off-diagonal| = {offdiag_raw:.3f} in raw coordinates, {offdiag_all:.3f} in the "
      f"singular basis (independent: {offdiag_null:.3f})")

# %%
record({
    "n_s": N_s, "n_layers": L, "d_model": D, "n_pairs": int(all_pairs.sum()),
    "mean_abs_z": z_all, "mean_abs_z_gaussian": null_z,
    "mean_abs_z_raw": float(np.mean(raw.mean_abs_z()[all_pairs])) if raw is not None else None,
    "mean_abs_kurtosis_late": kurt_late, "mean_abs_kurtosis_early": kurt_early, "mean_abs_kurtosis_gaussian": null_kurt,
    "mean_abs_kurtosis_late_raw": float(np.mean(raw.mean_abs_kurtosis()[late_pairs])) if raw is not None else None,
    "early_layers": early_layers, "fit_first": fit_first, "fit_last": fit_last,
    "alpha_log_mean": fit_lm["alpha"], "lambda_log_mean": fit_lm["lambda"], "r2_log_mean": fit_lm["r2"],
    "arrival_r2_log_mean": fit_lm["arrival_r2"],
    "alpha_mean_log": fit_ml["alpha"], "lambda_mean_log": fit_ml["lambda"], "r2_mean_log": fit_ml["r2"],
    "arrival_r2_mean_log": fit_ml["arrival_r2"],
    "lambda_times_L_log_mean": fit_lm["lambda"] * L, "lambda_times_L_mean_log": fit_ml["lambda"] * L,
    **{f"{name}_{c}_{s}": f[name] for (c, s), f in fits.items() if s != "default" for name in ("alpha", "lambda")},
    "variance_spread_decades_max": float(spread.max()),
    "mean_abs_offdiag_corr": offdiag_all, "mean_abs_offdiag_corr_top": offdiag_top,
    "mean_abs_offdiag_corr_raw": offdiag_raw, "mean_abs_offdiag_corr_independent": offdiag_null,
    "residual_consistency": float(consistency),
})
