"""Inter-process file locks: parallel runs share caches, and no cache entry is computed twice at once."""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path

from .paths import not_writable


@contextmanager
def file_lock(path: str | Path, wait: bool = True):
    """Hold an exclusive lock on `path` (created if missing) for the duration of the block; yields True.
    With `wait=False` a lock held elsewhere is not waited for: the block runs at once and gets False.

    Only writers lock: a reader of a finished cache entry takes no lock, so a cache on a read-only file system
    (or one owned by another user) can be read. A lock that cannot be created raises `NotWritableError`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")
    except OSError as err:
        raise not_writable(path, err) from None
    with handle:
        try:
            fcntl.flock(
                handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB
            )
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
