"""Chapter B2's figures: the ensemble's spectra, the turning of its bases and the truncated next-token distributions."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def angle_maps(angles: np.ndarray, title: str) -> None:
    """B2: one L x L map per direction of the angles `(n, T, T)` (degrees) between layers t1 and t2."""
    T = angles.shape[1]
    fig, axes = plt.subplots(1, len(angles), figsize=(15, 3.8), constrained_layout=True)
    for i, ax in enumerate(axes):
        sns.heatmap(
            angles[i],
            vmin=0,
            vmax=90,
            cmap="magma",
            square=True,
            ax=ax,
            cbar=i == len(angles) - 1,
            cbar_kws={"label": "angle (degrees)"},
            xticklabels=max(1, T // 6),
            yticklabels=max(1, T // 6),
        )
        ax.invert_yaxis()
        ylabel = "layer t1" if i == 0 else None
        ax.set(title=f"u{i + 1}", xlabel="layer t2", ylabel=ylabel)
    fig.suptitle(title)
    plt.show()


def turning_table(turning) -> pd.DataFrame:
    """B2: the readings of a `Turning` (`ensemble.basis_turning`), one row per direction u_i, in degrees."""
    L = turning.angles.shape[1] - 1
    return pd.DataFrame(
        {
            f"largest rank, t = 1..{L}": turning.top,
            f"median angle t → t+1 (t = 1..{L - 1})": np.median(turning.step, axis=1),
            f"u_i({L // 2}) vs u_i({L})": turning.middle_to_last,
            "u_i(0) vs u_i(1) (embedding)": turning.embedding,
            f"u_i({L - 1}) vs u_i({L}) (last step)": turning.last_step,
        },
        index=[f"u{i + 1}" for i in range(len(turning.top))],
    ).round(1)


def spectra_figure(S: np.ndarray, title: str) -> None:
    """B2: the sorted singular values `(T, k)` of every layer on log-log axes, colored by layer."""
    from matplotlib import cm, colors

    T, k = S.shape
    index = np.arange(1, k + 1)
    spectra = pd.DataFrame(
        {
            "index i": np.tile(index, T),
            "singular value σ_i(t)": S.ravel(),
            "layer t": np.repeat(np.arange(T), k),
        }
    )
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(
        spectra,
        x="index i",
        y="singular value σ_i(t)",
        hue="layer t",
        palette="viridis",
        legend=False,
        lw=1,
        ax=ax,
    )
    ax.set(xscale="log", yscale="log", title=title)
    mappable = cm.ScalarMappable(norm=colors.Normalize(0, T - 1), cmap="viridis")
    fig.colorbar(mappable, ax=ax, label="layer t")
    plt.show()


PROTOCOL_LABELS = {
    "last layer": "last layer only",
    "every layer": "every layer, propagated",
}


def truncation_table(found: dict, random: dict, top: int = 5) -> pd.DataFrame:
    """B2: the authors' numbers per protocol (`found`: name -> `truncation.truncation_criteria`), for the
    random-directions null (`random`) and as the paper gives them for GPT-2 medium."""
    paper = {
        "kl_drop": "≈ 0.1",
        "kl_quarter_d": "≈ 0.5 nats",
        "overlap_quarter_d": "≈ 2.5 of 5",
        "k0_over_d": "0.25",
    }
    columns = {**found, "random directions (null)": random}
    table = pd.DataFrame(
        {
            **{n: {k: format(v) for k, v in c.items()} for n, c in columns.items()},
            "paper (GPT-2 medium)": paper,
        }
    )
    table.index = [
        "KL(D/4) / KL(1)",
        "KL at D/4 (nats)",
        f"top-{top} overlap at D/4",
        "K0 / D (KL down to a tenth)",
    ]
    return table


def truncation_bands(results: dict, d: int, model: str) -> None:
    """B2: mean KL(p_K || p) and top-`top` overlap against K (K = d left out) for each protocol of each
    `truncation.ResampledTruncation` of `results` (label -> result; a result shared by two labels is drawn
    once): the sample's curve with a 95% band from the repetitions that refit the basis (their percentile
    band moved onto the sample's curve, as the intervals are); the paper's K = d/4 and 2.5 of 5 marked."""
    _, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    drawn = []
    for label, result in results.items():
        if any(result is seen for seen in drawn):
            continue
        drawn.append(result)
        for name, truncated in result.protocols.items():
            ks = np.array(truncated.ks[:-1])
            curve = np.stack([truncated.kl.mean(1), truncated.overlap.mean(1)])
            reps = result.curves[name]  # (n_rep, 2, len(ks))
            lo, hi = np.quantile(reps, [0.025, 0.975], axis=0) + curve - reps.mean(0)
            for i, ax in enumerate(axes):
                (line,) = ax.plot(
                    ks,
                    curve[i, :-1],
                    marker="o",
                    ms=3,
                    label=f"{PROTOCOL_LABELS[name]}, {label}",
                )
                ax.fill_between(
                    ks, lo[i, :-1], hi[i, :-1], color=line.get_color(), alpha=0.2
                )
    top = next(iter(results.values())).protocols["last layer"].top
    for ax, measure in zip(axes, ("KL(p_K ‖ p) (nats)", f"top-{top} shared with p")):
        ax.axvline(d // 4, color="grey", ls=":", label="K = D/4")
        ax.set(xscale="log", xlabel="K", ylabel=measure, title=f"{model}, D = {d}")
    axes[0].set_yscale("log")
    axes[1].axhline(2.5, color="k", ls="--", lw=1, label="paper: 2.5 of 5 at K = D/4")
    axes[1].legend(fontsize=8)
    plt.show()
