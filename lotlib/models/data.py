"""The two text files the book reads, found in the data directory or downloaded and checked."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..storage.atomic import write_atomic
from ..storage.checksum import sha256_bytes, sha256_file
from ..storage.paths import DATA_ENV, data_dir


@dataclass(frozen=True)
class DataFile:
    name: str
    url: str
    sha256: str


DATA_FILES = {
    f.name: f
    for f in [
        DataFile(
            "walden.txt",
            "https://raw.githubusercontent.com/rapsar/lines-of-thought/main/txt/walden-thoreau-pg-clean.txt",
            "311dbf8c16c6129ea1f7bfb1ab8a35a4bd2e7d366702622a306bd83ef9602d7a",
        ),
        DataFile(
            "common_nouns.txt",
            "https://raw.githubusercontent.com/santiag0m/traveling-words/main/COMMON_NOUNS.txt",
            "6750c3f552cf7b63ad442a102d29f19bf5530575155ef27593bb7b001a7bc981",
        ),
    ]
}


class DataError(RuntimeError):
    """A data file is missing, unreachable or not the expected file."""


def data_path(name: str, url: str | None = None, timeout: float = 30.0) -> Path:
    """Path of data file `name`, checked against its sha256; downloaded from `url` if missing."""
    if name not in DATA_FILES:
        raise DataError(f"unknown data file {name!r}; known: {', '.join(DATA_FILES)}")
    spec = DATA_FILES[name]
    path = data_dir() / name
    if path.exists():
        found = sha256_file(path)
        if found != spec.sha256:
            raise DataError(
                f"{path} has sha256 {found}, expected {spec.sha256}. Replace it with the original "
                f"file, or delete it to download it again from {spec.url}."
            )
        return path
    return _download(spec, path, url or spec.url, timeout)


def _download(spec: DataFile, path: Path, url: str, timeout: float) -> Path:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError) as err:
        raise DataError(
            f"{spec.name} is not in the data directory {path.parent} and could not be downloaded "
            f"from {url} ({err}). Set {DATA_ENV} to a folder holding {spec.name} "
            f"(sha256 {spec.sha256}), or connect to the internet."
        ) from err
    found = sha256_bytes(payload)
    if found != spec.sha256:
        raise DataError(
            f"downloaded {spec.name} from {url} has sha256 {found}, expected {spec.sha256}; "
            f"nothing was written. Set {DATA_ENV} to a folder holding the original file."
        )
    return write_atomic(path, lambda tmp: tmp.write_bytes(payload))


def read_text(name: str) -> str:
    return data_path(name).read_text(encoding="utf-8")
