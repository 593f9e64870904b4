"""Where lotlib keeps its data and caches (each overridable by an environment variable), and the one-line
error a write into a read-only cache ends in."""

from __future__ import annotations

import errno
import importlib.util
import os
from pathlib import Path

from ..project import bundled_project

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
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return NotWritableError(
            f"cannot write {path} ({reason}): free space on the disk that holds {path.parent} "
            f"(df -h {path.parent}), or write elsewhere ({CACHE_ENV} for the cache, --out for results); "
            f"nothing half-written was left"
        )
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


# set in a run's kernel: the project whose notebook it runs
PROJECT_VARIABLE = "LOTLIB_PROJECT"


def project_root(start: Path | None = None) -> Path:
    """The folder holding `book/_config.yml` and `notebooks/`: in a notebook run by the pipeline, the project
    of the notebook's source (its kernel's LOTLIB_PROJECT, wherever the output goes); otherwise searched
    upward from `start`, or from the working folder and then from the checkout lotlib is imported from (a
    chapter opened by hand elsewhere), and last the project an installed wheel carries."""
    if start is None and os.environ.get(PROJECT_VARIABLE):
        return Path(os.environ[PROJECT_VARIABLE])
    starts = [start] if start is not None else [Path.cwd(), Path(__file__)]
    for here in (Path(s).resolve() for s in starts):
        for folder in (here, *here.parents):
            book, notebooks = folder / "book" / "_config.yml", folder / "notebooks"
            if book.exists() and notebooks.is_dir():
                return folder
    bundled = bundled_project()
    if bundled is not None and start is None:
        return bundled
    raise FileNotFoundError(
        f"no lotlib project (book/_config.yml and notebooks/) in {starts[0]} or above; "
        f"run from the project folder, or `lotlib notebooks DIR` to copy the chapters out"
    )
