"""How far the states are from the sphere, layer by layer (C7): the norms of raw and normalized states.

Traveling Words reads the states attention sees on a sphere of radius sqrt(d), stretched by gamma into an
ellipsoid and shifted by beta. In a pre-norm decoder (GPT-2, Llama) only what a block reads is normalized:
the residual stream x(t) itself grows freely between norms. In a post-LN encoder (BERT, MPNet) every state of
the stream is a LayerNorm's output, so it lies on that norm's ellipsoid. Two numbers per layer t, over the
states x(t) of an ensemble and the norm that reads them (`ModelView.reading_norms`: block t's input norm,
the final norm at t = L):

- the raw norm ||x(t)|| / sqrt(d): how far the stream has grown from the sphere's radius;
- the ellipsoid ratio ||(x(t) - beta) / gamma|| / sqrt(d) of the reading norm: 1 when x(t) lies on its
  ellipsoid (the post-LN picture), far from 1 when the norm has work to do (the pre-norm picture).

Medians over the pilots, with percentile intervals over bootstrap resamples of them (`resampling_weights`
drawn as indices: a median has no weighted closed form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

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
    """`StateNorms` of states X `(N, L+1, D)` (x(t) read by `view.reading_norms()[t]`), with `n_boot`
    bootstrap resamples of the N pilots."""
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
