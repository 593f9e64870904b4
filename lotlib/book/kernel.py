"""The kernel a chapter runs on: the project's Python kernel over local sockets (IPC) where the platform has
them, so that its messages never go over TCP (which makes every kernel print an encryption warning)."""
from __future__ import annotations

import os

from jupyter_client.manager import AsyncKernelManager


class LocalKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernel talks over Unix domain sockets (TCP on platforms without them)."""

    def __init__(self, **kwargs):
        if os.name == "posix":
            kwargs.setdefault("transport", "ipc")
        super().__init__(**kwargs)
