"""Seeded UMAPs of embedding rows, cached on disk, with a token's path placed on them."""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..models.loading import Model
from ..stats import Estimate, over_seeds
from ..storage.atomic import write_atomic, write_text_atomic
from ..storage.paths import cache_dir
from .lens import TokenPath, final_normed

# below this many rows umap's fit computes the distance of every pair of rows (exact neighbours)
SMALL_DATA = 4096


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
        "fit": "precomputed distances" if data.shape[0] < SMALL_DATA else "rows",
    }


def umap_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    what = "".join(c if c.isalnum() else "_" for c in key["what"])
    return cache_dir() / "umap" / f"{what}-{key['rows']}-{digest}.pkl"


@dataclass(frozen=True)
class FittedUmap:
    """A fitted `umap.UMAP` (`reducer`) and the rows `data` `(n, d)` (float32, C order) it was fitted on:
    `embedding_` `(n, k)` their places, and `transform`."""

    reducer: object
    data: np.ndarray

    @property
    def embedding_(self) -> np.ndarray:
        return self.reducer.embedding_

    def transform(self, points: np.ndarray) -> np.ndarray:
        """The places `(m, k)` of new points `(m, d)`: umap's `transform` of them, given their distances to
        the rows (`umap_compiled.cross_euclidean`, the ones umap computes) where the reducer was fitted on
        precomputed distances."""
        if self.reducer.metric != "precomputed":
            return self.reducer.transform(points)
        from .umap_compiled import cross_euclidean, on_threads

        points = np.ascontiguousarray(points, dtype=np.float32)
        distances = on_threads(self.reducer.n_jobs, cross_euclidean, points, self.data)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Transforming new data with precomputed")
            return self.reducer.transform(distances)


def fit_umap(rows: np.ndarray, **options) -> FittedUmap:
    """`umap.UMAP(**options)` fitted on `rows` `(n, d)` (float32, C order), Euclidean, with the rows.

    Below `SMALL_DATA` rows umap's own fit computes every pairwise distance with one Python call of its
    compiled metric per pair; here they come from one compiled loop (`umap_compiled.pairwise_euclidean`,
    the same values bit for bit, on `n_jobs` threads as umap runs its own code) and the reducer is fitted
    on them with metric="precomputed": the same graph and embedding. Not where the graph has more than
    2 x n_components connected components: umap's spectral initialisation then places the components by
    their centroids' distances, which distances alone do not give, so the reducer is fitted on the rows."""
    import umap
    from scipy.sparse.csgraph import connected_components

    from .umap_compiled import on_threads, pairwise_euclidean

    if len(rows) < SMALL_DATA:
        reducer = umap.UMAP(metric="precomputed", **options)
        distances = on_threads(reducer.n_jobs, pairwise_euclidean, rows)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "using precomputed metric")
            reducer.fit(distances)
        if connected_components(reducer.graph_)[0] <= 2 * reducer.n_components:
            return FittedUmap(reducer, rows)
    return FittedUmap(umap.UMAP(**options).fit(rows), rows)


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
) -> FittedUmap:
    """A seeded UMAP (spectral init) fitted on `data` `(n, d)` (`fit_umap`), from the disk cache when possible.

    `identity` names the model, `what` the matrix (both join the cache key with the rows' content). The
    first fit on a machine compiles numba code (tens of seconds), kept on disk for the next processes
    (`umap_compiled.cache_compilation`); the pickle includes the index `transform` needs.
    """
    from .umap_compiled import cache_compilation

    cache_compilation(cache_dir() / "numba")
    rows = np.ascontiguousarray(data, dtype=np.float32)
    key = umap_key(rows, identity, what, seed, n_neighbors, min_dist, n_components)
    path = umap_path(key)
    if path.exists():
        try:
            return FittedUmap(pickle.loads(path.read_bytes()), rows)
        except Exception as err:  # a pickle from another umap/numba build: refit
            warnings.warn(
                f"UMAP cache {path} could not be read ({err!r}); refitting",
                stacklevel=2,
            )
    with tqdm(
        total=3, desc=f"UMAP of {what} ({data.shape[0]} rows)", disable=not progress
    ) as bar:
        bar.set_postfix_str("neighbours, spectral init, epochs")
        fitted = fit_umap(
            rows,
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
        fitted.reducer.tqdm_kwds["disable"] = True
        bar.update()
        bar.set_postfix_str("search index for transform")
        payload = pickle.dumps(fitted.reducer)
        bar.update()
        bar.set_postfix_str(f"cache {path.name}")
        write_atomic(path, lambda tmp: tmp.write_bytes(payload))
        write_text_atomic(
            path.with_suffix(".json"), json.dumps(key, indent=1, sort_keys=True)
        )
        bar.update()
    return fitted


def neighbour_agreement(
    states: np.ndarray, rows: np.ndarray, k: int = 15
) -> np.ndarray:
    """Per state `(m, d)`: the share of its `k` nearest `rows` `(n, d)` in Euclidean distance (what UMAP's
    `transform` looks up) that are also among its `k` rows of largest dot product (what tied logits rank):
    why a far-away normalized state lands near its top logit tokens on the map."""
    dots = states @ rows.T  # (m, n)
    # ||state||^2 is the same for all rows
    nearest = np.argsort((rows**2).sum(1) - 2 * dots, axis=1)[:, :k]
    largest = np.argsort(-dots, axis=1)[:, :k]
    return (nearest[:, :, None] == largest[:, None, :]).any(-1).mean(-1)


def approach_ratios(
    start: np.ndarray, end: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """`||end - p||` / `||start - p||` for each point p of `points` `(n, k)`, `(n,)`: below 1 the path from
    `start` to `end` `(k,)` ends closer to p than it starts; the smaller, the more it heads for p."""
    return np.linalg.norm(points - end, axis=1) / np.linalg.norm(points - start, axis=1)


def approach_rank(ratios: np.ndarray, target: float) -> float:
    """Share of `ratios` `(n,)` (the other tokens) smaller than the `target`'s: 0 when the path heads for the
    target more than for any other token, about 1/2 when the target is nothing special."""
    return float(np.mean(np.asarray(ratios) < target))


@dataclass(frozen=True)
class PathMap:
    """A token's path on one seeded UMAP: `embedding` `(n, 3)` the fitted rows' places, `path` `(L+2, 3)`
    x(0), final_norm(x(0)), ..., final_norm(x(L)) placed by one `transform`; `at_current`, `at_target` the
    rows of the current and the next token; `landmarks` their labels and places."""

    seed: int
    embedding: np.ndarray
    path: np.ndarray
    at_current: int
    at_target: int
    landmarks: dict[str, np.ndarray]

    @property
    def distance(self) -> np.ndarray:
        """Map distance of final_norm(x(t)) to the next token's row, t = 0..L: `(L+1,)`."""
        return np.linalg.norm(self.path[1:] - self.embedding[self.at_target], axis=1)

    @property
    def ratios(self) -> np.ndarray:
        """`approach_ratios` of the normalized path for every fitted row: `(n,)`."""
        return approach_ratios(self.path[1], self.path[-1], self.embedding)

    @property
    def other_ratios(self) -> np.ndarray:
        """`ratios` of every row but the next token's: `(n-1,)`."""
        return np.delete(self.ratios, self.at_target)


@dataclass(frozen=True)
class EmbeddingMaps:
    """UMAPs of embedding rows (one per seed) with a token's path on each. `what` names the fitted matrix,
    `rows` how many of its rows each map is fitted on (`drawn`: a seeded draw per map, else the first ones);
    `fit_ids` `(n,)` the drawn map's token ids, those rows and the current and the next token (`labels`
    decoded), `row_norms` `(n,)` their norms, `agreement` `(L+1,)` the path's `neighbour_agreement` with
    them; `maps[0]` is the one drawn."""

    what: str
    rows: int
    drawn: bool
    fit_ids: np.ndarray
    labels: list[str]
    row_norms: np.ndarray
    agreement: np.ndarray
    maps: list[PathMap]

    @property
    def seeds(self) -> list[int]:
        return [m.seed for m in self.maps]

    @property
    def target_ratio(self) -> Estimate:
        """The next token's distance ratio (end / start), mean over seeds."""
        values = [m.ratios[m.at_target] for m in self.maps]
        return over_seeds(np.array(values), unit="UMAP seeds")

    @property
    def ranks_by_seed(self) -> np.ndarray:
        """Per seed, the share of the other tokens approached more than the next token (`approach_rank`)."""
        return np.array(
            [approach_rank(m.other_ratios, m.ratios[m.at_target]) for m in self.maps]
        )

    @property
    def target_rank(self) -> Estimate:
        """`ranks_by_seed`, mean over seeds, its interval clipped to [0, 1] (a share)."""
        rank = over_seeds(self.ranks_by_seed, unit="UMAP seeds")
        return replace(rank, lo=max(rank.lo, 0.0), hi=min(rank.hi, 1.0))

    @property
    def approached(self) -> float:
        """Share of the other tokens the path ends closer to than it starts, mean over seeds."""
        return float(np.mean([np.mean(m.other_ratios < 1) for m in self.maps]))


def map_rows(vocab: int, rows: int, keep, seed: int | None) -> np.ndarray:
    """The token ids `(n,)` a map is fitted on, sorted: `rows` of the `vocab` embedding rows (the first ones
    when `seed` is None, as in the paper's code; else a seeded draw without replacement, so that a repetition
    also resamples which tokens make the map), plus the ids `keep`. All rows when `rows` >= `vocab`."""
    if rows >= vocab:
        drawn = np.arange(vocab)
    elif seed is None:
        drawn = np.arange(rows)
    else:
        drawn = np.random.default_rng(seed).choice(vocab, size=rows, replace=False)
    return np.union1d(drawn, keep)


def embedding_maps(
    model: Model,
    path: TokenPath,
    *,
    seeds: list[int],
    rows: int = 10000,
    drawn: bool = True,
    normalized: bool = False,
    n_neighbors: int = 15,
    min_dist: float = 0.1,
) -> EmbeddingMaps:
    """One `fitted_umap` per seed of `rows` rows of W_E (of final_norm(W_E) with `normalized`), plus the
    current and the next token's rows, with `path` placed on each. With `drawn`, each seed fits on its own
    seeded draw of rows (`map_rows`): the spread over seeds then carries both UMAP's randomness and which
    tokens make the map; else every seed fits on the first `rows` (the paper's code). The fitted rows' ids,
    labels, norms and neighbour agreement describe the drawn map (the first seed's)."""
    W_E = model.view.W_E.detach().float().cpu().numpy()
    rows = min(rows, len(W_E))
    what = "final_norm(W_E)" if normalized else "W_E"
    maps, first = [], None
    for seed in seeds:
        fit_ids = map_rows(
            len(W_E), rows, [path.current, path.target], seed if drawn else None
        )
        at_current, at_target = np.searchsorted(fit_ids, [path.current, path.target])
        fitted = final_normed(model, W_E[fit_ids]) if normalized else W_E[fit_ids]
        reducer = fitted_umap(
            fitted,
            identity=model.identity,
            what=what,
            seed=seed,
            n_neighbors=n_neighbors,
            min_dist=min_dist,
        )
        placed = reducer.transform(np.vstack([path.X[:1], path.normed]))
        landmarks = {
            path.current_name: reducer.embedding_[at_current],
            path.target_name: reducer.embedding_[at_target],
        }
        maps.append(
            PathMap(seed, reducer.embedding_, placed, at_current, at_target, landmarks)
        )
        first = first or (fit_ids, fitted)
    fit_ids, fitted = first
    return EmbeddingMaps(
        what=what,
        rows=rows,
        drawn=drawn,
        fit_ids=fit_ids,
        labels=[model.tokenizer.decode([int(i)]) for i in fit_ids],
        row_norms=np.linalg.norm(fitted, axis=1),
        agreement=neighbour_agreement(path.normed, fitted, k=n_neighbors),
        maps=maps,
    )
