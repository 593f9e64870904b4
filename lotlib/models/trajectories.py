"""Cached trajectory extraction: sharded, content-addressed, checksummed, resumable, readable without write access."""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from ..storage.atomic import write_atomic, write_text_atomic
from ..storage.locks import file_lock
from ..storage.paths import cache_dir
from .bounds import check_context, pilot_count
from .capture import capture
from .corpus import Corpus, bos_prefix, walden
from .devices import DeviceRequest
from .loading import Model, load_model

CAPTURE_VERSION = 1  # bump when capture() changes what it returns


class Shard(NamedTuple):
    """One verified shard: its file, the sha256 of its bytes, its trajectories."""

    path: Path
    sha256: str
    array: np.ndarray


def cache_key(model: Model, all_positions: bool, dtype: str, shard_size: int) -> dict:
    """Everything besides its token ids that a shard's content depends on."""
    return {
        "model": model.name,
        "model_identity": model.identity,
        "model_dtype": model.dtype,
        "all_positions": all_positions,
        "dtype": dtype,
        "shard_size": shard_size,
        "capture_version": CAPTURE_VERSION,
    }


def cache_folder(key: dict) -> Path:
    """The folder of the shards of `key`: a readable model name, and a hash of `key`."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(key["model"]).name)
    return cache_dir() / "trajectories" / f"{readable}-{digest}"


def ids_digest(ids: np.ndarray) -> str:
    """The name of the token ids `(n, N_k)` of one shard: the sha256 of their shape and int64 bytes."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    return hashlib.sha256(repr(ids.shape).encode() + ids.tobytes()).hexdigest()[:24]


def trajectories(
    model: Model,
    corpus: Corpus,
    *,
    all_positions: bool = False,
    dtype: str = "float32",
    shard_size: int = 64,
    batch_size: int = 32,
    progress: bool = True,
) -> np.ndarray:
    """Trajectories of `corpus` through `model`, `(N_s, L+1, d)`, from the disk cache when possible.

    The cache of a model lives in `<cache>/trajectories/<model>-<key>/`, where `key` hashes everything besides
    the token ids that changes a shard's content (`cache_key`); not the device, where results agree. A corpus
    is cut into shards of `shard_size` pseudo-sentences, and a shard is found by the sha256 of its own token
    ids (`ids_digest`), so corpora that share rows share shards: the first shards of Walden are captured once
    for every chapter that reads a prefix of Walden, whatever its N_s (only a last, partial shard is
    particular to its corpus).

    Shards are verified on load (`_find`) and missing ones filled under their own locks (`_fill_one`).
    """
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
    key = cache_key(model, all_positions, dtype, shard_size)
    folder = cache_folder(key)
    blocks = [
        corpus.ids[start : start + shard_size]
        for start in range(0, corpus.n_s, shard_size)
    ]
    names = [ids_digest(ids) for ids in blocks]
    shards = {i: _find(folder, name)[0] for i, name in enumerate(names)}
    missing = [i for i, shard in shards.items() if shard is None]
    if missing:
        # what the folder holds, for people browsing it
        if not (folder / "key.json").exists():
            write_text_atomic(
                folder / "key.json", json.dumps(key, indent=1, sort_keys=True)
            )
        bar = tqdm(
            total=len(missing),
            desc=f"trajectories {model.name} / {corpus.name}",
            unit="shard",
            disable=not progress,
        )

        def compute(i: int) -> np.ndarray:
            X = capture(
                model,
                blocks[i],
                all_positions=all_positions,
                batch_size=batch_size,
                dtype=dtype,
                progress=False,
            )
            return finite(X, f"model {model.name} ({model.revision}) on {corpus.name}")

        with bar:
            while missing:
                i, shards[i] = _fill_one(
                    folder, {j: names[j] for j in missing}, compute
                )
                missing.remove(i)
                bar.update()
    return np.concatenate([shards[i].array for i in range(len(blocks))])


def walden_trajectories(
    model: str,
    n_k: int = 50,
    n_s: int | str | None = None,
    bos: bool | None = None,
    *,
    device: DeviceRequest = "auto",
    dtype: str = "float32",
    **options,
) -> tuple[Model, Corpus, np.ndarray]:
    """The chapters' usual start: load `model` on `device` in `dtype`, cut Walden into `(N_s, n_k)`
    pseudo-sentences (with BOS as the tokenizer does, unless `bos` says), and get their trajectories
    `(N_s, L+1, d)` from the cache (`options` go to `trajectories`). `n_s` is a count, a multiple of the width
    ("D", "1.5D") or None (all of Walden); `n_k` (plus BOS) must fit the model's context."""

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


class NonFiniteTrajectories(ValueError):
    """A forward pass gave NaN or Inf: damaged weights or an overflowing dtype; nothing of it is cached."""


def finite(X: np.ndarray, what: str) -> np.ndarray:
    """`X` `(N, L+1, D)` unchanged when every value is finite; else `NonFiniteTrajectories` naming the layers."""
    bad = ~np.isfinite(X)
    if bad.any():
        layers = np.flatnonzero(bad.reshape(-1, *bad.shape[-2:]).any(axis=(0, 2)))
        raise NonFiniteTrajectories(
            f"{what}: NaN or Inf in the states of layers {layers.tolist()} (0 = embeddings), in "
            f"{int(bad.any(axis=tuple(range(1, bad.ndim))).sum())} of {len(X)} sequences; nothing was cached. "
            f"Check the model's weights (a damaged download or cache: reinstall or remove it) or run in "
            f"float32 (--dtype float32)"
        )
    return X


def _find(folder: Path, name: str) -> tuple[Shard | None, list[tuple[Path, str]]]:
    """The shard of the ids named `name` that verifies (or None), and the files of that name that do not
    (with the reason). Writes nothing.

    A shard is written to a temporary file and renamed to `shard-<ids>-<sha256>.npy` (`_fill_held`), so its
    name carries the sha256 of its bytes and it verifies on its own: every shard's bytes are hashed and
    compared with its name, and a missing or corrupt shard is recomputed, never silently used. Reading takes
    no lock, so a cache on a read-only file system serves every corpus it holds."""
    bad = []
    for path in sorted(folder.glob(f"shard-{name}-*.npy")):
        expected = path.stem.rsplit("-", 1)[1]
        try:
            payload = path.read_bytes()
        except FileNotFoundError:  # replaced by a writer meanwhile
            continue
        if hashlib.sha256(payload).hexdigest() != expected:
            bad.append((path, "does not match its recorded sha256"))
            continue
        array = np.load(io.BytesIO(payload))
        if not np.isfinite(array).all():  # written by weights that were damaged
            bad.append((path, "holds NaN or Inf"))
            continue
        return Shard(path, expected, array), bad
    return None, bad


def _fill_one(folder: Path, pending: dict[int, str], compute) -> tuple[int, Shard]:
    """One of the missing shards `pending` (corpus index -> ids name), filled by `compute(index)` unless a run
    filled it meanwhile: the first whose lock is free, else the first once its lock is free.

    Each shard has its own lock (`shard-<ids>.lock`), so runs that need the same shards share the work (each
    takes the shards nobody is computing, then waits for the rest); a cache that cannot be written fails with
    one line naming the shard and LOTLIB_CACHE_DIR."""
    for i, name in pending.items():
        with file_lock(folder / f"shard-{name}.lock", wait=False) as held:
            if held:
                return i, _fill_held(folder, name, partial(compute, i))
    i, name = next(iter(pending.items()))
    with file_lock(folder / f"shard-{name}.lock"):
        return i, _fill_held(folder, name, partial(compute, i))


def _fill_held(folder: Path, name: str, compute) -> Shard:
    """The shard `name`, computed by `compute()` unless a run filled it meanwhile (under its lock)."""
    shard, bad = _find(folder, name)
    for path, reason in bad:
        warnings.warn(
            f"trajectory cache shard {path} {reason}; recomputing it", stacklevel=5
        )
        path.unlink(missing_ok=True)
    if shard is not None:
        return shard
    array = compute()
    payload = _npy_bytes(array)
    sha = hashlib.sha256(payload).hexdigest()
    path = write_atomic(
        folder / f"shard-{name}-{sha}.npy", lambda tmp: tmp.write_bytes(payload)
    )
    return Shard(path, sha, array)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
