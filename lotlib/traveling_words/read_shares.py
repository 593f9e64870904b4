"""What a head cannot see: the share of the states' variance outside the subspace its queries read (C7).

Head h of block t forms its query from the normalized state z = block_norm(t)(x) as z W_Q^h, a map from d to
d_head < d dimensions (before any bias, rotation or q-norm, which act on the query itself). Two states whose
difference is orthogonal to the columns of W_Q^h give the head the same query: it cannot tell them apart.
Over an ensemble of states with covariance C, the head reads the share tr(P_h C) / tr(C) of their variance,
P_h the orthogonal projector onto the columns of W_Q^h. Directions spread evenly (an isotropic C), or a
d_head-dimensional subspace placed at random (random weights), give d_head / d on average: the `ratio` of
the read share to d_head / d is 1 for them, above 1 when the heads read where the states vary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..models.view import ModelView
from ..stats import Estimate, percentile_estimate, resampling_weights


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
    its `block_norm`), with `n_boot` bootstrap resamples of the N pilots (`resampling_weights`)."""
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
