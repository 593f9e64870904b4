"""The analysis hot spots, old against new, timed in one run on the same synthetic inputs: `ensemble_svd`
(LAPACK's thin SVD against the Gram matrix), B2's scores per K (`torch.topk` over whole rows and fresh
tensors for the KL's terms, against `top_tokens`' blocks and work tensors), the separability's scaling (a StandardScaler pipeline per layer against one pass over
the layers), A7's UMAP fit (umap's own pairwise distances against compiled ones) and umap's numba
compilation in a fresh process (without and with the on-disk cache).

    python benchmarks/bench_analysis.py [--small] [--rounds 2] [--threads 1] [--no-compile]

Prints one row per hot spot and device (cpu, and cuda where torch sees one, for the scores per K): the best
of `--rounds` timings of the old and the new code, old / new, and the largest difference of their results.
The old implementations are the tests' oracles. `--small` runs in about a minute or two on two cores;
`--no-compile` skips the three fresh processes of the compilation row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

# the project's root for this folder: the tests' oracles are the old code, this checkout's lotlib the new,
# and benchmarks/coverage.py would stand in for the coverage package numba imports
ROOT = str(Path(__file__).resolve().parents[1])
sys.path[0] = ROOT

from lotlib.lines_of_thought.ensemble import ensemble_svd  # noqa: E402
from lotlib.lines_of_thought.null_tests import layer_separability  # noqa: E402
from lotlib.lines_of_thought.truncation import kl, shared_tokens, top_tokens  # noqa: E402
from lotlib.traveling_words.umap_map import fit_umap  # noqa: E402
from tests.lines_of_thought.test_ensemble import svd_ensemble_svd  # noqa: E402
from tests.lines_of_thought.test_null_tests import pipeline_layer_separability  # noqa: E402
from tests.lines_of_thought.test_truncation import allocating_kl, topk_tokens  # noqa: E402
from tests.traveling_words.test_umap_compiled import OPTIONS, umap_fit_on_rows  # noqa: E402

SIZES = {  # (full, small)
    "svd": ((2900, 3, 1024), (864, 3, 576)),  # (N, T, D)
    "scores": ((64, 50257, 20), (64, 50257, 8)),  # (pilots, V, values of K)
    "separability": ((1000, 4, 576), (300, 3, 256)),  # (per class, T, f)
    "umap": ((3000, 576), (1000, 64)),  # (rows, d)
}


def best(run, rounds: int) -> tuple[float, object]:
    """The shortest of `rounds` timings of `run()` and its last result."""
    seconds = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        out = run()
        seconds = min(seconds, time.perf_counter() - start)
    return seconds, out


def svd_row(size, rounds: int) -> tuple:
    X = np.random.default_rng(0).normal(size=size) + 0.3
    with threadpool_limits(limits=1):  # as ensemble_svd runs its LAPACK, both ways
        old_s, (U_old, S_old) = best(lambda: svd_ensemble_svd(X), rounds)
        new_s, (U_new, S_new) = best(lambda: ensemble_svd(X), rounds)
    cos = np.abs(np.einsum("tdk,tdk->tk", U_old, U_new))
    worst = max(np.abs(S_new / S_old - 1).max(), np.abs(1 - cos).max())
    return f"ensemble_svd {size}", old_s, new_s, f"{worst:.1e} (rel. S, 1-|cos|)"


def scores_row(size, rounds: int, device: str) -> tuple:
    """B2's reading of each K's distribution against p: KL (fresh tensors for its terms, or work tensors) and
    the count of shared top-5 tokens (`topk` over whole rows, or by blocks)."""
    n, V, n_ks = size
    generator = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(n_ks + 1, n, V, generator=generator) - 60
    logp = (logits[0] + 0.5 * logits[1:]).log_softmax(-1).to(device)
    full = logits[0].log_softmax(-1).to(device)

    def score(top, divergence, work):
        reference = top(full, 5)
        out = [(divergence(lp, full, work), shared_tokens(top(lp, 5), reference)) for lp in logp]
        return torch.stack([torch.stack(pair) for pair in out]).cpu()

    work = torch.empty_like(full), torch.empty_like(full)
    old_s, old = best(lambda: score(topk_tokens, allocating_kl, None), rounds)
    new_s, new = best(lambda: score(top_tokens, kl, work), rounds)
    worst = float((old - new).abs().max())
    return f"scores per K {(n, V)} x {n_ks} K", old_s, new_s, f"{worst:.1e} (KL, shared)"


def separability_row(size, rounds: int) -> tuple:
    n, T, f = size
    rng = np.random.default_rng(1)
    XA = rng.normal(size=(n, T, f)).astype(np.float32)
    XB = (rng.normal(size=(n, T, f)) + 0.05).astype(np.float32)
    old_s, old = best(lambda: pipeline_layer_separability(XA, XB), rounds)
    new_s, new = best(lambda: layer_separability(XA, XB, progress=False), rounds)
    return f"separability {size}", old_s, new_s, f"{np.abs(old - new).max():.1e} (accuracy)"


def umap_row(size, rounds: int) -> tuple:
    rng = np.random.default_rng(2)
    rows = (rng.normal(size=size) + rng.normal(size=(10, size[1])).repeat(size[0] // 10, 0)).astype(np.float32)
    points = (rows[:8] * 1.1).astype(np.float32)
    fit_umap(rows[:200], **OPTIONS).transform(rows[:2])  # numba compiles before the clock starts
    umap_fit_on_rows(rows[:200], **OPTIONS).transform(rows[:2])
    old_s, old = best(lambda: umap_fit_on_rows(rows, **OPTIONS), rounds)
    new_s, new = best(lambda: fit_umap(rows, **OPTIONS), rounds)
    worst = max(np.abs(old.embedding_ - new.embedding_).max(),
                np.abs(old.transform(points) - new.transform(points)).max())
    return f"UMAP fit {size}", old_s, new_s, f"{worst:.1e} (embedding, placed)"


CHILD = """
import json, sys, time
start = time.perf_counter()
import numpy as np
import umap
from lotlib.traveling_words import umap_compiled
if sys.argv[1]:
    umap_compiled.cache_compilation(sys.argv[1])
rows = np.random.default_rng(0).normal(size=(300, 16)).astype(np.float32)
reducer = umap.UMAP(n_components=3, random_state=0, n_jobs=1).fit(rows)
placed = reducer.transform(rows[:3] * 1.1)
print(json.dumps({"seconds": time.perf_counter() - start, "embedding": reducer.embedding_.tolist(),
                  "placed": placed.tolist()}))
"""


def compile_row() -> tuple:
    """A fresh process's import, first fit and transform: numba compiles umap's code (old), or loads it from
    the cache a first process wrote (new)."""

    def child(cache: str) -> dict:
        env = {**os.environ, "PYTHONPATH": ROOT}
        done = subprocess.run(
            [sys.executable, "-c", CHILD, cache], capture_output=True, text=True, check=True, env=env, cwd=ROOT
        )
        return json.loads(done.stdout.splitlines()[-1])

    with tempfile.TemporaryDirectory() as cache:
        old = child("")
        child(cache)  # compiles and writes the cache
        new = child(cache)
    worst = max(np.abs(np.subtract(old[k], new[k])).max() for k in ("embedding", "placed"))
    return "umap first fit, fresh process", old["seconds"], new["seconds"], f"{worst:.1e} (embedding, placed)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="smaller inputs (about a minute or two)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch's threads (a book's chapter gets 1)")
    parser.add_argument("--no-compile", action="store_true", help="skip the fresh processes of the compile row")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    size = {name: sizes[args.small] for name, sizes in SIZES.items()}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = [("cpu", *svd_row(size["svd"], args.rounds))]
    rows += [(d, *scores_row(size["scores"], args.rounds, d)) for d in devices]
    rows += [("cpu", *separability_row(size["separability"], args.rounds))]
    rows += [("cpu", *umap_row(size["umap"], args.rounds))]
    if not args.no_compile:
        rows += [("cpu", *compile_row())]
    print(f"{'hot spot':44s} {'device':6s} {'old s':>8s} {'new s':>8s} {'old/new':>8s}  largest difference")
    for device, name, old_s, new_s, worst in rows:
        print(f"{name:44s} {device:6s} {old_s:8.3f} {new_s:8.3f} {old_s / new_s:8.2f}  {worst}")


if __name__ == "__main__":
    main()
