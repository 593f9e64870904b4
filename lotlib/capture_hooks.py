"""Per-layer trajectories taken with forward hooks on the blocks (the final norm is never included)."""
from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from .models import Model


@torch.inference_mode()
def capture(model: Model, ids: np.ndarray, *, all_positions: bool = False, batch_size: int = 32,
            dtype: str = "float32", progress: bool = True) -> np.ndarray:
    """Residual-stream states of every sequence in `ids` `(N, T)`.

    x(0) is the input of block 0 (embeddings, plus positions where the model adds them); x(t) is
    block t's output. Returns `(N, L+1, d)` at the last position, or `(N, T, L+1, d)` with
    `all_positions=True`, in `dtype`.
    """
    view = model.view
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 2 or ids.shape[1] < 1:
        raise ValueError(f"ids must be a (N, T) array of token ids, got shape {ids.shape}")
    N, T = ids.shape
    L, d = view.n_layers, view.d_model
    shape = (N, T, L + 1, d) if all_positions else (N, L + 1, d)
    out = np.empty(shape, dtype=np.dtype(dtype))
    where = slice(None) if all_positions else -1
    batch: dict[str, slice] = {}

    def store(t: int, hidden: torch.Tensor) -> None:
        out[batch["rows"], ..., t, :] = hidden[:, where].to(torch.float32).numpy()

    hooks = [view.blocks[0].register_forward_pre_hook(
        lambda m, args, kwargs: store(0, args[0] if args else kwargs["hidden_states"]), with_kwargs=True)]
    hooks += [block.register_forward_hook(
        lambda m, args, output, t=t: store(t, output[0] if isinstance(output, tuple) else output))
        for t, block in enumerate(view.blocks, start=1)]
    try:
        for start in tqdm(range(0, N, batch_size), desc="capture", unit="batch", disable=not progress):
            batch["rows"] = slice(start, min(start + batch_size, N))
            view.base(input_ids=torch.from_numpy(ids[batch["rows"]]), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return out
