"""Where lotlib keeps its data and caches (each overridable by an environment variable)."""
from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "LOTLIB_DATA_DIR"
CACHE_ENV = "LOTLIB_CACHE_DIR"
BOOK_ENV = "LOTLIB_BOOK"  # set while the book is built: plotly.js is bundled with the site


def cache_dir() -> Path:
    """Root of every lotlib cache: `$LOTLIB_CACHE_DIR`, default `~/.cache/lotlib`."""
    path = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lotlib")
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Folder holding `walden.txt` and `common_nouns.txt`: `$LOTLIB_DATA_DIR`, default `<cache>/data`."""
    return Path(os.environ.get(DATA_ENV) or cache_dir() / "data")
