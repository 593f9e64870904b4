"""Chapter B3's figures: Eq. 1's extrapolations, their errors and the SVMs that tell them from the truth."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def extrapolation_grid(study, starts, taus, pilots: np.ndarray, title: str) -> None:
    """B3: true x(t+tau) and Eq. 1's x~(t, tau) of `pilots` on u2, u3 of the arrival layer, one panel per
    start t of `starts` (rows) and tau of `taus` (columns) of a `HeldOutBases` `study`."""
    fig, axes = plt.subplots(
        len(starts),
        len(taus),
        figsize=(3.2 * len(taus), 3.0 * len(starts)),
        squeeze=False,
        constrained_layout=True,
    )
    for (row, t), (col, tau) in itertools.product(enumerate(starts), enumerate(taus)):
        ax = axes[row, col]
        if t + tau > study.L:
            ax.axis("off")
            text = f"t + τ = {t + tau} > L"
            ax.text(0.5, 0.5, text, ha="center", color="grey", transform=ax.transAxes)
            continue
        plane = study.directions(t + tau, slice(1, 3))
        true = study.states(pilots, t + tau) @ plane
        guess = study.extrapolate(pilots, t, tau) @ plane
        ax.scatter(*true.T, s=3, alpha=0.5, label="true x(t+τ)")
        ax.scatter(*guess.T, s=3, alpha=0.5, label="extrapolated x̃(t,τ)")
        ax.set_title(f"t = {t}, τ = {tau}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set(
            ylabel="u3" if col == 0 else "",
            xlabel="u2" if row == len(starts) - 1 else "",
        )
    axes[0, 0].legend(fontsize=7, markerscale=3)
    fig.suptitle(title)
    plt.show()


def prediction_error_figure(errors, n_boot: int, seed: int, title: str) -> None:
    """B3: each prediction's distance to the true state over the mean state norm against tau, from
    `PredictionErrors`, with 95% bootstrap bands over held-out pilots."""
    y = "‖error‖ / mean ‖x(t+τ)‖"
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "τ": np.repeat(errors.taus, d.shape[1]),
                    "prediction": name,
                    y: (d / errors.state_norm[:, None]).ravel(),
                }
            )
            for name, d in errors.distances.items()
        ]
    )
    _, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(
        frame,
        x="τ",
        y=y,
        hue="prediction",
        marker="o",
        errorbar=("ci", 95),
        n_boot=n_boot,
        seed=seed,
        ax=ax,
    )
    ax.set(title=title)
    plt.show()


def svm_figure(curves: dict, true_vs_true: np.ndarray, taus, title: str) -> None:
    """B3: SVM accuracy against tau for each curve of `curves` (`svm_by_tau`), the mean of `true_vs_true`
    (grey line) and the paper's two values for GPT-2 medium (crosses)."""
    _, ax = plt.subplots(figsize=(7, 4))
    frame = pd.DataFrame(curves, index=pd.Index(taus, name="τ"))
    sns.lineplot(frame, markers=True, dashes=False, ax=ax)
    ax.axhline(
        true_vs_true.mean(), color="grey", ls=":", label="true vs true, other pilots"
    )
    ax.plot([1, 10], [0.505, 0.60], "kx", ms=9, mew=2, label="paper (GPT-2 medium)")
    ax.set(xlabel="τ", ylabel="5-fold accuracy", ylim=(0.3, 1.02), title=title)
    ax.legend(fontsize=8, loc="center right")
    plt.show()


def svm_protocols_figure(paper: dict, verdicts: dict, tau_max: int, title: str) -> None:
    """B3: SVM accuracy at tau = 1 and `tau_max` with 95% intervals by the paper's protocol in its two readings
    (`paper`: `extrapolation.same_pilot_svm` with bases from all pilots, keys `paper_svm_tau{1,10}`, and from
    the training pilots, the same keys ending in `_training_bases`) and the book's held-out test with its
    cloud (`verdicts`, `extrapolation.repeated_svm`), chance (grey) and the paper's two values (crosses)."""
    found = {
        **{
            f"paper's protocol, bases from {pilots} pilots": [
                paper[f"paper_svm_{w}{suffix}"] for w in ("tau1", "tau10")
            ]
            for pilots, suffix in (("all", ""), ("training", "_training_bases"))
        },
        "book: held-out pilots": [
            verdicts[f"svm_extrapolated_{w}"] for w in ("tau1", "tau_max")
        ],
        "book: structureless cloud": [
            verdicts[f"svm_cloud_{w}"] for w in ("tau1", "tau_max")
        ],
    }
    _, ax = plt.subplots(figsize=(7, 4))
    shifts = np.linspace(-0.3, 0.3, len(found))
    for shift, (label, estimates) in zip(shifts, found.items()):
        y = np.array([e.value for e in estimates])
        spread = np.array([[e.value - e.lo, e.hi - e.value] for e in estimates]).T
        x = np.array([1.0, tau_max]) + shift
        ax.errorbar(x, y, yerr=spread, fmt="o", capsize=4, label=label)
    ax.axhline(0.5, color="grey", ls=":", label="chance")
    ax.plot([1, 10], [0.505, 0.60], "kx", ms=9, mew=2, label="paper (GPT-2 medium)")
    ax.set(xlabel="τ", ylabel="test accuracy", xticks=sorted({1, tau_max, 10}))
    ax.set(title=title)
    ax.legend(fontsize=8)
    plt.show()
