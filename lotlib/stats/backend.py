"""Where the heavy statistics run: numpy arrays at their boundaries, torch tensors on one device between,
products of states in float32 without TF32 (`no_tf32`) and eigendecompositions and moments in float64."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from threadpoolctl import threadpool_limits

Device = str | torch.device


def stats_device(device: Device = "cpu") -> torch.device:
    """The torch device the statistics run on for `device` ("cpu", "cuda", "cuda:N", "mps" or a
    `torch.device`): the device itself, or the CPU in place of MPS (no float64 there)."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def as_tensor(
    a: np.ndarray | torch.Tensor, device: Device, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """`a` (numpy array or tensor) as a tensor on `stats_device(device)` in `dtype` (None: its own), without
    a copy where it is one there already."""
    return torch.as_tensor(a, dtype=dtype, device=stats_device(device))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor as a numpy array on the host, in its own dtype (no copy from the CPU)."""
    return t.detach().cpu().numpy()


@contextmanager
def no_tf32() -> Iterator[None]:
    """Within the block, CUDA's float32 matrix products in full float32, not TF32 (10 bits of mantissa, too
    few for moments that subtract large terms); the setting it had comes back on exit."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


@contextmanager
def single_thread() -> Iterator[None]:
    """Within the block, one thread for torch's CPU kernels and for numpy's BLAS and LAPACK (many
    mid-sized problems on busy cores run slower threaded); the settings they had come back on exit."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
