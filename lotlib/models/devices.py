"""Where a model runs: a request (`DeviceRequest`, "auto" by default) is resolved once into a `torch.device`.

Above the model (the command line, the book, a chapter's parameters) a device is a request; below it (capture,
the statistics on tensors) it is the resolved `torch.device`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda", "mps")
DEVICE_ENV = "LOTLIB_DEVICE"  # what device "auto" means, when set (the tests set cpu)
DeviceRequest: TypeAlias = str
"""A device as a user asks for it: "auto", "cpu", "cuda", "cuda:N" or "mps"."""


def resolve_device(device: DeviceRequest | torch.device = "auto") -> torch.device:
    """ "auto" is `$LOTLIB_DEVICE` when set, else cuda when a GPU is visible, else Apple's mps, else the CPU;
    names are checked, and a device that torch cannot see is refused with the choice that works."""
    import torch

    if isinstance(device, torch.device):
        return device
    if device == "auto" and os.environ.get(DEVICE_ENV):
        device = os.environ[DEVICE_ENV]
        if device.split(":")[0] not in DEVICES[1:]:
            raise ValueError(
                f"${DEVICE_ENV} must be one of {', '.join(DEVICES[1:])} (or cuda:N), got {device!r}; "
                f"unset it to let 'auto' choose"
            )
    if str(device).split(":")[0] not in DEVICES:
        raise ValueError(
            f"device must be one of {', '.join(DEVICES)} (or cuda:N), got {device!r}"
        )
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} was asked for but torch sees no CUDA GPU; use device 'cpu' or 'auto'"
        )
    if device == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            "device 'mps' was asked for but this torch has no Apple GPU; use 'cpu' or 'auto'"
        )
    return torch.device(device)
