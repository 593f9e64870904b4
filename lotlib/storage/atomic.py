"""Write files so that a crash never leaves a half-written one behind: temp file, then rename."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

from .paths import not_writable


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it onto `path`. Files are created with
    the permissions the umask allows (as `open` would), so a cache shared by a lab is readable by the others;
    a write that cannot start (read-only file system) raises `NotWritableError`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # mode 0o666 minus the umask
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as err:
        raise not_writable(path, err) from None
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as err:
        raise not_writable(path, err) from err
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """`write_atomic` of a text."""
    return write_atomic(path, lambda tmp: tmp.write_text(text))
