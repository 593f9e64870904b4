"""Where lotlib keeps its data and caches (each overridable by an environment variable)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

DATA_ENV = "LOTLIB_DATA_DIR"
CACHE_ENV = "LOTLIB_CACHE_DIR"


def cache_dir() -> Path:
    """Root of every lotlib cache: `$LOTLIB_CACHE_DIR`, default `~/.cache/lotlib`."""
    path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lotlib")
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Folder holding `walden.txt` and `common_nouns.txt`: `$LOTLIB_DATA_DIR`, default `<cache>/data`."""
    return Path(os.environ.get(DATA_ENV) or cache_dir() / "data")


def package_file(module: str, relative: str) -> Path:
    """A file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package module {module!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / relative
