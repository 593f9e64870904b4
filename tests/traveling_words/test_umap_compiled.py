"""UMAP fitted on compiled all-pairs distances equals umap's own fit; numba's code for it is kept on disk."""
import json
import subprocess
import sys

import numpy as np
import pytest

from lotlib.traveling_words.umap_map import SMALL_DATA, FittedUmap, fit_umap, umap_key

OPTIONS = dict(n_neighbors=15, min_dist=0.1, n_components=3, init="spectral", random_state=0, n_jobs=1,
               tqdm_kwds={"disable": True})


def umap_fit_on_rows(rows: np.ndarray, **options):
    """Test oracle: `fit_umap` as umap fits the rows itself (every pair's distance through sklearn's
    `pairwise_distances`, one call of umap's compiled metric per pair)."""
    import umap

    return umap.UMAP(**options).fit(rows)


@pytest.mark.parametrize("d", [3, 64, 577])
def test_compiled_distances_equal_umaps_bit_for_bit(d):
    from sklearn.metrics import pairwise_distances
    from umap.distances import euclidean

    from lotlib.traveling_words.umap_compiled import cross_euclidean, pairwise_euclidean

    rng = np.random.default_rng(d)
    rows = (rng.normal(size=(150, d)) * rng.uniform(0.1, 5, size=d)).astype(np.float32)
    points = (rows[:7] * 0.9 + 0.05).astype(np.float32)
    ours = pairwise_euclidean(rows)
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours, pairwise_distances(rows, metric=euclidean))
    np.testing.assert_array_equal(cross_euclidean(points, rows), pairwise_distances(points, rows, metric=euclidean))


def test_the_map_fitted_on_precomputed_distances_is_umaps_own():
    """The same neighbour graph and embedding bit for bit, and new points placed where umap's own transform
    of the rows places them."""
    rng = np.random.default_rng(0)
    rows = (rng.normal(size=(400, 32)) + rng.normal(size=(4, 32)).repeat(100, 0)).astype(np.float32)
    points = (rows[[3, 150, 399]] * 1.2 + 0.1).astype(np.float32)
    ours = fit_umap(rows, **OPTIONS)
    theirs = umap_fit_on_rows(rows, **OPTIONS)
    assert ours.reducer.metric == "precomputed" and theirs.metric == "euclidean"
    assert (ours.reducer.graph_ != theirs.graph_).nnz == 0
    np.testing.assert_array_equal(ours.embedding_, theirs.embedding_)
    np.testing.assert_array_equal(ours.transform(points), theirs.transform(points))
    np.testing.assert_array_equal(FittedUmap(theirs, rows).transform(points), theirs.transform(points))


def test_a_graph_of_many_components_is_fitted_on_the_rows():
    """Eight far-apart clusters: umap's spectral initialisation places the components by their centroids'
    distances, which precomputed distances do not give, so the map is fitted on the rows, as umap's own."""
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(1)
    centers = rng.normal(size=(8, 64)) * 0.06
    rows = (centers.repeat(40, 0) + 0.002 * rng.normal(size=(320, 64))).astype(np.float32)
    ours = fit_umap(rows, **OPTIONS)
    theirs = umap_fit_on_rows(rows, **OPTIONS)
    assert connected_components(theirs.graph_)[0] > 2 * OPTIONS["n_components"]
    assert ours.reducer.metric == "euclidean"
    np.testing.assert_array_equal(ours.embedding_, theirs.embedding_)


def test_the_cache_key_names_how_the_map_is_fitted():
    small, large = np.zeros((SMALL_DATA - 1, 2)), np.zeros((SMALL_DATA, 2))
    keys = [umap_key(x, "tiny", "W_E", 0, 15, 0.1, 3)["fit"] for x in (small, large)]
    assert keys == ["precomputed distances", "rows"]


CHILD = """
import json, sys
import numpy as np
from lotlib.traveling_words import umap_compiled
from umap.umap_ import smooth_knn_dist
umap_compiled.cache_compilation(sys.argv[1])
rows = np.random.default_rng(0).normal(size=(60, 5)).astype(np.float32)
distances = umap_compiled.pairwise_euclidean(rows)
sigmas, _ = smooth_knn_dist(np.sort(distances, 1)[:, :15], 15.0)
compiled = [umap_compiled.pairwise_euclidean, smooth_knn_dist]
print(json.dumps({"hits": [sum(f.stats.cache_hits.values()) for f in compiled],
                  "misses": [sum(f.stats.cache_misses.values()) for f in compiled],
                  "values": [float(distances.sum()), float(sigmas.sum())]}))
"""


def test_a_second_process_loads_the_compiled_code_from_the_cache(tmp_path):
    """The first process compiles (and writes the cache), the next loads umap's and this package's code
    from it, with the same results."""
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True,
                                  check=True).stdout.splitlines()[-1])
        for _ in range(2)
    ]
    assert runs[0]["misses"] == [1, 1] and runs[0]["hits"] == [0, 0]
    assert runs[1]["hits"] == [1, 1] and runs[1]["misses"] == [0, 0]
    assert runs[0]["values"] == runs[1]["values"]
    assert any(tmp_path.rglob("*.nbi"))


def test_the_compiled_loops_run_on_the_threads_umap_is_given():
    import numba

    from lotlib.traveling_words.umap_compiled import on_threads

    before = numba.get_num_threads()
    assert on_threads(1, numba.get_num_threads) == 1
    assert on_threads(-1, numba.get_num_threads) == before  # n_jobs = -1: all of them
    assert numba.get_num_threads() == before
