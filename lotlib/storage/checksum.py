"""SHA-256 of files and bytes: how caches and data files prove their content."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def sha256_bytes(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex digest of one file, read in blocks."""
    return sha256_files([path])


def sha256_files(paths: Iterable[str | Path]) -> str:
    """Hex digest of files read one after the other (the parts of a split file)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()
