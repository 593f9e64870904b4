"""Chapter C7's studies and figures: how far the states are from the sphere, and what a head cannot see."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib.figure import Figure

from ..models.view import ModelView
from ..stats import Estimate, percentile_estimate, resampling_weights


@dataclass
class StateNorms:
    """Per pilot and layer t = 0..L: `raw` ||x(t)|| / sqrt(d) and `ellipsoid` ||(x(t) - beta) / gamma|| /
    sqrt(d) of the norm reading x(t), each `(N, L+1)`, with the resampling `weights` `(1 + n_boot, N)`."""

    raw: np.ndarray
    ellipsoid: np.ndarray
    weights: np.ndarray

    @property
    def n(self) -> int:
        return self.raw.shape[0]

    def _medians(self, values: np.ndarray) -> np.ndarray:
        """The median over pilots of `values` `(N, ...)` on the sample and on each resample: `(1 + B, ...)`."""
        return np.stack(
            [
                np.median(np.repeat(values, w.astype(int), axis=0), axis=0)
                for w in self.weights
            ]
        )

    def growth(self) -> Estimate:
        """How much the raw norm grows over the blocks: median ||x(L)|| over median ||x(1)|| (the embedding
        row x(0) left out: its scale is the tokenizer's, not the blocks')."""
        medians = self._medians(self.raw[:, [1, -1]])
        return percentile_estimate(medians[:, 1] / medians[:, 0], self.n, unit="pilots")

    def off_ellipsoid(self) -> Estimate:
        """The median over layers of |median ellipsoid ratio - 1|: 0 when every state lies on the ellipsoid
        of the norm that reads it."""
        gaps = np.median(np.abs(self._medians(self.ellipsoid) - 1.0), axis=1)
        return percentile_estimate(gaps, self.n, unit="pilots")

    def summary(self) -> dict:
        """The chapter's values: the raw-norm growth, the gap to the ellipsoid, and the raw norm / sqrt(d) at
        the first and last layers (sample medians)."""
        raw = np.median(self.raw, axis=0)
        return {
            "raw_norm_growth": self.growth(),
            "ellipsoid_gap": self.off_ellipsoid(),
            "raw_norm_first": float(raw[1]),
            "raw_norm_last": float(raw[-1]),
        }

    def table(self) -> pd.DataFrame:
        """Per layer: the 5%, 50% and 95% quantiles over pilots of both ratios."""
        columns = {}
        for name, values in (
            ("raw ||x|| / √d", self.raw),
            ("ellipsoid ratio", self.ellipsoid),
        ):
            q = np.quantile(values, [0.05, 0.5, 0.95], axis=0)
            columns |= {
                f"{name}, {p}": q[i] for i, p in enumerate(("5%", "median", "95%"))
            }
        return pd.DataFrame(
            columns, index=pd.RangeIndex(self.raw.shape[1], name="layer t")
        )


@torch.no_grad()
def state_norms(
    view: ModelView, X: np.ndarray, n_boot: int, seed: int = 0
) -> StateNorms:
    """`StateNorms` of states X `(N, L+1, D)` (x(t) read by `view.reading_norms()[t]`: block t's input norm,
    the final norm at t = L), with `n_boot` bootstrap resamples of the N pilots.

    Traveling Words reads the states attention sees on a sphere of radius sqrt(d), stretched by gamma into
    an ellipsoid and shifted by beta. In a pre-norm decoder (GPT-2, Llama) only what a block reads is
    normalized: the residual stream x(t) itself grows freely between norms. In a post-LN encoder (BERT,
    MPNet) every state of the stream is a LayerNorm's output, so it lies on that norm's ellipsoid. Two
    numbers per state: the raw norm ||x(t)|| / sqrt(d), how far the stream has grown from the sphere's
    radius; and the ellipsoid ratio ||(x(t) - beta) / gamma|| / sqrt(d) of the reading norm, 1 when x(t)
    lies on its ellipsoid (the post-LN picture), far from 1 when the norm has work to do (the pre-norm
    picture). The summaries are medians over the pilots, with percentile intervals over bootstrap
    resamples drawn as indices (a median has no weighted closed form)."""
    d = X.shape[2]
    raw = np.linalg.norm(X.astype(np.float64), axis=2) / np.sqrt(d)
    ellipsoid = np.empty_like(raw)
    for t, norm in enumerate(view.reading_norms()):
        x = torch.as_tensor(X[:, t], device=view.device).double()
        if norm.beta is not None:
            x = x - norm.beta.to(x.device).double()
        x = x / norm.gamma.to(x.device).double()
        ellipsoid[:, t] = (x.norm(dim=1) / np.sqrt(d)).cpu().numpy()
    return StateNorms(raw, ellipsoid, resampling_weights(len(X), n_boot, seed))


def state_norms_figure(found: StateNorms, model: str) -> Figure:
    """C7: per layer, the raw norm ||x(t)|| / sqrt(d) (left) and the ellipsoid ratio of the norm reading x(t)
    (right) of `StateNorms`: the median over pilots with the 5-95% band, and 1 (the sphere's
    radius; a state on its reading norm's ellipsoid) dashed."""
    table = found.table()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, name, title in zip(
        axes,
        ("raw ||x|| / √d", "ellipsoid ratio"),
        (
            "raw state: ||x(t)|| / √d",
            "on the reading norm's ellipsoid: ||(x − β) / γ|| / √d",
        ),
    ):
        ax.fill_between(
            table.index, table[f"{name}, 5%"], table[f"{name}, 95%"], alpha=0.25
        )
        ax.plot(table.index, table[f"{name}, median"], marker="o", ms=3)
        ax.axhline(1.0, color="k", ls="--", lw=1)
        ax.set(xlabel="layer t", yscale="log", title=title)
    fig.suptitle(f"{model}: how far the states are from the sphere, layer by layer")
    fig.tight_layout()
    return fig


@dataclass
class ReadShares:
    """`shares` `(1 + n_boot, len(blocks), H)`: each head's read share on the sample (row 0) and on bootstrap
    resamples of the `n` pilots (the covariance re-estimated on each draw), for heads of width `d_head` in
    `d`."""

    blocks: list[int]
    shares: np.ndarray
    d_head: int
    d: int
    n: int

    @property
    def isotropic(self) -> float:
        """The read share of evenly spread directions: d_head / d."""
        return self.d_head / self.d

    def median_ratio(self) -> Estimate:
        """The median over every block and head of read share / (d_head / d), percentile interval over the
        resamples of the pilots."""
        ratios = np.median(self.shares.reshape(len(self.shares), -1), axis=1)
        return percentile_estimate(ratios / self.isotropic, self.n, unit="pilots")

    def share_above(self) -> float:
        """The fraction of heads (over all blocks) whose read share on the sample exceeds d_head / d."""
        return float(np.mean(self.shares[0] > self.isotropic))

    def summary(self) -> dict:
        """The chapter's values: d_head, d_head / d, the median ratio and the share of heads reading more."""
        return {
            "d_head": self.d_head,
            "isotropic_share": self.isotropic,
            "read_share_ratio": self.median_ratio(),
            "heads_reading_more": self.share_above(),
        }

    def table(self) -> pd.DataFrame:
        """Per block: the smallest, median and largest read share over its heads on the sample."""
        sample = self.shares[0]
        return pd.DataFrame(
            {
                "block": self.blocks,
                "least read": sample.min(1),
                "median": np.median(sample, 1),
                "most read": sample.max(1),
            }
        ).set_index("block")


@torch.no_grad()
def read_shares(
    view: ModelView, X: np.ndarray, blocks: list[int], n_boot: int, seed: int = 0
) -> ReadShares:
    """`ReadShares` of the heads of `blocks` over states X `(N, L+1, D)` (block t reads x(t), normalized by
    its `block_norm`), with `n_boot` bootstrap resamples of the N pilots (`resampling_weights`).

    Head h of block t forms its query from the normalized state z = block_norm(t)(x) as z W_Q^h, a map from
    d to d_head < d dimensions (before any bias, rotation or q-norm, which act on the query itself). Two
    states whose difference is orthogonal to the columns of W_Q^h give the head the same query: it cannot
    tell them apart. Over states with covariance C the head reads the share tr(P_h C) / tr(C) of their
    variance, P_h the orthogonal projector onto the columns of W_Q^h. Directions spread evenly (an
    isotropic C), or a d_head-dimensional subspace placed at random (random weights), give d_head / d on
    average: the ratio of the read share to d_head / d is 1 for them, above 1 when the heads read where the
    states vary."""
    weights = resampling_weights(len(X), n_boot, seed)  # (1 + n_boot, N)
    n = weights.sum(1)[:, None]
    out = []
    for t in blocks:
        z = view.block_norm(t)(torch.as_tensor(X[:, t], device=view.device))
        z = z.double().cpu().numpy()
        z -= z.mean(0)  # (N, d): resample means are taken below, exactly
        W_Q = view.heads(t).W_Q.double().cpu().numpy()  # (H, d, d_head)
        Q = np.linalg.qr(W_Q)[0]  # orthonormal columns spanning each head's W_Q
        per_pilot = np.einsum("nd,hde->nhe", z, Q) ** 2  # (N, H, d_head)
        mean = weights @ z / n  # (B, d)
        read = weights @ per_pilot.sum(-1) / n - (
            np.einsum("bd,hde->bhe", mean, Q) ** 2
        ).sum(-1)
        total = weights @ np.sum(z * z, 1) / n[:, 0] - np.sum(mean * mean, 1)
        out.append(read / total[:, None])
    shares = np.stack(out, axis=1)
    return ReadShares(list(blocks), shares, view.d_head, view.d_model, len(X))


def read_share_figure(found: ReadShares, model: str) -> Figure:
    """C7: each head's read share (`ReadShares`, the sample) by block, one dot per head, with the
    share d_head / d of evenly spread directions as a dashed line."""
    rows = [
        {"block": b, "read share": share}
        for i, b in enumerate(found.blocks)
        for share in found.shares[0, i]
    ]
    fig, ax = plt.subplots(figsize=(11, 4))
    sns.stripplot(
        pd.DataFrame(rows), x="block", y="read share", ax=ax, size=4, jitter=0.2
    )
    ax.axhline(
        found.isotropic, color="k", ls="--", lw=1, label="d_head / d (evenly spread)"
    )
    ax.set(
        ylim=(0, None),
        title=f"{model}: the share of the normalized states' variance each head's queries read",
    )
    ax.legend(fontsize=8)
    return fig
