"""Per-layer trajectories taken during the forward pass (the final norm is never included)."""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

from .loading import Model


@torch.inference_mode()
def capture(
    model: Model,
    ids: np.ndarray,
    *,
    all_positions: bool = False,
    batch_size: int = 32,
    dtype: str = "float32",
    progress: bool = True,
) -> np.ndarray:
    """Residual-stream states of every sequence in `ids` `(N, T)`.

    x(0) is the input of block 0 (embeddings, plus positions where the model adds them); x(t) is
    block t's output. Returns `(N, L+1, d)` at the last position, or `(N, T, L+1, d)` with
    `all_positions=True`, in `dtype`, on the CPU. The model runs on its own device; each batch's states
    are stacked there and copied to the host once (one synchronisation per batch, not one per layer),
    so the device holds one batch of states at a time.
    """
    view = model.view
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 2 or ids.shape[1] < 1:
        raise ValueError(
            f"ids must be a (N, T) array of token ids, got shape {ids.shape}"
        )
    if batch_size < 1:
        raise ValueError(
            f"batch_size must be a positive number of sequences, got {batch_size}"
        )
    N, T = ids.shape
    L, d = view.n_layers, view.d_model
    if view.max_positions is not None and T > view.max_positions:
        raise ValueError(
            f"sequences of {T} tokens exceed {model.name}'s context of {view.max_positions} positions"
        )
    shape = (N, T, L + 1, d) if all_positions else (N, L + 1, d)
    out = np.empty(shape, dtype=np.dtype(dtype))
    where = slice(None) if all_positions else -1
    # one batch's states on the model's device, written layer by layer, copied to the host once a batch
    size = (min(batch_size, N), *shape[1:])
    buffer = torch.empty(size, dtype=torch.float32, device=view.device)

    def store(t: int, hidden: torch.Tensor) -> None:
        buffer[: len(hidden), ..., t, :] = hidden[:, where]

    with view.trace(store):
        for start in tqdm(
            range(0, N, batch_size),
            desc=f"capture {model.name}",
            unit="batch",
            disable=not progress,
        ):
            rows = slice(start, min(start + batch_size, N))
            view.run(ids[rows])
            out[rows] = buffer[: rows.stop - rows.start].cpu().numpy()
    return out
