"""B2's last-layer truncation over its whole grid of K: one reading per K (project, final norm, unembedding)
against `truncation.TruncatedReadout` (one unembedding product per state for the whole grid), timed in one
run on the same pilots, with the largest difference of log-probabilities between the two.

    python benchmarks/bench_truncation.py [--model smollm2-135m] [--pilots 512] [--threads 1]

`--threads 1` is what a book's chapter gets with `--jobs 2` on two cores.
"""

import argparse
import time

import torch

from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.truncation import (
    TruncatedReadout,
    kl,
    next_token_logprobs,
    shared_tokens,
    top_tokens,
    truncation_grid,
)
from lotlib.models.trajectories import walden_trajectories


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pilots", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm, _, X = walden_trajectories(args.model, n_s=args.pilots, progress=False)
    view, D = lm.view, X.shape[2]
    B = torch.as_tensor(ensemble_svd(X[:, -1:])[0][0], dtype=torch.float32)
    ks = truncation_grid(D)
    seconds, worst = {}, 0.0
    readings = {
        "one reading per K": lambda rows: one_reading_per_k(view, B, rows, ks),
        "one reading per grid": lambda rows: readout.logprobs(rows, ks),
    }
    for name, reading in readings.items():
        start = time.perf_counter()
        with torch.inference_mode():
            if name == "one reading per grid":  # built once per basis, as B2 does
                readout = TruncatedReadout.of(view, B)
            for i in range(0, len(X), args.batch):
                rows = torch.as_tensor(X[i : i + args.batch, -1], dtype=torch.float32)
                score(reading(rows), next_token_logprobs(view, rows))
        seconds[name] = time.perf_counter() - start
    with torch.inference_mode():
        rows = torch.as_tensor(X[: args.batch, -1], dtype=torch.float32)
        for a, b in zip(
            one_reading_per_k(view, B, rows, ks),
            TruncatedReadout.of(view, B).logprobs(rows, ks),
        ):
            worst = max(worst, float((a - b).abs().max()))
    print(
        f"{args.model}: {len(X)} pilots, D = {D}, {len(ks)} values of K, {args.threads} thread(s)"
    )
    for name, s in seconds.items():
        print(f"  {name:22s} {s:7.1f} s")
    ratio = seconds["one reading per K"] / seconds["one reading per grid"]
    print(
        f"  speed-up {ratio:.2f}x; largest |difference| of log-probabilities {worst:.2e}"
    )


if __name__ == "__main__":
    main()
