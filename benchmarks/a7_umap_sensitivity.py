"""A7's UMAP measurement against rounding: each seed's `approach_rank` of the next token as the book computes
it, then again with the path's states multiplied by (1 + s * noise), s at float32's rounding and ten times
it (what another BLAS, numpy or torch build changes), beside the spread over seeds.

    python benchmarks/a7_umap_sensitivity.py [--model smollm2-135m] [--rows 3000] [--seeds 6]

A change as large as the seeds' spread says the map's own randomness, not the statistic, moves the value;
the book's interval over seeds carries that spread.
"""

import argparse
import dataclasses

import numpy as np

from lotlib import load_model
from lotlib.traveling_words.lens import follow_token
from lotlib.traveling_words.umap_map import embedding_maps

SENTENCE = "To kill two birds with one stone"


def perturbed(path, scale: float, rng: np.random.Generator):
    """The path with each state coordinate multiplied by (1 + scale * standard normal)."""

    def shake(states):
        return states * (1 + scale * rng.standard_normal(states.shape)).astype(
            states.dtype
        )

    return dataclasses.replace(path, X=shake(path.X), normed=shake(path.normed))


def main() -> None:
    """Print the per-seed ranks as built and under each perturbation, with the largest change."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args()
    model = load_model(args.model, device="cpu")
    path = follow_token(model, SENTENCE, -2)
    seeds = list(range(args.seeds))
    built = embedding_maps(model, path, seeds=seeds, rows=args.rows).ranks_by_seed
    print(f"per-seed rank as built: {np.round(built, 3)} (spread {np.ptp(built):.3f})")
    rng = np.random.default_rng(0)
    for scale in (1e-7, 1e-6):
        moved = embedding_maps(
            model, perturbed(path, scale, rng), seeds=seeds, rows=args.rows
        ).ranks_by_seed
        print(
            f"states x (1 + {scale:g} noise): {np.round(moved, 3)}, "
            f"largest change {np.abs(moved - built).max():.3f}"
        )


if __name__ == "__main__":
    main()
