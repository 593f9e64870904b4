"""B2's truncation, two comparisons on Walden's pilots, each timed in one run (CPU seconds of this process,
which other work on shared cores disturbs less than the wall clock) with the largest difference of its results.

1. The last-layer reading of the whole grid of K: one reading per K (project, final norm, unembedding) against
   `truncation.TruncatedReadout` (one unembedding product per state for the whole grid).
2. With `--step`: one run of B2's truncation step (`truncation_protocols`: both protocols and the random
   null, every pilot in the last-layer protocol, `--propagated` of them in the every-layer one) as it was,
   every K read or run (K = D and each K beyond the basis included) and p read again for the null, against
   reading each distinct truncation once, K = D served from p, p read once for both.

    python benchmarks/bench_truncation.py [--model smollm2-135m] [--pilots 512] [--threads 1]
    python benchmarks/bench_truncation.py --step [--pilots 2866] [--propagated 128]

`--threads 1` is what a book's chapter gets with `--jobs 2` on two cores.
"""

import argparse
import time
from functools import partial
from unittest import mock

import numpy as np
import torch

from lotlib.chapters.b2_ensemble_svd import (
    RANDOM,
    ScoredPilots,
    TruncationStudy,
    random_orthonormal,
    truncation_protocols,
)
from lotlib.lines_of_thought import truncation
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.extrapolation import weighted_svd
from lotlib.lines_of_thought.truncation import (
    TruncatedReadout,
    kl,
    next_token_logprobs,
    shared_tokens,
    top_tokens,
    truncation_grid,
    truncation_scores,
)
from lotlib.models.trajectories import walden_trajectories
from lotlib.stats import draw_pilots


def one_reading_per_k(view, B, rows, ks):
    """The reference: each K's truncated state read from scratch, `(n, V)` log-probabilities per K."""
    coords = rows @ B
    for K in ks:
        yield next_token_logprobs(view, coords[:, :K] @ B[:, :K].T)


def score(readings, logp, top=5):
    """Consume the readings as B2 does (KL and top-5 overlap per K); the last reading for the comparison."""
    last, reference = None, top_tokens(logp, top)
    for truncated in readings:
        kl(truncated, logp), shared_tokens(top_tokens(truncated, top), reference)
        last = truncated
    return last


def grid_readings(lm, X, batch):
    """Comparison 1: seconds per way of reading the grid and their largest difference of log-probabilities."""
    view = lm.view
    B = torch.as_tensor(ensemble_svd(X[:, -1:])[0][0], dtype=torch.float32)
    ks = truncation_grid(X.shape[2])
    seconds = {}
    readings = {
        "one reading per K": lambda rows: one_reading_per_k(view, B, rows, ks),
        "one reading per grid": lambda rows: readout.logprobs(rows, ks),
    }
    for name, reading in readings.items():
        start = time.process_time()
        with torch.inference_mode():
            if name == "one reading per grid":  # built once per basis, as B2 does
                readout = TruncatedReadout.of(view, B)
            for i in range(0, len(X), batch):
                rows = torch.as_tensor(X[i : i + batch, -1], dtype=torch.float32)
                score(reading(rows), next_token_logprobs(view, rows))
        seconds[name] = time.process_time() - start
    worst = 0.0
    with torch.inference_mode():
        rows = torch.as_tensor(X[:batch, -1], dtype=torch.float32)
        for a, b in zip(
            one_reading_per_k(view, B, rows, ks),
            TruncatedReadout.of(view, B).logprobs(rows, ks),
        ):
            worst = max(worst, float((a - b).abs().max()))
    return seconds, f"largest |difference| of log-probabilities {worst:.2e}"


def every_truncation(ks, k, d):
    """The grid plan of B2 as it was: every K of the grid read or run, the whole space and repeats included."""
    return list(ks), list(range(len(ks)))


def last_layer(lm, X, bases, study, directions, as_it_was):
    """The last-layer protocol of every pilot with the random null (`truncation_protocols`), as B2 ran it
    (`as_it_was`: every K read, p read again for the null) or as it runs."""
    scored = ScoredPilots(np.arange(len(X)), np.arange(0))
    if not as_it_was:
        return truncation_protocols(
            lm, None, X[:, -1], bases, scored, study, directions
        )
    with mock.patch.object(truncation, "grid_plan", every_truncation):
        found = truncation_protocols(lm, None, X[:, -1], bases, scored, study)
    found[RANDOM] = truncation_scores(
        lm.view, X[:, -1], directions, [1, X.shape[2] // 4], progress=False
    )
    return found


def every_layer(lm, ids, bases, study, as_it_was):
    """The every-layer protocol of pseudo-sentences `ids` as B2 ran it (`as_it_was`: every K run) or as it runs."""
    plan = every_truncation if as_it_was else truncation.grid_plan
    with mock.patch.object(truncation, "grid_plan", plan):
        run = truncation.propagated_truncation(lm, ids, bases, study.ks, progress=False)
    return {"every layer": run}


def b2_step(lm, ids, X, propagated):
    """Comparison 2: seconds per protocol of each way and the largest difference of their scores below K = D
    (with the largest KL the old way gave at K = D, where the new one serves 0)."""
    D = X.shape[2]
    bases, study = weighted_svd(X)[0], TruncationStudy(truncation_grid(D), n_rep=0)
    every = ids[draw_pilots(len(X), propagated, np.random.default_rng(0))]
    directions = random_orthonormal(D, seed=1)
    every_layer(lm, every[:2], bases, TruncationStudy([1], 0), False)  # warm-up
    seconds, found = {}, {True: {}, False: {}}
    for as_it_was in (True, False):
        way = "as it was" if as_it_was else "as it runs"
        parts = {
            "last layer + null": partial(
                last_layer, lm, X, bases, study, directions, as_it_was
            ),
            "every layer": partial(every_layer, lm, every, bases, study, as_it_was),
        }
        for part, compute in parts.items():
            start = time.process_time()
            found[as_it_was].update(compute())
            seconds[f"{part}, {way}"] = time.process_time() - start
    old, new = found[True], found[False]
    lines = []
    for protocol in old:
        below = slice(None) if protocol == RANDOM else slice(None, -1)
        moved = max(
            float(
                np.abs(
                    getattr(old[protocol], s)[below] - getattr(new[protocol], s)[below]
                ).max()
            )
            for s in ("kl", "overlap")
        )
        at_d = (
            ""
            if protocol == RANDOM
            else f"; old KL at K = D at most {old[protocol].kl[-1].max():.1e}"
        )
        lines.append(f"{protocol}: largest |difference| below K = D {moved:.1e}{at_d}")
    return seconds, "\n  ".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pilots", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--step", action="store_true", help="time B2's truncation step")
    parser.add_argument("--propagated", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm, corpus, X = walden_trajectories(args.model, n_s=args.pilots, progress=False)
    if args.step:
        seconds, differences = b2_step(lm, corpus.ids, X, args.propagated)
        what = f", {args.propagated} of them propagated"
    else:
        seconds, differences = grid_readings(lm, X, args.batch)
        what = ""
    print(
        f"{args.model}: {len(X)} pilots{what}, D = {X.shape[2]}, "
        f"{len(truncation_grid(X.shape[2]))} values of K, {args.threads} thread(s)"
    )
    for name, s in seconds.items():
        print(f"  {name:34s} {s:7.1f} s")
    times = list(seconds.values())
    before, after = sum(times[: len(times) // 2]), sum(times[len(times) // 2 :])
    print(f"  speed-up {before / after:.2f}x\n  {differences}")


if __name__ == "__main__":
    main()
