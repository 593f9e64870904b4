"""The heads' matrices taken apart: exact SVD of W_QK^h and W_VO^h read against the vocabulary, and their rank."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ..models.view import ModelView
from .probes import topk
from .vocabulary import token_label


@contextmanager
def _one_thread():
    """Small LAPACK calls run on one thread: OpenMP workers spin-waiting on a busy machine slow them down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _factors(view: ModelView, layer: int, kind: str) -> tuple[Tensor, Tensor]:
    """A, B `(H, d, dh)` float64 on the CPU with W_QK^h or W_VO^h = A_h B_h^T."""
    heads = view.heads(layer)
    if kind == "qk":
        return heads.W_Q.cpu().double() * heads.scaling, heads.W_K.cpu().double()
    if kind == "vo":
        return heads.W_V.cpu().double(), heads.W_O.cpu().double().transpose(1, 2)
    raise ValueError(f"kind must be 'qk' or 'vo', got {kind!r}")


@torch.no_grad()
def head_svd(view: ModelView, layer: int, kind: str) -> tuple[Tensor, Tensor, Tensor]:
    """Thin SVD of W_QK^h (`kind="qk"`) or W_VO^h (`"vo"`) for every head: U `(H, d, dh)`, S `(H, dh)`,
    V `(H, d, dh)` with W = U diag(S) V^T. Exact and cheap: W = A B^T with A, B `(d, dh)`, so with
    A = Q_a R_a and B = Q_b R_b, W = Q_a (R_a R_b^T) Q_b^T and only the `(dh, dh)` core is decomposed.
    The other d - dh singular values are zero: the null space. Computed in float64 on the CPU."""
    A, B = _factors(view, layer, kind)
    with _one_thread():
        (Qa, Ra), (Qb, Rb) = torch.linalg.qr(A), torch.linalg.qr(B)
        Uc, S, Vch = torch.linalg.svd(Ra @ Rb.transpose(1, 2))
    return (Qa @ Uc).float(), S.float(), (Qb @ Vch.transpose(1, 2)).float()


@torch.no_grad()
def direct_singular_values(view: ModelView, layer: int, kind: str) -> Tensor:
    """Every singular value of every head's d x d matrix W_QK^h or W_VO^h, formed in float64 from the stored
    factors and decomposed directly, over the head's largest: `(H, d)`, zeros for a zero matrix. The check
    of `head_svd`'s shortcut: past d_head they sit at float64 round-off."""
    A, B = _factors(view, layer, kind)
    with _one_thread():
        s = torch.linalg.svdvals(A @ B.transpose(1, 2))
    return s / torch.where(s[:, :1] > 0, s[:, :1], 1.0)


def numerical_rank(s: Tensor) -> Tensor:
    """Rank from singular values over the largest `(..., d)`: how many exceed d times float64's epsilon
    (the tolerance of numpy's and torch's matrix_rank)."""
    return (s > s.shape[-1] * torch.finfo(torch.float64).eps).sum(-1)


def _signs(scores: Tensor) -> Tensor:
    """+1 or -1 per direction `(H, r)` from its scores against every row `(H, r, V)`: the sign that puts the
    best match on the positive side."""
    return torch.where(scores.amax(-1) >= -scores.amin(-1), 1.0, -1.0)


@torch.no_grad()
def svd_table(
    view: ModelView,
    vocab: list[str],
    layer: int,
    kind: str,
    n_dirs: int = 20,
    k: int = 3,
) -> pd.DataFrame:
    """A6: the top `n_dirs` singular directions of every head, top-k tokens of each side.

    Left (input side) against block_norm(W_E); right against block_norm(W_E) for QK (the key side)
    and against the readout rows (`ModelView.readout_rows`: raw W_E, or W_U^T when untied) for VO (the update
    side), signs fixed
    each singular pair flipped together so that the right side's best match is on its positive side (as in
    the authors' code). `shared`: the two sides have a token text in common, up to case and surrounding
    spaces (a copying direction). Scores are computed on the model's device.
    """
    U, S, V = (x.to(view.device) for x in head_svd(view, layer, kind))
    U, S, V = U[..., :n_dirs], S[:, :n_dirs].cpu(), V[..., :n_dirs]
    normed = view.block_norm(layer)(view.embed())
    right_scores = torch.einsum(
        "hdr,vd->hrv", V, normed if kind == "qk" else view.readout_rows()[0]
    )
    sign = _signs(right_scores)  # (H, r)
    right = topk(right_scores.mul_(sign[..., None]), k)[1].cpu()
    left = topk(torch.einsum("hdr,vd->hrv", U * sign[:, None, :], normed), k)[1].cpu()
    label = lambda ids: ", ".join(token_label(vocab[t]) for t in ids.tolist())
    words = lambda ids: {vocab[t].strip().lower() for t in ids.tolist()} - {""}
    return pd.DataFrame(
        [
            {
                "block": layer,
                "matrix": kind.upper(),
                "head": h,
                "direction": i,
                "sigma": float(S[h, i]),
                "left": label(left[h, i]),
                "right": label(right[h, i]),
                "shared": bool(words(left[h, i]) & words(right[h, i])),
            }
            for h in range(S.shape[0])
            for i in range(S.shape[1])
        ]
    )


def coverage(S: Tensor, d: int) -> np.ndarray:
    """Cumulative singular-value coverage cumsum(s) / sum(s) over ranks 1..d, `(H, d)`; the singular
    values `S` `(H, r)` are padded with the zeros of the null space, so the curve is flat from rank r."""
    s = torch.cat(
        [S.double(), S.new_zeros(S.shape[0], d - S.shape[1], dtype=torch.float64)], 1
    )
    return (s.cumsum(1) / s.sum(1, keepdim=True)).numpy()


KINDS = ("qk", "vo")


def svd_tables(
    view: ModelView, vocab: list[str], layers: list[int], n_dirs: int = 20, k: int = 3
) -> pd.DataFrame:
    """`svd_table` of W_QK and W_VO at every block of `layers`, one frame."""
    return pd.concat(
        [
            svd_table(view, vocab, layer, kind, n_dirs, k)
            for layer in layers
            for kind in KINDS
        ],
        ignore_index=True,
    )


def side_by_side(tables: pd.DataFrame, block: int, head: int) -> pd.DataFrame:
    """One head's QK and VO directions next to each other: direction x (matrix, sigma/left/right)."""
    part = tables[(tables.block == block) & (tables["head"] == head)]
    wide = part.pivot_table(
        index="direction",
        columns="matrix",
        values=["sigma", "left", "right"],
        aggfunc="first",
    )
    return wide.swaplevel(axis=1).sort_index(axis=1, level=0)[
        [(m, c) for m in ("QK", "VO") for c in ("sigma", "left", "right")]
    ]


def all_heads(tables: pd.DataFrame, block: int, matrix: str) -> pd.DataFrame:
    """Every head's directions of one matrix ("QK" or "VO") at one block: direction x (head, side)."""
    part = tables[(tables.block == block) & (tables.matrix == matrix)]
    wide = part.pivot_table(
        index="direction", columns="head", values=["left", "right"], aggfunc="first"
    )
    return wide.swaplevel(axis=1).sort_index(axis=1, level=0)


@dataclass(frozen=True)
class Spectra:
    """The singular values `(H, d_head)` of W_QK^h and W_VO^h at the probed blocks, by (block, kind),
    for the model width `d`."""

    S: dict[tuple[int, str], Tensor]
    layers: list[int]
    d: int

    def rank_at(self, share: float, layer: int, kind: str) -> np.ndarray:
        """Smallest rank whose coverage reaches `share`, per head `(H,)`."""
        curve = coverage(self.S[layer, kind], self.d)
        return 1 + np.argmax(curve >= share - 1e-12, axis=1)

    def coverage_frame(self) -> pd.DataFrame:
        """The coverage curves in long form: rank, coverage, head, block, matrix."""
        frames = []
        for (layer, kind), S in self.S.items():
            H, ranks = S.shape[0], np.arange(1, self.d + 1)
            frames.append(
                pd.DataFrame(
                    {
                        "rank": np.tile(ranks, H),
                        "coverage": coverage(S, self.d).ravel(),
                        "head": np.repeat(np.arange(H), self.d),
                        "block": layer,
                        "matrix": f"W_{kind.upper()}",
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    def rank_table(self) -> pd.DataFrame:
        """Per block and matrix: the rank that reaches 90% of the singular-value sum in each head, and
        the median over heads of the rank that reaches 99%."""
        rows = [
            {
                "block": layer,
                "matrix": f"W_{kind.upper()}",
                "rank for 90%, per head": self.rank_at(0.9, layer, kind).tolist(),
                "rank for 99%, median": np.median(self.rank_at(0.99, layer, kind)),
            }
            for (layer, kind) in self.S
        ]
        return pd.DataFrame(rows).set_index(["block", "matrix"])


def spectra(view: ModelView, layers: list[int]) -> Spectra:
    """The exact singular values of both matrices of every head at `layers` (`head_svd`)."""
    S = {
        (layer, kind): head_svd(view, layer, kind)[1]
        for layer in layers
        for kind in KINDS
    }
    return Spectra(S, list(layers), view.d_model)


def null_space_check(view: ModelView, layers: list[int]) -> pd.DataFrame:
    """The direct check of the null space, one row per block, matrix and head: the numerical rank of
    the d x d matrix (`direct_singular_values`, `numerical_rank`), its d_head-th singular value and the
    next one (the gap), both over the largest."""
    dh, rows = view.d_head, []
    for layer in layers:
        for kind in KINDS:
            s = direct_singular_values(view, layer, kind)  # (H, d), over the largest
            rows += [
                {
                    "block": layer,
                    "matrix": f"W_{kind.upper()}",
                    "head": h,
                    "rank": int(r),
                    "s_d_head": s[h, dh - 1].item(),
                    "gap": s[h, dh].item(),
                }
                for h, r in enumerate(numerical_rank(s))
            ]
    return pd.DataFrame(rows)
