"""Where lotlib keeps its data and caches (each overridable by an environment variable), and the one-line
error a write into a read-only cache ends in."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

DATA_ENV = "LOTLIB_DATA_DIR"
CACHE_ENV = "LOTLIB_CACHE_DIR"


class NotWritableError(OSError):
    """A file or lock could not be created (a read-only file system, a folder of another user)."""


def cache_root() -> Path:
    """`$LOTLIB_CACHE_DIR`, default `~/.cache/lotlib` (not created: see `cache_dir`)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lotlib")


def cache_dir() -> Path:
    """Root of every lotlib cache: `$LOTLIB_CACHE_DIR`, default `~/.cache/lotlib`, created if missing."""
    path = cache_root()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise not_writable(path, err) from None
    return path


def data_dir() -> Path:
    """Folder holding `walden.txt` and `common_nouns.txt`: `$LOTLIB_DATA_DIR`, default `<cache>/data`."""
    return Path(os.environ.get(DATA_ENV) or cache_dir() / "data")


def not_writable(path: str | Path, err: OSError) -> NotWritableError:
    """The one-line error for `path` that could not be created; inside the cache it says what to do."""
    path, root = Path(path), cache_root()
    reason = err.strerror or str(err)
    if path == root or root in path.parents:
        return NotWritableError(
            f"cannot write {path} ({reason}): the lotlib cache {root} is not writable here and lacks this entry; "
            f"set {CACHE_ENV} to a writable folder, or fill the entry once where the cache is writable"
        )
    return NotWritableError(f"cannot write {path} ({reason})")


def package_file(module: str, relative: str) -> Path:
    """A file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package module {module!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / relative
