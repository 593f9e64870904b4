"""Cached trajectory extraction: sharded, checksummed, resumable, readable without write access.

A cache entry lives in `<cache>/trajectories/<key>/` where `key` hashes everything that changes
the result (model identity and dtype, corpus ids, capture options, CAPTURE_VERSION); not the device,
where results agree.

How a shard is verified: each shard is written to a temporary file and renamed to
`shard-<index>-<sha256>.npy`, so its name carries the sha256 of its bytes and it verifies on its own. On
load every shard's bytes are hashed and compared with its name; a missing or corrupt shard is recomputed,
never silently used. `manifest.json` lists the finished shards and their sha256 for people browsing the
cache: it is rebuilt from the shards that verify when it is missing, and nothing is recomputed for it.
(Entries written before shards carried their sha256 are named `shard-<index>.npy` and verified against
their `manifest.json`.)

Reading a finished entry takes no lock and writes nothing, so a cache on a read-only file system serves
every entry it holds. Filling an entry takes a lock beside it (parallel runs wait, then reuse the shards);
a cache that cannot be written fails with one line naming the entry and LOTLIB_CACHE_DIR.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from contextlib import suppress
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from ..storage.atomic import write_atomic, write_text_atomic
from ..storage.locks import file_lock
from ..storage.paths import NotWritableError, cache_dir
from .bounds import check_context, pilot_count
from .capture import capture
from .corpus import Corpus
from .loading import Model

CAPTURE_VERSION = 1  # bump when capture() changes what it returns
SHARD = re.compile(
    r"^shard-(\d{5})(?:-([0-9a-f]{64}))?\.npy$"
)  # index, and the sha256 of the file's bytes


class Shard(NamedTuple):
    """One verified shard of a cache entry: its file, the sha256 of its bytes, its trajectories."""

    path: Path
    sha256: str
    array: np.ndarray


def cache_key(
    model: Model, corpus: Corpus, all_positions: bool, dtype: str, shard_size: int
) -> dict:
    """Everything an entry's content depends on."""
    return {
        "model": model.name,
        "model_identity": model.identity,
        "model_dtype": model.dtype,
        "corpus": corpus.name,
        "corpus_identity": corpus.identity,
        "n_s": corpus.n_s,
        "n_k": corpus.n_k,
        "all_positions": all_positions,
        "dtype": dtype,
        "shard_size": shard_size,
        "capture_version": CAPTURE_VERSION,
    }


def cache_folder(key: dict) -> Path:
    """The entry's folder: a readable model and corpus name, and a hash of `key`."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    readable = re.sub(
        r"[^A-Za-z0-9_.-]+",
        "_",
        f"{Path(key['model']).name}-{key['corpus'].split('(')[0]}",
    )
    return cache_dir() / "trajectories" / f"{readable}-{digest}"


def trajectories(
    model: Model,
    corpus: Corpus,
    *,
    all_positions: bool = False,
    dtype: str = "float32",
    shard_size: int = 256,
    batch_size: int = 32,
    progress: bool = True,
) -> np.ndarray:
    """Trajectories of `corpus` through `model`, `(N_s, L+1, d)`, from the disk cache when possible."""
    if corpus.n_s == 0:
        raise ValueError(
            f"{corpus!r} is empty: there are no pseudo-sentences to extract (give a longer text "
            f"or n_s >= 1)"
        )
    if batch_size < 1 or shard_size < 1:
        raise ValueError(
            f"batch_size and shard_size must be at least 1 pseudo-sentence, got batch_size = "
            f"{batch_size}, shard_size = {shard_size}"
        )
    check_context(
        corpus.n_k, model.view.max_positions, param="the corpus's n_k", model=model.name
    )
    key = cache_key(model, corpus, all_positions, dtype, shard_size)
    folder = cache_folder(key)
    n_shards = -(-corpus.n_s // shard_size)
    shards, _ = _scan(folder, n_shards)
    if (
        len(shards) == n_shards
    ):  # a finished entry: no lock, and nothing written unless the manifest is gone
        with suppress(NotWritableError):
            _write_manifest(folder, shards)
    else:
        with file_lock(folder.with_name(folder.name + ".lock")):
            shards = _fill(
                model,
                corpus,
                folder,
                key,
                all_positions,
                dtype,
                shard_size,
                batch_size,
                progress,
            )
    return np.concatenate([shards[i].array for i in range(n_shards)])


def walden_trajectories(
    model: str,
    n_k: int = 50,
    n_s: int | str | None = None,
    bos: bool | None = None,
    *,
    device: str = "auto",
    dtype: str = "float32",
    **options,
) -> tuple[Model, Corpus, np.ndarray]:
    """The chapters' usual start: load `model` on `device` in `dtype`, cut Walden into `(N_s, n_k)`
    pseudo-sentences (with BOS as the tokenizer does, unless `bos` says), and get their trajectories
    `(N_s, L+1, d)` from the cache (`options` go to `trajectories`). `n_s` is a count, a multiple of the width
    ("D", "1.5D") or None (all of Walden); `n_k` (plus BOS) must fit the model's context."""
    from .corpus import bos_prefix, walden
    from .loading import load_model

    lm = load_model(model, device=device, dtype=dtype)
    bos = bool(bos_prefix(lm.tokenizer, bos))
    check_context(n_k, lm.view.max_positions, bos, model=lm.name)
    corpus = walden(
        lm.tokenizer,
        n_k=n_k,
        n_s=pilot_count(n_s, lm.view.d_model, model=lm.name),
        bos=bos,
    )
    return lm, corpus, trajectories(lm, corpus, **options)


def _scan(
    folder: Path, n_shards: int
) -> tuple[dict[int, Shard], list[tuple[Path, str]]]:
    """The entry's shards that verify, by index, and the files that do not (with the reason). Writes nothing."""
    recorded = _read_manifest(
        folder
    )  # only entries from before shards named their sha256 need it
    good, bad = {}, []
    for path in sorted(folder.glob("shard-*.npy")):
        match = SHARD.match(path.name)
        if not match or int(match[1]) >= n_shards:
            continue
        expected = match[2] or recorded.get(path.name)
        if expected is None:
            bad.append(
                (
                    path,
                    "has no recorded sha256 (an entry from before shards named their sha256, "
                    "whose manifest.json is gone)",
                )
            )
            continue
        try:
            payload = path.read_bytes()
        except FileNotFoundError:  # replaced by a writer meanwhile
            continue
        if hashlib.sha256(payload).hexdigest() != expected:
            bad.append((path, "does not match its recorded sha256"))
            continue
        good[int(match[1])] = Shard(path, expected, np.load(io.BytesIO(payload)))
    return good, bad


def _fill(
    model: Model,
    corpus: Corpus,
    folder: Path,
    key: dict,
    all_positions: bool,
    dtype: str,
    shard_size: int,
    batch_size: int,
    progress: bool,
) -> dict[int, Shard]:
    """Compute the entry's missing shards (called under the entry's lock)."""
    n_shards = -(-corpus.n_s // shard_size)
    shards, bad = _scan(
        folder, n_shards
    )  # another process may have filled it while we waited
    for path, reason in bad:
        warnings.warn(
            f"trajectory cache shard {path} {reason}; recomputing it", stacklevel=3
        )
        path.unlink(missing_ok=True)
    if not (
        folder / "key.json"
    ).exists():  # what the entry holds, for people browsing the cache
        write_text_atomic(
            folder / "key.json", json.dumps(key, indent=1, sort_keys=True)
        )
    missing = [i for i in range(n_shards) if i not in shards]
    for index in tqdm(
        missing,
        desc=f"trajectories {model.name} / {corpus.name}",
        unit="shard",
        disable=not progress,
    ):
        array = capture(
            model,
            corpus.ids[index * shard_size : (index + 1) * shard_size],
            all_positions=all_positions,
            batch_size=batch_size,
            dtype=dtype,
            progress=False,
        )
        payload = _npy_bytes(array)
        sha = hashlib.sha256(payload).hexdigest()
        path = write_atomic(
            folder / f"shard-{index:05d}-{sha}.npy",
            lambda tmp: tmp.write_bytes(payload),
        )
        shards[index] = Shard(path, sha, array)
        _write_manifest(
            folder, shards
        )  # after each shard: an interrupted extraction lists what it finished
    _write_manifest(folder, shards)
    return shards


def _read_manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write_manifest(folder: Path, shards: dict[int, Shard]) -> None:
    """`manifest.json`: shard file name -> sha256 of the shards in `shards`, written when it differs."""
    manifest = {s.path.name: s.sha256 for s in shards.values()}
    if _read_manifest(folder) != manifest:
        write_text_atomic(
            folder / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True)
        )


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
