"""The kernel a chapter runs on: the project's Python kernel over local sockets (IPC) where the platform has
them, so that its messages never go over TCP (which makes every kernel print an encryption warning), forked
from a zygote that has the heavy libraries imported already (`lotlib.book.zygote`; Linux, unless
`LOTLIB_KERNEL_ZYGOTE=0`), and shut down without the interrupt jupyter_client sends first (an idle kernel logs
"KeyboardInterrupt caught in kernel" for it, once per chapter, into the book's output)."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir

from .zygote import ZYGOTE_VARIABLE, serving_key

# A file that receives the kernel's peak resident memory in bytes when the kernel is asked to shut down (the
# pipeline sets it for each run, like `lotlib.models.forward_clock.FORWARD_LOG`).
MEMORY_LOG = "LOTLIB_MEMORY_LOG"


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

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        arguments = launcher_arguments(kernel_cmd)
        zygote = zygote_for(kernel_cmd[0], kw["env"]) if arguments is not None else None
        if zygote is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        cwd = str(kw.get("cwd") or Path.cwd())
        try:
            pid = await asyncio.to_thread(zygote.fork, arguments, kw["env"], cwd)
        except (OSError, RuntimeError):
            # the zygote died (killed, out of memory): this kernel starts as a process of its own
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        provisioner = self.provisioner
        provisioner.process = ForkedKernel(pid)
        # the kernel leads a session of its own, as Jupyter starts kernels
        provisioner.pid = provisioner.pgid = pid
        provisioner.cwd = cwd
        self._reconcile_connection_info(provisioner.connection_info)

    async def _async_interrupt_kernel(self) -> None:
        if self.shutting_down:
            # a finished run's kernel is asked to shut down: nothing runs to interrupt, and the kernel still
            # exists, so its peak memory can be read
            self._record_peak_memory()
            return
        await super()._async_interrupt_kernel()

    def _record_peak_memory(self) -> None:
        """Write the kernel's peak resident memory to the file named by `MEMORY_LOG` in its variables (nothing
        when there is none, or where the platform does not say)."""
        log = self.run_env.get(MEMORY_LOG)
        pid = getattr(self.provisioner, "pid", None)
        peak = peak_resident_bytes(pid) if log and pid else None
        if peak is not None:
            Path(log).write_text(f"{peak}\n")


def peak_resident_bytes(pid: int) -> int | None:
    """A process's peak resident memory in bytes (VmHWM of /proc/PID/status, Linux: a kernel forked from a
    zygote starts with the zygote's resident pages); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_memory_gb(log: Path) -> float | None:
    """The peak a run's kernel wrote to `log` (`MEMORY_LOG`), in GB (2**30 bytes, two decimals); None when it
    wrote none."""
    try:
        return round(int(log.read_text()) / 2**30, 2)
    except (OSError, ValueError):
        return None


def kernel_manager(env: dict[str, str]) -> type[LocalKernelManager]:
    """A kernel manager class whose kernels get `env` on top of this process's environment (papermill takes
    a class, so each run gets a class of its own)."""
    return type("RunKernelManager", (LocalKernelManager,), {"run_env": dict(env)})


MAX_ZYGOTES = 2  # zygotes kept at once (one per environment); an idle one makes room for a new environment


def launcher_arguments(kernel_cmd: list[str]) -> list[str] | None:
    """The arguments of a `python -m ipykernel_launcher ...` command (None for any other kernel command)."""
    if kernel_cmd[1:3] != ["-m", "ipykernel_launcher"]:
        return None
    return kernel_cmd[3:]


class ForkedKernel:
    """The `subprocess.Popen` face jupyter_client's provisioner needs of a kernel forked by a zygote (not a
    child of this process: its zygote reaps it, so a pid that no longer exists is a kernel that ended)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid

    def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return 0  # ended; its status went to the zygote
        return None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            time.sleep(0.05)
        return 0

    def send_signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """A zygote process (`lotlib/book/zygote.py` run by `python`, environment `env`); `fork` asks it for a
    kernel."""

    def __init__(self, python: str, env: dict[str, str]):
        # run as a script, so that no lotlib module is imported
        script = Path(__file__).with_name("zygote.py")
        self.process = subprocess.Popen(
            [python, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.lock = threading.Lock()
        self.kernels: list[ForkedKernel] = []
        self.ready = False

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            pid = self.process.pid
            raise RuntimeError(
                f"the kernel zygote (pid {pid}) ended: see the lines above"
            )
        return json.loads(line)

    def fork(self, arguments: list[str], env: dict[str, str], cwd: str) -> int:
        """Fork a kernel run as `python -m ipykernel_launcher ARGUMENTS` in folder `cwd` with environment
        `env`; its pid. Waits for the zygote's imports the first time."""
        with self.lock:
            if not self.ready:
                self._read()
                self.ready = True
            request = {"arguments": arguments, "env": env, "cwd": cwd}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            pid = self._read()["pid"]
            self.kernels = [k for k in self.kernels if k.poll() is None]
            self.kernels.append(ForkedKernel(pid))
            return pid

    def idle(self) -> bool:
        """Whether none of the kernels this zygote forked still runs."""
        return not any(k.poll() is None for k in self.kernels)

    def close(self) -> None:
        """End the zygote (a kernel it forked that still runs ends with it, within a second)."""
        self.process.terminate()
        self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()


_zygotes: dict[tuple, Zygote] = {}
_zygotes_lock = threading.Lock()


def zygote_for(python: str, env: dict[str, str]) -> Zygote | None:
    """The zygote that forks kernels run by `python` with environment `env` (`zygote.serving_key`), started
    on first use; None where kernels are not forked (not Linux, `LOTLIB_KERNEL_ZYGOTE=0`, or `MAX_ZYGOTES`
    zygotes all have running kernels)."""
    if not sys.platform.startswith("linux") or env.get(ZYGOTE_VARIABLE, "1") == "0":
        return None
    key = (python, serving_key(env))
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if zygote is not None and zygote.process.poll() is None:
            return zygote
        for old in [k for k, z in _zygotes.items() if z.process.poll() is not None]:
            del _zygotes[old]
        if len(_zygotes) >= MAX_ZYGOTES:
            idle = next((k for k, z in _zygotes.items() if z.idle()), None)
            if idle is None:
                return None
            _zygotes.pop(idle).close()
        zygote = _zygotes[key] = Zygote(python, env)
        return zygote


@atexit.register
def close_zygotes() -> None:
    """End every zygote of this process."""
    with _zygotes_lock:
        while _zygotes:
            _zygotes.popitem()[1].close()
