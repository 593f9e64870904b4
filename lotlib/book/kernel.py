"""The kernel a chapter runs on: the project's Python kernel over local sockets (IPC) where the platform has
them, so that its messages never go over TCP (which makes every kernel print an encryption warning)."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir


class LocalKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernel talks over Unix domain sockets in Jupyter's runtime folder (an
    absolute path: the kernel starts in the notebook's folder, the client in its own), TCP elsewhere."""

    def __init__(self, **kwargs):
        if os.name == "posix":
            runtime = Path(jupyter_runtime_dir())
            runtime.mkdir(parents=True, exist_ok=True)
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault("ip", str(runtime / f"lotlib-{uuid.uuid4().hex[:12]}"))
        super().__init__(**kwargs)
