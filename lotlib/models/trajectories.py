"""Cached trajectory extraction: sharded, checksummed, resumable.

A cache entry lives in `<cache>/trajectories/<key>/` where `key` hashes everything that changes
the result (model identity and dtype, corpus ids, capture options, CAPTURE_VERSION); not the device,
where results agree. Shards are written to
a temporary file and renamed; `manifest.json` records each finished shard's sha256. On load
every shard is checked: a missing or corrupt shard is recomputed, never silently used.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..storage.atomic import write_atomic, write_text_atomic
from ..storage.locks import file_lock
from ..storage.paths import cache_dir
from .bounds import check_context, pilot_count
from .capture import capture
from .corpus import Corpus
from .loading import Model

CAPTURE_VERSION = 1  # bump when capture() changes what it returns


def cache_key(model: Model, corpus: Corpus, all_positions: bool, dtype: str, shard_size: int) -> dict:
    return {"model": model.name, "model_identity": model.identity, "model_dtype": model.dtype, "corpus": corpus.name,
            "corpus_identity": corpus.identity, "n_s": corpus.n_s, "n_k": corpus.n_k,
            "all_positions": all_positions, "dtype": dtype, "shard_size": shard_size,
            "capture_version": CAPTURE_VERSION}


def cache_folder(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{Path(key['model']).name}-{key['corpus'].split('(')[0]}")
    return cache_dir() / "trajectories" / f"{readable}-{digest}"


def trajectories(model: Model, corpus: Corpus, *, all_positions: bool = False, dtype: str = "float32",
                 shard_size: int = 256, batch_size: int = 32, progress: bool = True) -> np.ndarray:
    """Trajectories of `corpus` through `model`, `(N_s, L+1, d)`, from the disk cache when possible."""
    check_context(corpus.n_k, model.view.max_positions, param="the corpus's n_k", model=model.name)
    key = cache_key(model, corpus, all_positions, dtype, shard_size)
    folder = cache_folder(key)
    with file_lock(folder.with_name(folder.name + ".lock")):  # parallel runs wait, then reuse the shards
        return _extract(model, corpus, folder, key, all_positions, dtype, shard_size, batch_size, progress)


def walden_trajectories(model: str, n_k: int = 50, n_s: int | str | None = None, bos: bool = False, *,
                        device: str = "auto", dtype: str = "float32", **options) -> tuple[Model, Corpus, np.ndarray]:
    """The chapters' usual start: load `model` on `device` in `dtype`, cut Walden into `(N_s, n_k)`
    pseudo-sentences, and get their trajectories `(N_s, L+1, d)` from the cache (`options` go to
    `trajectories`). `n_s` is a count, a multiple of the width ("D", "1.5D") or None (all of Walden);
    `n_k` (plus BOS) must fit the model's context."""
    from .corpus import walden
    from .loading import load_model

    lm = load_model(model, device=device, dtype=dtype)
    check_context(n_k, lm.view.max_positions, bos, model=lm.name)
    corpus = walden(lm.tokenizer, n_k=n_k, n_s=pilot_count(n_s, lm.view.d_model, model=lm.name), bos=bos)
    return lm, corpus, trajectories(lm, corpus, **options)


def _extract(model: Model, corpus: Corpus, folder: Path, key: dict, all_positions: bool, dtype: str,
             shard_size: int, batch_size: int, progress: bool) -> np.ndarray:
    if not (folder / "key.json").exists():  # what the entry holds, for people browsing the cache
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / "key.json", json.dumps(key, indent=1, sort_keys=True))
    manifest = _read_manifest(folder)
    shards = []
    bar = tqdm(range(0, corpus.n_s, shard_size), desc=f"trajectories {model.name} / {corpus.name}", unit="shard",
               disable=not progress)
    for start in bar:
        path = folder / f"shard-{start // shard_size:05d}.npy"
        shard = _load_shard(path, manifest.get(path.name))
        if shard is None:
            shard = capture(model, corpus.ids[start:start + shard_size], all_positions=all_positions,
                            batch_size=batch_size, dtype=dtype, progress=False)
            payload = _npy_bytes(shard)
            write_atomic(path, lambda tmp: tmp.write_bytes(payload))
            manifest[path.name] = hashlib.sha256(payload).hexdigest()
            write_text_atomic(folder / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        shards.append(shard)
    return np.concatenate(shards)


def _read_manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _load_shard(path: Path, expected_sha: str | None) -> np.ndarray | None:
    if not path.exists():
        return None
    payload = path.read_bytes()
    if hashlib.sha256(payload).hexdigest() != expected_sha:
        warnings.warn(f"trajectory cache shard {path} does not match its recorded sha256; recomputing it",
                      stacklevel=3)
        path.unlink()
        return None
    return np.load(io.BytesIO(payload))


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
