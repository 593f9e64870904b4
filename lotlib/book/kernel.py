"""The kernel a chapter runs on: the project's Python kernel over local sockets (IPC) where the platform has
them, so that its messages never go over TCP (which makes every kernel print an encryption warning), and shut
down without the interrupt jupyter_client sends first (an idle kernel logs "KeyboardInterrupt caught in
kernel" for it, once per chapter, into the book's output)."""

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

    run_env: dict[str, str] = {}  # variables this kernel gets on top of os.environ

    async def _async_pre_start_kernel(self, **kw):
        kw["env"] = {**kw.get("env", os.environ), **self.run_env}
        return await super()._async_pre_start_kernel(**kw)

    async def _async_interrupt_kernel(self) -> None:
        if (
            self.shutting_down
        ):  # a finished run's kernel is asked to shut down; nothing runs to interrupt
            return
        await super()._async_interrupt_kernel()


def kernel_manager(env: dict[str, str]) -> type[LocalKernelManager]:
    """A kernel manager class whose kernels get `env` on top of this process's environment (papermill takes
    a class, so each run gets a class of its own)."""
    return type("RunKernelManager", (LocalKernelManager,), {"run_env": dict(env)})
