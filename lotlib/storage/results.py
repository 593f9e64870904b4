"""Results kept on disk by what produced them: a value that several chapters or books compute from the same
inputs (the untrained model's measures in a model book and its null book, one basis of a layer read by three
chapters) is computed once and read back everywhere else.

An entry's key hashes its inputs' contents (arrays by their bytes, shapes and dtypes), its parameters and the
source of the installed lotlib package, so a change of data, parameter or code gives a new entry. An entry is
written once (temporary file, then rename) with the sha256 of its bytes in front; a read checks it, and an
entry that does not match is computed again and replaced."""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypeVar

import numpy as np

from .atomic import write_atomic
from .locks import file_lock
from .paths import cache_dir

RESULTS_FOLDER = "results"
_CHECKSUM_BYTES = 64  # hex sha256 in front of an entry
T = TypeVar("T")


# the libraries whose numerics a result depends on: an upgrade of one gives new entries
NUMERIC_LIBRARIES = ("numpy", "scipy", "scikit-learn", "torch")


@lru_cache(maxsize=1)
def lotlib_source_digest() -> str:
    """sha256 of every .py file of the installed lotlib package (paths and bytes) and of the versions of
    `NUMERIC_LIBRARIES`, computed once a process."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    for library in NUMERIC_LIBRARIES:
        try:
            digest.update(f"{library} {version(library)}".encode())
        except PackageNotFoundError:
            digest.update(f"{library} absent".encode())
    return digest.hexdigest()


def _feed(digest, value) -> None:
    """Feed one key part to `digest`: arrays by dtype, shape and bytes; mappings, sequences and scalars by their
    structure and repr (a value whose repr carries no content, such as an object's address, is refused)."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        digest.update(f"array {array.dtype.str} {array.shape}".encode())
        digest.update(array.view(np.uint8).reshape(-1).data)
    elif isinstance(value, Mapping):
        digest.update(f"map {len(value)}".encode())
        for name in sorted(value, key=repr):
            _feed(digest, name)
            _feed(digest, value[name])
    elif isinstance(value, (list, tuple)):
        digest.update(f"seq {len(value)}".encode())
        for item in value:
            _feed(digest, item)
    elif value is None or isinstance(value, (str, bytes, bool, int, float, np.generic)):
        digest.update(f"{type(value).__name__} {value!r}".encode())
    else:
        raise TypeError(
            f"key part of type {type(value).__name__} cannot key a result: pass arrays, numbers, strings, "
            "or mappings and sequences of them"
        )


def result_key(kind: str, key: Mapping) -> str:
    """The hex sha256 naming the entry of `kind` computed from `key` (inputs and parameters) by this lotlib."""
    digest = hashlib.sha256(f"{kind}\n{lotlib_source_digest()}\n".encode())
    _feed(digest, key)
    return digest.hexdigest()


def _read(path: Path):
    """The entry's value in a 1-tuple, or None for a missing entry; a damaged one (its bytes not those written)
    or one this process cannot unpickle (written where the libraries of its value had other versions, in a
    shared cache) is removed."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    payload = memoryview(blob)[_CHECKSUM_BYTES + 1 :]
    if hashlib.sha256(payload).hexdigest().encode() == blob[:_CHECKSUM_BYTES]:
        try:
            return (pickle.loads(payload),)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            pass
    path.unlink(missing_ok=True)
    return None


def _write(path: Path, checksum: bytes, payload: bytes) -> None:
    """Write an entry: the hex sha256 of the payload, a newline, the payload."""
    with open(path, "wb") as handle:
        handle.write(checksum + b"\n")
        handle.write(payload)


def cached_result(kind: str, key: Mapping, compute: Callable[[], T]) -> T:
    """`compute()`, or the value an earlier call with the same `kind`, `key` and lotlib source kept under
    `<cache>/results/<code>/<kind>/` (`<code>`: this lotlib's source digest; an older one's folder can be removed). One process computes an entry while others wanting it wait (a file lock), so two
    chapters running side by side do the work once."""
    path = (
        cache_dir()
        / RESULTS_FOLDER
        / lotlib_source_digest()[:16]
        / kind
        / f"{result_key(kind, key)}.pkl"
    )
    found = _read(path)
    if found is not None:
        return found[0]
    with file_lock(path.with_suffix(".lock")):
        found = _read(path)
        if found is not None:
            return found[0]
        value = compute()
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        checksum = hashlib.sha256(payload).hexdigest().encode()
        write_atomic(path, lambda tmp: _write(tmp, checksum, payload))
    return value
