"""The Eq. 1 residual moments of every pair of layers, from the layers' cross-moments against the residuals
formed, on one bootstrap draw of real trajectories, from one run.

    python benchmarks/bench_pair_moments.py [--model smollm2-135m] [--n-s 1000] [--rounds 3]

Both compute `residuals.pair_statistics` in the aligned singular basis of the draw's pilots (the statistic that
C4 recomputes on each of its resamples that refit the bases): `expanded` weighs each distinct pilot by its
count and expands every residual's central moments into three `(k, m, N) x (k, N, m)` products
(`singular_pair_moments`); `formed` repeats the drawn pilots and forms each pair's residuals (the path before).
Prints the best of `--rounds` timings of each, their ratio and the largest differences of the values.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.residuals import pair_statistics, singular_coordinates
from lotlib.models.trajectories import walden_trajectories


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n-s", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _, _, X = walden_trajectories(args.model, n_k=50, n_s=args.n_s)
    counts = np.random.default_rng(0).multinomial(len(X), np.full(len(X), 1 / len(X)))
    drawn = np.flatnonzero(counts)
    blocks = X[drawn][:, 1:]
    U, S = align_bases(*ensemble_svd(np.repeat(blocks, counts[drawn], axis=0)))
    Y, layers = singular_coordinates(blocks, U), np.arange(len(U))
    runs = {
        "expanded": lambda: pair_statistics(
            Y, S, layers, counts=counts[drawn], progress=False
        ),
        "formed": lambda: pair_statistics(
            np.repeat(Y, counts[drawn], axis=0), S, layers, expand=False, progress=False
        ),
    }
    seconds, values = {}, {}
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            values[name] = run()
            seconds[name] = min(seconds.get(name, np.inf), time.perf_counter() - start)
    expanded, formed = values["expanded"], values["formed"]
    variance = np.nanmax(np.abs(expanded.var - formed.var) / formed.var)
    # the excess kurtosis is near 0: its difference is absolute
    kurtosis = np.nanmax(np.abs(expanded.kurtosis - formed.kurtosis))
    print(
        f"{args.model}: {len(drawn)} distinct of {len(X)} drawn pilots, {len(layers)} layers, k = {U.shape[2]}"
    )
    for name, s in seconds.items():
        print(f"  {name:9s} {s:6.2f} s")
    print(
        f"  formed / expanded = {seconds['formed'] / seconds['expanded']:.1f}; largest difference: variance "
        f"{variance:.1e} (relative), excess kurtosis {kurtosis:.1e} (absolute)"
    )


if __name__ == "__main__":
    main()
