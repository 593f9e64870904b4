"""JupyterLab on the chapters: Python chapters open as notebooks through Jupytext's contents manager, and a
chapter opened that way executes on the project's kernel (headless: a Jupyter server, then nbconvert)."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from lotlib.book.lab import VIEWER, open_python_as_notebooks

from ..conftest import ROOT

BIN = Path(sys.executable).parent


def test_python_files_open_as_notebooks_in_this_environment(tmp_path):
    path = open_python_as_notebooks(tmp_path)
    path.write_text(json.dumps({"other": {"kept": True}, **json.loads(path.read_text())}))
    settings = json.loads(open_python_as_notebooks(tmp_path).read_text())
    assert settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == VIEWER
    assert settings["other"] == {"kept": True}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyter_server():
    port, token = _free_port(), "lotlib-test"
    server = subprocess.Popen([str(BIN / "jupyter"), "server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT / 'notebooks'}",
                               *(["--allow-root"] if os.geteuid() == 0 else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=1).close()
                break
            except OSError:
                time.sleep(0.25)
        yield url, token
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.mark.slow
def test_a_chapter_opened_as_a_notebook_executes(jupyter_server, tmp_path):
    url, token = jupyter_server
    with urllib.request.urlopen(f"{url}/api/contents/a3_reachable_tokens.py?type=notebook&content=1&token={token}",
                                timeout=30) as response:
        model = json.load(response)
    assert model["type"] == "notebook"  # Jupytext's contents manager serves the .py chapter as a notebook
    nb = nbformat.from_dict(model["content"])
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    opened = tmp_path / "a3_reachable_tokens.ipynb"
    nbformat.write(nb, opened)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    subprocess.run([str(BIN / "jupyter"), "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--ExecutePreprocessor.kernel_name=python3", "--ExecutePreprocessor.timeout=600", str(opened)],
                   check=True, env=env, cwd=tmp_path, capture_output=True)
    executed = nbformat.read(opened, 4)
    outputs = [o for c in executed.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    from lotlib.summary import summary_of

    assert "vocab_size" in (summary_of(executed) or {})  # its values, recorded as the book records them
