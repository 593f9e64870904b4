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
# # B3 · Linear extrapolation across layers
#
# **What you will see.** Take the ensemble of pilots at layer t, carry every state to layer t + τ with one
# linear map built from the two layers' singular bases, and compare the result with where the states
# really are at t + τ. A grid of scatter plots in the plane of the arrival layer's second and third
# singular directions shows both clouds for several starting layers and jumps τ. Then two numbers answer
# what the plots can only suggest: how far each extrapolated state lands from its own true state, and how
# well a linear classifier tells the extrapolated ensemble from the true one.
#
# **Why it matters.** "Lines of Thought in Large Language Models" (Sarfati et al., ICLR 2025, Eq. 1,
# Fig. 3) extrapolates with
#
# $$\tilde x(t, \tau) = U(t+\tau)\,\Lambda(t, \tau)\,U(t)^\top x(t), \qquad
#   \Lambda(t, \tau) = \Sigma(t+\tau)\,\Sigma(t)^{-1},$$
#
# and calls what it misses, w = x(t+τ) − x̃(t, τ), noise (chapter B4 studies it and chapter B5 builds a
# Langevin equation on it). The figures in the paper only show the match. The reviewers asked for a
# measure, and the authors answered in the OpenReview discussion: a linear SVM trained to separate
# extrapolated from true ensembles scores about 50–51% at τ = 1 and about 60% at τ = 10 for GPT-2 medium.
#
# **How it is computed.** Trajectories as in chapter B1: Walden in pseudo-sentences of N_k tokens,
# x(t) is block t's output at the pilot (the last token), never the final norm. The paper leaves these
# choices open, and they are made here:
#
# - **Bases.** Uncentered thin SVD of each layer's ensemble. Singular vectors are re-ordered and re-signed
#   across layers by an optimal assignment between neighbouring layers (`lotlib.lines_of_thought.ensemble.align_bases`),
#   starting from the middle layer as in chapter B2, so that column i means the same direction at t and
#   t + τ. Only the layers from L/2 on are used.
# - **Rank.** Eq. 1 uses all min(N, D) aligned columns unless the `rank` parameter says otherwise (then the
#   `rank` directions with the largest σ at the starting layer). The bases need many more fit pilots than
#   D: with fewer, they are incomplete and every extrapolated state lies in a subspace the true states
#   leave (a linear classifier sees that at once); with a fit half of about D, the smallest singular values
#   are noise that Σ(t)⁻¹ amplifies, and single-state errors explode. On SmolLM2 the errors settle once the
#   fit half holds 1.5D pilots, so run with at least 3D pilots (the quick book does; the full book uses all
#   of Walden).
# - **Which pilots.** The bases are fit on a random half of the pilots (the *fit* half) and every figure and
#   score below uses the *held-out* half, so the extrapolation is a genuine prediction. Why this matters
#   is shown with numbers in the SVM section.
# - **The classifier.** `sklearn` LinearSVC (primal solver, C = `svm_c`: the reviewers' metric does not give
#   C, and C = 1 takes minutes per fit on ensembles this alike for nearly the same accuracy) on
#   standardized features, 5-fold cross-validated accuracy on a balanced set: n pilots' true x(t+τ)
#   against the same n pilots' x̃(t, τ), a pilot's two versions always in the same fold. The features are
#   all D coordinates unless `svm_top_k` asks for the coordinates on the arrival layer's top-k singular
#   directions. The randomness of this metric is in the method (which pilots fit the bases, which are
#   scored, the folds), so it is repeated `n_seeds` times with new splits and reported as the mean with a
#   t-interval over repetitions.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
device: str = (
    "auto"  # where the model runs: auto (a GPU when there is one), cpu, cuda, mps
)
dtype: "Literal['float32', 'bfloat16', 'float16']" = "float32"  # the model's weights
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "Pilots | None" = None  # cap on pseudo-sentences (None: all of Walden; at least 2D for complete bases)
bos: "bool | None" = (
    None  # start every pseudo-sentence with BOS (None: as the model's tokenizer does)
)
rank: "int | None" = None  # columns used in Eq. 1 (None: all min(N, D))
taus: list[int] = [1, 2, 4, 8]  # jumps drawn in the grid
n_rows: int = 3  # starting layers drawn in the grid, from L/2 on
n_plot: int = 400  # pilots drawn per panel
tau_max: int = (
    10  # the errors and the SVM run tau = 1..tau_max (fewer if the model is shallower)
)
n_starts: int = 2  # starting layers the SVM verdicts are averaged over, from L/2 on
n_svm: int = 1000  # pilots per class in the SVM (a subsample of the held-out half)
svm_top_k: "int | None" = None  # SVM features: None = all D coordinates, k = the arrival layer's top-k singular coordinates
svm_c: float = 0.1  # the SVM's regularization C
n_seeds: int = 5  # repetitions of the SVM verdicts, each with its own fit / held-out split, subsample and folds
seed: int = 0  # the first repetition's split (seed + r for repetition r), the subsamples and the bootstrap
n_boot: int = 2000  # bootstrap resamples of held-out pilots for the error ratios

# %%

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from tqdm.auto import tqdm

import lotlib
from lotlib import plots
from lotlib.book.report import chapter_outcomes
from lotlib.book.summary import record
from lotlib.intervals import bootstrap, over_seeds
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd, gaussian_cloud
from lotlib.lines_of_thought.extrapolation import extrapolate, svm_accuracy

plots.apply_theme()
lm, corpus, X = lotlib.walden_trajectories(
    model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype
)  # X: (N_s, L+1, D)
N_s, T, D = X.shape
L = T - 1
first = L // 2
Xs = X[:, first:].astype(np.float64)  # layers first..L; layer t is Xs[:, t - first]
tau_max = min(tau_max, L - first)


def split(r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Repetition r: a random half of the pilots fits the bases of layers first..L (aligned from the middle
    layer); returns the fit and held-out pilots and the aligned U, S."""
    order = np.random.default_rng(seed + r).permutation(N_s)
    fit, held = np.sort(order[: N_s // 2]), np.sort(order[N_s // 2 :])
    return (fit, held, *align_bases(*ensemble_svd(Xs[fit]), reference=0))


fit, held, U, S = split(0)
rng = np.random.default_rng(seed)
print(
    f"{lm!r}\n{corpus!r}: trajectories {X.shape}; bases of layers {first}..{L} fit on {len(fit)} pilots, "
    f"rank {S.shape[1] if rank is None else rank}; {len(held)} held-out pilots"
)
if len(fit) < 1.5 * D:
    print(
        f"warning: {len(fit)} fit pilots for D = {D}: below 1.5D the bases are incomplete or ill-conditioned, "
        f"and the numbers below measure that more than Eq. 1; use n_s >= 3D"
    )

# %% [markdown]
# ## True and extrapolated ensembles
#
# Each panel starts at layer t (row) and jumps τ layers (column). Blue: the held-out pilots' true states
# x(t+τ); orange: their extrapolations x̃(t, τ); both projected on u2 and u3 of the arrival layer t + τ
# (its second and third singular directions by σ; u1, the ensemble's common direction, mostly carries
# the norm).

# %%
starts = np.linspace(first, L, n_rows + 1)[:-1].round().astype(int)
drawn = rng.choice(held, size=min(n_plot, len(held)), replace=False)


def plane(t: int) -> np.ndarray:
    """u2 and u3 of layer t (by decreasing sigma), `(D, 2)`."""
    r = t - first
    return U[r][:, np.argsort(S[r])[::-1][1:3]]


fig, axes = plt.subplots(
    len(starts),
    len(taus),
    figsize=(3.2 * len(taus), 3.0 * len(starts)),
    squeeze=False,
    constrained_layout=True,
)
for row, t in enumerate(starts):
    for col, tau in enumerate(taus):
        ax = axes[row, col]
        if t + tau > L:
            ax.axis("off")
            ax.text(
                0.5,
                0.5,
                f"t + τ = {t + tau} > L",
                ha="center",
                transform=ax.transAxes,
                color="grey",
            )
            continue
        P = plane(t + tau)
        true = Xs[drawn, t + tau - first] @ P
        guess = extrapolate(Xs[drawn], U, S, t - first, tau, rank) @ P
        ax.scatter(*true.T, s=3, alpha=0.5, label="true x(t+τ)")
        ax.scatter(*guess.T, s=3, alpha=0.5, label="extrapolated x̃(t,τ)")
        ax.set_title(f"t = {t}, τ = {tau}", fontsize=9)
        ax.tick_params(labelsize=7)
        if col == 0:
            ax.set_ylabel("u3")
        if row == len(starts) - 1:
            ax.set_xlabel("u2")
axes[0, 0].legend(fontsize=7, markerscale=3)
fig.suptitle(
    f"True vs extrapolated ensembles on (u2, u3) of the arrival layer, {model}, held-out pilots"
)
plt.show()

# %% [markdown]
# **What to notice.** Look at where the orange cloud covers the blue one and where the two only share their
# spread. Eq. 1 is built to carry the ensemble's second moments: on the pilots that fit the bases, the
# extrapolated ensemble has exactly the arrival layer's singular directions and singular values (see the
# SVM section). It has no say over finer structure, such as clusters and tails, and the grid shows how
# much of that survives as the start moves towards the last layers and τ grows.
#
# ## How far does a single extrapolated state land?
#
# For each held-out pilot, starting at the middle layer, the distance ‖x(t+τ) − prediction‖ for three
# predictions: **Eq. 1**; the **naive** "nothing moves", x̂(t+τ) = x(t); and a **pilot-blind** prediction,
# the fit pilots' mean state at t + τ, which knows where the ensemble goes but nothing of the pilot. The
# curves are the mean distance relative to the mean ‖x(t+τ)‖, with 95% bootstrap bands over held-out pilots.

# %%
tau_range = np.arange(1, tau_max + 1)
distances = {"Eq. 1": [], "naive x(t)": [], "pilot-blind: mean of x(t+τ)": []}
for tau in tau_range:
    true = Xs[held, tau]
    distances["Eq. 1"].append(
        np.linalg.norm(true - extrapolate(Xs[held], U, S, 0, tau, rank), axis=1)
    )
    distances["naive x(t)"].append(np.linalg.norm(true - Xs[held, 0], axis=1))
    distances["pilot-blind: mean of x(t+τ)"].append(
        np.linalg.norm(true - Xs[fit, tau].mean(0), axis=1)
    )
distances = {
    name: np.stack(d) for name, d in distances.items()
}  # each (tau_max, n_held)
state_norm = np.linalg.norm(Xs[held][:, tau_range], axis=-1).mean(0)  # (tau_max,)
errors = pd.concat(
    [
        pd.DataFrame(
            {
                "τ": np.repeat(tau_range, len(held)),
                "prediction": name,
                "‖error‖ / mean ‖x(t+τ)‖": (d / state_norm[:, None]).ravel(),
            }
        )
        for name, d in distances.items()
    ]
)
fig, ax = plt.subplots(figsize=(7, 4))
sns.lineplot(
    errors,
    x="τ",
    y="‖error‖ / mean ‖x(t+τ)‖",
    hue="prediction",
    marker="o",
    errorbar=("ci", 95),
    n_boot=n_boot,
    seed=seed,
    ax=ax,
)
ax.set(
    title=f"Single-state error from t = {first}, {model}, {len(held)} held-out pilots"
)
plt.show()


def error_ratio(name: str, tau: int):
    """Mean distance of prediction `name` over the naive one's at jump `tau`, bootstrapped over held-out pilots."""
    a, b = distances[name][tau - 1], distances["naive x(t)"][tau - 1]
    return bootstrap(
        lambda i: a[i].mean() / b[i].mean(),
        len(held),
        unit="held-out pilots",
        n_boot=n_boot,
        seed=seed,
    )


ratios = {
    (name, tau): error_ratio(name, tau)
    for name in ("Eq. 1", "pilot-blind: mean of x(t+τ)")
    for tau in (1, tau_max)
}
for (name, tau), estimate in ratios.items():
    print(f"{name}: mean error / naive mean error at tau = {tau}: {estimate:.3f}")

# %% [markdown]
# **What to notice.** One block moves a state by a fraction of its norm, so the naive prediction is hard to
# beat at τ = 1: compare the Eq. 1 ratio printed above with 1. Far from the start the naive prediction
# degrades, and the question becomes whether Eq. 1 beats the pilot-blind mean: if it does not, the
# extrapolation has carried the ensemble (where the states go on average) but not the pilots. Eq. 1
# predicts the **distribution** of states, and what it misses is the noise of chapter B4; this is how
# large that noise is compared with the motion itself.
#
# ## Can a linear classifier tell them apart?
#
# The reviewers' metric: 5-fold cross-validated accuracy of a linear SVM separating true x(t+τ) from
# extrapolated x̃(t, τ), for τ = 1..τ_max, starting at the middle layer (first repetition). Three
# references frame it: the naive predictor x(t) in place of x̃ (the ensemble really moves); two sets of
# true states from different pilots (what "indistinguishable" scores on these data); and a **structureless
# cloud**: Gaussian points with the arrival layer's mean and covariance (from the fit half), which knows
# nothing of the pilots or of the dynamics. A linear classifier sees differences of means along some
# direction; any prediction that gets the arrival ensemble's first two moments right is, to it, as good
# as Eq. 1, and the cloud measures what that alone scores.

# %%
test = np.sort(rng.choice(held, size=min(n_svm, len(held)), replace=False))
inside = np.sort(rng.choice(fit, size=min(n_svm, len(fit)), replace=False))


def features(Y: np.ndarray, t: int, U: np.ndarray, S: np.ndarray) -> np.ndarray:
    """What the SVM sees of states `Y` at layer t: all D coordinates, or the top-k singular coordinates."""
    if svm_top_k is None:
        return Y
    r = t - first
    return Y @ U[r][:, np.argsort(S[r])[::-1][:svm_top_k]]


def accuracy(
    pilots: np.ndarray,
    t: int,
    tau: int,
    U: np.ndarray,
    S: np.ndarray,
    against: str,
    fit: np.ndarray | None = None,
    r: int = 0,
) -> float:
    """SVM accuracy of the true states of `pilots` at t + tau against `against`: "Eq. 1", "naive", or
    "cloud" (a Gaussian cloud with the mean and covariance of the `fit` pilots at t + tau)."""
    true = Xs[pilots, t + tau - first]
    if against == "Eq. 1":
        other = extrapolate(Xs[pilots], U, S, t - first, tau, rank)
    elif against == "naive":
        other = Xs[pilots, t - first]
    else:
        other = gaussian_cloud(
            Xs[fit, t + tau - first], n=len(pilots), seed=seed + r, correlated=True
        )
    return svm_accuracy(
        features(true, t + tau, U, S),
        features(other, t + tau, U, S),
        seed=seed + r,
        C=svm_c,
    )


curves = {
    name: np.array(
        [
            accuracy(test, first, tau, U, S, against, fit)
            for tau in tqdm(tau_range, desc=name)
        ]
    )
    for name, against in (
        ("Eq. 1", "Eq. 1"),
        ("structureless cloud", "cloud"),
        ("naive x(t)", "naive"),
    )
}
shuffled = rng.permutation(
    test
)  # two random halves (test is sorted, and Walden drifts along the book)
half = len(test) // 2
true_vs_true = np.array(
    [
        svm_accuracy(
            Xs[shuffled[:half], tau],
            Xs[shuffled[half : 2 * half], tau],
            seed=seed,
            C=svm_c,
        )
        for tau in (1, tau_max)
    ]
)
fig, ax = plt.subplots(figsize=(7, 4))
sns.lineplot(
    pd.DataFrame(curves, index=pd.Index(tau_range, name="τ")),
    markers=True,
    dashes=False,
    ax=ax,
)
ax.axhline(
    true_vs_true.mean(), color="grey", ls=":", label="true vs true, other pilots"
)
ax.plot([1, 10], [0.505, 0.60], "kx", ms=9, mew=2, label="paper (GPT-2 medium)")
ax.set(
    xlabel="τ",
    ylabel="5-fold accuracy",
    ylim=(0.3, 1.02),
    title=f"Linear SVM: true vs predicted ensemble from t = {first}, {len(test)} held-out pilots per class, {model}",
)
ax.legend(fontsize=8, loc="center right")
plt.show()
seen = (
    "all D coordinates"
    if svm_top_k is None
    else f"the top {svm_top_k} singular coordinates of the arrival layer"
)
print(f"SVM features: {seen}, standardized; C = {svm_c}; {len(test)} pilots per class")
for name, curve in curves.items():
    print(f"{name}: {curve[0]:.3f} at tau = 1, {curve[-1]:.3f} at tau = {tau_max}")
print(f"true vs true (other pilots): {true_vs_true[0]:.3f}, {true_vs_true[1]:.3f}")

# %% [markdown]
# **What to notice.** The naive predictor is the easy case: the ensemble really moves, and a linear boundary
# sees it. The paper's point is that the extrapolated ensemble is much harder to separate; compare its curve
# with the grey line (two truly indistinguishable sets), with the structureless cloud, and with the paper's
# two values (crosses), and note whether the accuracy grows with τ as the paper reports.
#
# **The verdicts, repeated.** The accuracies that carry a verdict are averaged over `n_starts` starting
# layers from L/2 on, at τ = 1 and τ = τ_max, and the whole measurement is repeated `n_seeds` times, each
# time with a new fit / held-out split (new bases), a new subsample of scored pilots and new folds; the
# interval is a t-interval over repetitions. The structureless cloud is repeated the same way: it is the
# claim-specific null of every SVM claim.

# %%
svm_starts = np.unique(np.linspace(first, L - tau_max, n_starts).round().astype(int))
repeated = {
    "Eq. 1": [],
    "cloud": [],
}  # per repetition: (len(svm_starts), 2) accuracies at tau = 1, tau_max
for r in tqdm(range(n_seeds), desc="SVM repetitions"):
    fit_r, held_r, U_r, S_r = (fit, held, U, S) if r == 0 else split(r)
    scored = np.sort(
        np.random.default_rng(seed + r).choice(
            held_r, size=min(n_svm, len(held_r)), replace=False
        )
    )
    for against in repeated:
        repeated[against].append(
            [
                [
                    accuracy(scored, t, tau, U_r, S_r, against, fit_r, r)
                    for tau in (1, tau_max)
                ]
                for t in svm_starts
            ]
        )
repeated = {
    name: np.array(a).mean(1) for name, a in repeated.items()
}  # (n_seeds, 2): mean over starts
svm = {
    name: {
        "tau1": over_seeds(a[:, 0], unit="repetitions"),
        "tau_max": over_seeds(a[:, 1], unit="repetitions"),
        "growth": over_seeds(a[:, 1] - a[:, 0], unit="repetitions"),
    }
    for name, a in repeated.items()
}
print(f"averaged over starting layers {svm_starts.tolist()}, {n_seeds} repetitions:")
for name, found in svm.items():
    print(
        f"  {name}: {found['tau1']:.3f} at tau = 1; {found['tau_max']:.3f} at tau = {tau_max}; "
        f"growth {found['growth']:.3f}"
    )

# %% [markdown]
# **What to notice.** Compare the Eq. 1 and cloud rows: where they agree, the SVM cannot tell the
# extrapolation from a prediction that only knows the arrival layer's mean and covariance.
#
# **Held-out or not: a trap in this metric.** If the SVM is trained and tested on the pilots whose SVD
# defined the bases, Eq. 1 reproduces their ensemble's second-moment matrix *exactly*:
# x̃ stacks to V(t) Σ(t+τ) U(t+τ)ᵀ, which has the same singular values and directions as the true
# V(t+τ) Σ(t+τ) U(t+τ)ᵀ. A linear classifier then has almost nothing to learn, and cross-validation
# turns that into a score *below* chance: whatever the training folds lean towards, the held-out fold
# leans the other way, because the whole ensemble balances. The same SVM on pilots taken from the fit half:

# %%
acc_inside = np.array(
    [accuracy(inside, first, tau, U, S, "Eq. 1") for tau in (1, tau_max)]
)
print(
    f"in-sample pilots ({len(inside)} of the {len(fit)} that fit the bases), t = {first}: accuracy "
    f"{acc_inside[0]:.3f} at tau = 1, {acc_inside[-1]:.3f} at tau = {tau_max} "
    f"(held-out: {curves['Eq. 1'][0]:.3f}, {curves['Eq. 1'][-1]:.3f})"
)

# %% [markdown]
# **What to notice.** Compare the in-sample and held-out accuracies printed above. An in-sample score at
# or below 50% would read as "indistinguishable", but it comes from how the scores are computed, not
# from what the model does. If the paper's 50–51% was computed on the pilots that defined the bases, it
# may owe part of its closeness to chance to this effect. The held-out numbers are the ones we report.
#
# ## Does the claim hold on this model?
#
# Five *findings*. Three are the reviewers' SVM numbers: the accuracy at τ = 1 (paper ≈ 0.505), at τ = 10
# (≈ 0.60) and its growth between the two (≈ 0.095), each the mean over starting layers and repetitions
# with a t-interval over repetitions, each facing the pilot-blind Gaussian cloud and the untrained model.
# Two are about single states: Eq. 1's mean error over the naive one's at τ = 1 and at τ = τ_max (below 1
# when Eq. 1 predicts better), facing the pilot-blind mean.
#
# **What the growth measures.** A first version of this chapter fit the bases on fewer pilots than D. Every
# extrapolated state then lay in the fit pilots' span, the held-out true states did not, and the classifier
# separated on that: SmolLM2's accuracy *fell* with τ while random weights "grew" by the paper's amount,
# inside the noise of 100 pilots per class. With complete, well-conditioned bases (this version, all of
# Walden), the accuracy on SmolLM2 is flat in τ, a few points above what a Gaussian cloud with the arrival
# layer's mean and covariance reaches blind to the pilots: Eq. 1 is already as distinguishable one layer on
# as ten. On random weights it rises, because random blocks add nearly independent updates, the ensemble
# blurs layer after layer, and a linear map of the starting ensemble keeps its old shape. A growing SVM
# accuracy is the signature of that diffusion, which SmolLM2's second half does not show in this measure;
# so the growth *differs* on the trained model for a reason, and passing it on random weights says that
# they diffuse, not that they reproduce the paper. With few pilots per class (the quick book) the
# repetitions spread too widely to tell a growth of 0.1 from none.
#
# When the τ = 10 accuracy passes, it is **not diagnostic** if the cloud passes too: a linear SVM sees
# differences of means along some direction, and any prediction with the arrival ensemble's mean and
# covariance scores about the same, whatever it knows of the pilots. When Eq. 1's error ratio at τ = τ_max
# passes, it is **not diagnostic** either if the pilot-blind mean passes: ten layers on, the naive prediction
# has fallen so far behind that predicting every pilot at the ensemble's mean beats it too, so beating it
# says that the ensemble moved, not that Eq. 1 followed each pilot.

# %%
values = {
    "n_s": N_s,
    "n_layers": L,
    "d_model": D,
    "first_layer": first,
    "rank": S.shape[1] if rank is None else rank,
    "n_fit": len(fit),
    "n_svm": len(test),
    "svm_features": seen,
    "svm_c": svm_c,
    "svm_starts": svm_starts,
    "n_seeds": n_seeds,
    "tau_max": tau_max,
    "svm_extrapolated_tau1": svm["Eq. 1"]["tau1"],
    "svm_extrapolated_tau_max": svm["Eq. 1"]["tau_max"],
    "svm_extrapolated_growth": svm["Eq. 1"]["growth"],
    "svm_cloud_tau1": svm["cloud"]["tau1"],
    "svm_cloud_tau_max": svm["cloud"]["tau_max"],
    "svm_cloud_growth": svm["cloud"]["growth"],
    "svm_extrapolated_middle_by_tau": curves["Eq. 1"],
    "svm_cloud_middle_by_tau": curves["structureless cloud"],
    "svm_naive_by_tau": curves["naive x(t)"],
    "svm_true_vs_true": true_vs_true.mean(),
    "svm_in_sample_tau1": acc_inside[0],
    "svm_in_sample_tau_max": acc_inside[-1],
    "relative_error_eq1_by_tau": distances["Eq. 1"].mean(1) / state_norm,
    "relative_error_naive_by_tau": distances["naive x(t)"].mean(1) / state_norm,
    "relative_error_mean_by_tau": distances["pilot-blind: mean of x(t+τ)"].mean(1)
    / state_norm,
    "error_ratio_eq1_tau1": ratios["Eq. 1", 1],
    "error_ratio_eq1_tau_max": ratios["Eq. 1", tau_max],
    "error_ratio_mean_tau1": ratios["pilot-blind: mean of x(t+τ)", 1],
    "error_ratio_mean_tau_max": ratios["pilot-blind: mean of x(t+τ)", tau_max],
}
record(values)
outcomes = chapter_outcomes("b3_extrapolation", values)
judged = outcomes.set_index("claim")["outcome"]
print(
    f"Paper (GPT-2 medium): SVM accuracy about 50-51% at tau = 1, about 60% at tau = 10."
)
print(
    f"Here ({model}, held-out pilots, {seen}, mean over starting layers {svm_starts.tolist()} and {n_seeds} "
    f"repetitions): {svm['Eq. 1']['tau1']:.3f} at tau = 1 ({judged['B3-svm-tau1']}), {svm['Eq. 1']['tau_max']:.3f} "
    f"at tau = {tau_max} ({judged['B3-svm-tau10']}), growth {svm['Eq. 1']['growth']:.3f} ({judged['B3-svm-growth']}); "
    f"the structureless cloud scores {svm['cloud']['tau1']:.3f} and {svm['cloud']['tau_max']:.3f}."
)
print(
    f"Single states: Eq. 1's mean error is {ratios['Eq. 1', 1]:.2f} times the naive one at tau = 1 "
    f"({judged['B3-eq1-vs-naive']}) and {ratios['Eq. 1', tau_max]:.2f} times at tau = {tau_max} "
    f"({judged['B3-eq1-vs-naive-far']}); the pilot-blind mean: {ratios['pilot-blind: mean of x(t+τ)', 1]:.2f} and "
    f"{ratios['pilot-blind: mean of x(t+τ)', tau_max]:.2f}."
)
outcomes
