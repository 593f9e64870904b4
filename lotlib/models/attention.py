"""Attention rebuilt head by head from a view's per-head matrices."""

from __future__ import annotations

import torch
from torch import Tensor

from .view import ModelView


def head_outputs(
    view: ModelView,
    layer: int,
    x: Tensor,
    position_embeddings: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Each head's write to the residual stream, `(B, H, T, d)`, from normalized input `x` `(B, T, d)`.

    `heads.b_O + head_outputs(...).sum(1)` equals the attention module's output (causal mask,
    sliding window where the block has one). `position_embeddings` are the rotary `(cos, sin)`
    the model passes to the block (None for learned absolute positions, as in GPT-2).
    """
    w = view.heads(layer)
    x = x.float()
    q = torch.einsum("btd,hde->bhte", x, w.W_Q.float()) + w.b_Q[None, :, None].float()
    k = torch.einsum("btd,hde->bhte", x, w.W_K.float()) + w.b_K[None, :, None].float()
    v = torch.einsum("btd,hde->bhte", x, w.W_V.float()) + w.b_V[None, :, None].float()
    if w.q_norm is not None:
        q, k = w.q_norm(q), w.k_norm(k)
    q, k = view.rotate(q, k, position_embeddings)
    scores = q @ k.transpose(-1, -2) * w.scaling
    T = x.shape[1]
    i, j = (
        torch.arange(T, device=x.device)[:, None],
        torch.arange(T, device=x.device)[None, :],
    )
    allowed = j <= i
    if w.sliding_window is not None:
        allowed &= i - j < w.sliding_window
    pattern = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return torch.einsum("bhte,hed->bhtd", pattern @ v, w.W_O.float())
