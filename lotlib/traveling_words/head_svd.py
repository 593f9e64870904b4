"""The heads' matrices taken apart (Traveling Words, A6): exact SVD of W_QK^h and W_VO^h, each singular
direction read against the vocabulary, and the cumulative singular-value coverage.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ..models.view import ModelView
from .probes import token_label, topk


@contextmanager
def _one_thread():
    """Small LAPACK calls run on one thread: OpenMP workers spin-waiting on a busy machine make a
    576 x 64 QR a hundred times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def singular_values(W: Tensor) -> Tensor:
    """All singular values of a matrix, in float64, largest first: the direct check of a rank."""
    with _one_thread():
        return torch.linalg.svdvals(W.cpu().double())


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


def fix_signs(U: Tensor, V: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """Flip each singular pair (u_i, v_i) together so that v_i's best match among `rows` `(V, d)` is on
    its positive side (max_v v_i . row_v >= max_v -v_i . row_v), as in the authors' code. U, V `(H, d, r)`."""
    sign = _signs(torch.einsum("hdr,vd->hrv", V, rows))[:, None, :]  # (H, 1, r)
    return U * sign, V * sign


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
    and against the readout rows (raw W_E, or W_U^T when untied) for VO (the update side), signs fixed
    as `fix_signs` does. `shared`: the two sides have a token text in common, up to case and surrounding
    spaces (a copying direction). Scores are computed on the model's device.
    """
    U, S, V = (x.to(view.device) for x in head_svd(view, layer, kind))
    U, S, V = U[..., :n_dirs], S[:, :n_dirs].cpu(), V[..., :n_dirs]
    normed = view.block_norm(layer)(view.embed())
    right_scores = torch.einsum(
        "hdr,vd->hrv", V, normed if kind == "qk" else view.unembedding()[0]
    )
    sign = _signs(right_scores)  # (H, r)
    right = topk(right_scores.mul_(sign[..., None]), k)[1].cpu()
    left = topk(torch.einsum("hdr,vd->hrv", U * sign[:, None, :], normed), k)[1].cpu()
    label = lambda ids: ", ".join(token_label(vocab[t]) for t in ids.tolist())  # noqa: E731
    words = lambda ids: {vocab[t].strip().lower() for t in ids.tolist()} - {""}  # noqa: E731
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
