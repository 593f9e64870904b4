"""JupyterLab on the chapters, the book's third way in: every `notebooks/*.py` chapter opens as a notebook
(Jupytext's notebook viewer is made the default for Python files), runs on the project's kernel, and sees
the data and cache folders as the book does (the Makefile sets `LOTLIB_DATA_DIR`; `LOTLIB_CACHE_DIR` keeps
its value or default, so the trajectories the book extracted are reused)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..storage.atomic import write_text_atomic
from .pipeline import project_root

VIEWER = "Jupytext Notebook"
PLUGIN = "@jupyterlab/docmanager-extension:plugin"


def settings_file(prefix: str | Path = sys.prefix) -> Path:
    """JupyterLab's settings overrides of this environment (`<prefix>/share/jupyter/lab/settings`)."""
    return (
        Path(prefix)
        / "share"
        / "jupyter"
        / "lab"
        / "settings"
        / "default_setting_overrides.json"
    )


def open_python_as_notebooks(prefix: str | Path = sys.prefix) -> Path:
    """Make Jupytext's notebook the default viewer of Python files in this environment's JupyterLab (merged
    into any existing overrides); returns the settings file."""
    path = settings_file(prefix)
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault(PLUGIN, {}).setdefault("defaultViewers", {})["python"] = VIEWER
    write_text_atomic(path, json.dumps(settings, indent=2))
    return path


def lab_command(root: Path, extra: list[str]) -> list[str]:
    """The `jupyter lab` command that opens the project's chapters (as root, in a container, with --allow-root)."""
    root_user = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [
        str(Path(sys.executable).parent / "jupyter"),
        "lab",
        f"--ServerApp.root_dir={root / 'notebooks'}",
        *root_user,
        *extra,
    ]


def main(argv: list[str] | None = None) -> int:
    """Open JupyterLab on the project's chapters (`make lab` runs `python -m lotlib.book.lab`); `argv` (default:
    the command line's) goes to `jupyter lab` (`--no-browser`, `--port`)."""
    root = project_root()
    settings = open_python_as_notebooks()
    print(
        f"[lotlib lab] chapters in {root / 'notebooks'} open as notebooks (Jupytext; {settings}); data: "
        f"{os.environ.get('LOTLIB_DATA_DIR', '<cache>/data')}; cache: "
        f"{os.environ.get('LOTLIB_CACHE_DIR', '~/.cache/lotlib')}",
        flush=True,
    )
    return subprocess.call(
        lab_command(root, list(sys.argv[1:] if argv is None else argv))
    )


if __name__ == "__main__":
    sys.exit(main())
