"""A seeded UMAP of embedding rows, cached on disk (new points are placed with `transform`), and
`neighbour_agreement`: why a far-away normalized state lands near its top logit tokens on the map, and
`approach_ratios`: whether a path on the map heads for one token more than for the others.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..storage.atomic import write_atomic, write_text_atomic
from ..storage.paths import cache_dir


def umap_key(
    data: np.ndarray,
    identity: str,
    what: str,
    seed: int,
    n_neighbors: int,
    min_dist: float,
    n_components: int,
) -> dict:
    """Everything that changes a fitted UMAP: model identity, which rows, their content, parameters, version."""
    import umap

    digest = hashlib.sha256(
        np.ascontiguousarray(data, dtype=np.float32).tobytes()
    ).hexdigest()[:20]
    return {
        "identity": identity,
        "what": what,
        "rows": int(data.shape[0]),
        "dim": int(data.shape[1]),
        "data_sha256": digest,
        "n_neighbors": n_neighbors,
        "min_dist": min_dist,
        "n_components": n_components,
        "init": "spectral",
        "seed": seed,
        "umap": umap.__version__,
    }


def umap_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    what = "".join(c if c.isalnum() else "_" for c in key["what"])
    return cache_dir() / "umap" / f"{what}-{key['rows']}-{digest}.pkl"


def fitted_umap(
    data: np.ndarray,
    *,
    identity: str,
    what: str = "W_E",
    seed: int = 0,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
    n_components: int = 3,
    progress: bool = True,
):
    """A seeded UMAP (spectral init) fitted on `data` `(n, d)`, from the disk cache when possible.

    `identity` names the model, `what` the matrix (both join the cache key with the rows' content). The
    first fit compiles numba code (tens of seconds); the pickle includes the index `transform` needs.
    """
    import umap

    key = umap_key(data, identity, what, seed, n_neighbors, min_dist, n_components)
    path = umap_path(key)
    if path.exists():
        try:
            return pickle.loads(path.read_bytes())
        except Exception as err:  # a pickle from another umap/numba build: refit
            warnings.warn(
                f"UMAP cache {path} could not be read ({err!r}); refitting",
                stacklevel=2,
            )
    reducer = umap.UMAP(
        n_neighbors=n_neighbors,
        min_dist=min_dist,
        n_components=n_components,
        init="spectral",
        random_state=seed,
        n_jobs=1,
        tqdm_kwds={
            "disable": not progress,
            "desc": "UMAP epochs",
            "mininterval": 5,
            "leave": False,
        },
    )
    with tqdm(
        total=3, desc=f"UMAP of {what} ({data.shape[0]} rows)", disable=not progress
    ) as bar:
        bar.set_postfix_str(
            "neighbours, spectral init, epochs (first call compiles numba)"
        )
        reducer.fit(np.asarray(data, dtype=np.float32))
        reducer.tqdm_kwds["disable"] = True
        bar.update()
        bar.set_postfix_str("search index for transform")
        payload = pickle.dumps(reducer)
        bar.update()
        bar.set_postfix_str(f"cache {path.name}")
        write_atomic(path, lambda tmp: tmp.write_bytes(payload))
        write_text_atomic(
            path.with_suffix(".json"), json.dumps(key, indent=1, sort_keys=True)
        )
        bar.update()
    return reducer


def neighbour_agreement(
    states: np.ndarray, rows: np.ndarray, k: int = 15
) -> np.ndarray:
    """Per state `(m, d)`: the share of its `k` nearest `rows` `(n, d)` in Euclidean distance (what UMAP's
    `transform` looks up) that are also among its `k` rows of largest dot product (what tied logits rank)."""
    dots = states @ rows.T  # (m, n)
    nearest = np.argsort((rows**2).sum(1) - 2 * dots, axis=1)[
        :, :k
    ]  # ||state||^2 is the same for all rows
    largest = np.argsort(-dots, axis=1)[:, :k]
    return (nearest[:, :, None] == largest[:, None, :]).any(-1).mean(-1)


def approach_ratios(
    start: np.ndarray, end: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """||end - p|| / ||start - p|| for each point p of `points` `(n, k)`, `(n,)`: below 1 the path from
    `start` to `end` `(k,)` ends closer to p than it starts; the smaller, the more it heads for p."""
    return np.linalg.norm(points - end, axis=1) / np.linalg.norm(points - start, axis=1)


def approach_rank(ratios: np.ndarray, target: float) -> float:
    """Share of `ratios` `(n,)` (the other tokens) smaller than the `target`'s: 0 when the path heads for the
    target more than for any other token, about 1/2 when the target is nothing special."""
    return float(np.mean(np.asarray(ratios) < target))
