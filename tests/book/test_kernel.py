"""Kernels forked from a zygote start as fresh ones do (the run's environment, folder and session, inline
figures, the project's code as it is now), one zygote per environment, and no kernel outlives its zygote."""
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from lotlib.book import kernel
from lotlib.book.pipeline import run_notebook
from lotlib.book.spec import read_spec
from lotlib.book.zygote import FORKED_FOR, ZYGOTE_VARIABLE

PROBE = '''# %% tags=["parameters"]
n: int = 1

# %%
import json, os, sys
preloaded = "torch" in sys.modules
import matplotlib.pyplot as plt
import torch  # a notebook that imports torch or transformers is worth a zygote
plt.plot([0, n])
print(json.dumps({"preloaded": preloaded, "cwd": os.getcwd(), "forward_log": os.environ.get("LOTLIB_FORWARD_LOG"),
                  "session_leader": os.getsid(0) == os.getpid(), "lotlib_loaded": "lotlib.models" in sys.modules,
                  "cwd_importable": "" in sys.path, "argv": sys.argv[0]}))
'''


def _probe(tmp_path, name: str, code: str = PROBE) -> tuple[dict, list]:
    source = tmp_path / "probe.py"
    source.write_text(code)
    out = run_notebook(source, tmp_path / name / "probe.ipynb", {"n": 2}, progress=False, reuse=False)
    outputs = [o for c in nbformat.read(out, 4).cells for o in c.get("outputs", [])]
    printed = json.loads(next(o["text"] for o in outputs if "text" in o))
    return printed, [sorted(o["data"]) for o in outputs if "data" in o]


@pytest.mark.slow
def test_a_forked_kernel_starts_as_a_fresh_one_does(tmp_path, monkeypatch):
    first, figures = _probe(tmp_path, "first")
    second, _ = _probe(tmp_path, "second")
    monkeypatch.setenv(ZYGOTE_VARIABLE, "0")
    fresh, fresh_figures = _probe(tmp_path, "fresh")
    assert first["preloaded"] and second["preloaded"] and not fresh["preloaded"]  # torch came with the fork
    for probe, name in ((first, "first"), (second, "second"), (fresh, "fresh")):
        assert probe["cwd"] == str(tmp_path / name)  # each run in its own output folder
        assert probe["forward_log"] == str(tmp_path / name / "probe.forward.log")  # its own run variables
        assert probe["session_leader"] and not probe["lotlib_loaded"]
        assert {k: probe[k] for k in ("cwd_importable", "argv")} == {k: fresh[k] for k in ("cwd_importable", "argv")}
    assert figures == fresh_figures == [["image/png", "text/plain"]]  # the inline backend, as in a fresh kernel


@pytest.mark.slow
def test_a_notebook_that_imports_neither_torch_nor_transformers_gets_a_fresh_kernel(tmp_path):
    light = PROBE.replace("import torch  #", "#")
    assert read_spec(_write(tmp_path / "light.py", light)).packages.isdisjoint(FORKED_FOR)
    probe, _ = _probe(tmp_path, "light", light)
    assert not probe["preloaded"] and probe["session_leader"]


def _write(path, text):
    path.write_text(text)
    return path


def test_one_zygote_serves_every_run_of_one_environment(monkeypatch):
    base = {"PATH": os.environ["PATH"], "HOME": "/tmp"}
    python = os.path.realpath(os.sys.executable)
    try:
        one = kernel.zygote_for(python, {**base, "LOTLIB_FORWARD_LOG": "a", "JPY_SESSION_NAME": "x"})
        assert kernel.zygote_for(python, {**base, "LOTLIB_FORWARD_LOG": "b"}) is one  # per-run variables
        other = kernel.zygote_for(python, {**base, "HF_HUB_OFFLINE": "1"})  # read when a library is imported
        assert other is not None and other is not one
        assert kernel.zygote_for(python, {**base, ZYGOTE_VARIABLE: "0"}) is None
    finally:
        kernel.close_zygotes()
    assert one.process.poll() is not None and other.process.poll() is not None


@pytest.mark.slow
def test_a_kernel_ends_with_its_zygote():
    async def start() -> kernel.LocalKernelManager:
        manager = kernel.LocalKernelManager(kernel_name="python3")
        await manager.start_kernel()
        return manager

    manager = asyncio.run(start())
    process = manager.provisioner.process
    assert isinstance(process, kernel.ForkedKernel) and process.poll() is None
    kernel.close_zygotes()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    assert process.poll() is not None  # ipykernel's parent poller saw its zygote go
    asyncio.run(manager.cleanup_resources())


def test_the_packages_a_notebook_imports_include_those_of_its_lotlib_modules(tmp_path):
    chapter = _write(tmp_path / "chapter.py", '# %% tags=["parameters"]\nn: int = 1\n\n# %%\nimport lotlib\n')
    assert {"lotlib", "torch", "transformers"} <= read_spec(chapter).packages  # load_model's imports
    sleeper = _write(tmp_path / "sleeper.py", '# %% tags=["parameters"]\nn: int = 1\n\n# %%\nimport time\n')
    assert read_spec(sleeper).packages == {"time"}


def _a_new_session_gets_an_autogroup() -> bool:
    """Whether a process that starts a session is scheduled in an autogroup of its own here. Some kernels give
    none to a process in a cpu cgroup other than the root (a container): the file then reads empty."""
    probe = subprocess.run(["cat", "/proc/self/autogroup"], check=True, capture_output=True, text=True,
                           start_new_session=True)
    return bool(probe.stdout.strip())


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no Linux scheduling autogroups here")
def test_a_niced_zygotes_kernels_stay_niced(tmp_path):
    """A kernel leads a session of its own, and Linux schedules each session as a group at nice 0: the kernel
    gives its group its zygote's niceness, so that `nice lotlib book` yields to other work. Where sessions get
    no autogroup, the kernel's own niceness is what the scheduler weighs."""
    niced = tmp_path / "niced-python"
    niced.write_text(f'#!/bin/sh\nexec nice -n 7 {sys.executable} "$@"\n')
    niced.chmod(0o755)
    zygote = kernel.Zygote(str(niced), dict(os.environ))
    # Empty where the zygote is in no autogroup (a process tree that never started a session).
    zygotes_group = Path(f"/proc/{zygote.process.pid}/autogroup").read_text()
    try:
        pid = zygote.fork(["-f", str(tmp_path / "kernel.json")], dict(os.environ), str(tmp_path))
        assert os.getpriority(os.PRIO_PROCESS, pid) == 7
        group = Path(f"/proc/{pid}/autogroup")
        wanted = ["7"] if _a_new_session_gets_an_autogroup() else []
        # the child takes its session and sets its group after the fork has answered
        deadline = time.monotonic() + 30
        while (os.getsid(pid), group.read_text().split()[-1:]) != (pid, wanted) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getsid(pid) == pid and group.read_text().split()[-1:] == wanted
        assert Path(f"/proc/{zygote.process.pid}/autogroup").read_text() == zygotes_group  # its own untouched
    finally:
        zygote.close()


def test_the_zygote_preloads_every_installed_heavy_library():
    """Run as a script, the zygote's own folder (lotlib/book, which holds a profile.py) must not shadow the
    standard library: torch imports cProfile, which imports `profile`."""
    import lotlib.book.zygote as zygote

    started = subprocess.Popen([sys.executable, zygote.__file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONSAFEPATH": ""})
    ready = json.loads(started.stdout.readline())
    started.stdin.close()
    started.wait(timeout=60)
    assert ready["not_preloaded"] == []
