"""A built folder's manifest: each file's size and sha256, recorded when the folder is finished and checked
before its files are used (size always; the full hash when the file changed since it was last verified)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .atomic import write_text_atomic
from .checksum import sha256_file


def folder_manifest(folder: Path, leave_out: tuple[str, ...] = ()) -> dict[str, dict]:
    """`{relative path: {"size", "sha256"}}` of every file below `folder` except the names in `leave_out`."""
    return {
        str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in leave_out
    }


def damaged_files(folder: Path, manifest: dict[str, dict], stamp: Path) -> list[str]:
    """The files of `manifest` that are missing below `folder` or differ from it. A file's size is always
    compared; its sha256 only when `stamp` (a JSON file of each file's size and mtime when it last verified)
    is missing or older than the file. A clean check rewrites `stamp` where it can."""
    try:
        verified = json.loads(stamp.read_text())
    except (OSError, ValueError):
        verified = {}
    damaged, now = [], {}
    for relative, entry in manifest.items():
        try:
            status = (folder / relative).stat()
        except FileNotFoundError:
            damaged.append(relative)
            continue
        now[relative] = [status.st_size, status.st_mtime_ns]
        if status.st_size != entry["size"]:
            damaged.append(relative)
        elif verified.get(relative) != now[relative]:
            if sha256_file(folder / relative) != entry["sha256"]:
                damaged.append(relative)
    if not damaged and now != verified:
        try:
            write_text_atomic(stamp, json.dumps(now))
        except OSError:  # a read-only cache: the next load hashes again
            pass
    return damaged


def share_tree(folder: Path) -> None:
    """Give `folder` and everything below it the permissions the umask allows (a temporary folder is private;
    a cache is meant to be shared)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
