"""B3's SVM fits, old against new, side by side on B3's own data: sklearn's LinearSVC (liblinear) and
`extrapolation.linear_svc` (liblinear's TRON compiled with numba) on every fit that B3's SVM sections make.

    python benchmarks/bench_svm_solver.py [--model smollm2-135m] [--n-s N] [--n-rep 2] [--n-svm 1000]

The trajectories of `--model` on Walden (50 tokens, `--n-s` pseudo-sentences, all by default) come from the
cache as the chapter opens them; then B3's SVM sections run at the notebook's parameters, but `--n-rep`
repetitions: the 5-fold curves, true against true, the held-out verdicts and both readings of the paper's
protocol. Each fit runs both ways on the same rows, one thread. Prints one row per section: its fits and
test rows, the test predictions that differ (flips), the largest difference of a fit's test accuracy, the
seconds in the old and the new fits, and the section's other seconds (bases, extrapolations, clouds); then
the sections' totals with the old and with the new fits.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# the project's root for this folder: the tests' oracle is the old code, this checkout's lotlib the new
sys.path[0] = str(Path(__file__).resolve().parents[1])

import lotlib.lines_of_thought.extrapolation as extrapolation  # noqa: E402
from lotlib.chapters.b3_extrapolation import (  # noqa: E402
    BASES_FROM,
    VerdictSvm,
    repeated_svm,
    same_pilot_svm,
    subsamples,
    svm_by_tau,
    svm_true_vs_true,
)
from lotlib.lines_of_thought.ensemble import open_ensemble  # noqa: E402
from lotlib.lines_of_thought.extrapolation import HeldOutBases  # noqa: E402
from lotlib.stats.backend import single_thread  # noqa: E402
from tests.lines_of_thought.test_extrapolation import (  # noqa: E402
    liblinear_predictions,
)

NEW = extrapolation.svm_predictions


@dataclass
class Tally:
    """What the fits of one section gave both ways: counts, flips, the largest accuracy difference, seconds."""

    fits: int = 0
    rows: int = 0
    flips: int = 0
    worst: float = 0.0
    old_s: float = 0.0
    new_s: float = 0.0
    wall_s: float = 0.0

    def both(self, features, labels, train, C) -> np.ndarray:
        """`svm_predictions` both ways on the same rows (which goes first alternates), tallied; returns the new
        predictions."""
        runs = {"old": liblinear_predictions, "new": NEW}
        found, seconds = {}, {}
        for way in ("new", "old") if self.fits % 2 else ("old", "new"):
            start = time.perf_counter()
            found[way] = runs[way](features, labels, train, C)
            seconds[way] = time.perf_counter() - start
        old, new = found["old"], found["new"]
        self.old_s += seconds["old"]
        self.new_s += seconds["new"]
        truth = labels[~train]
        self.fits, self.rows = self.fits + 1, self.rows + len(truth)
        self.flips += int(np.sum(old != new))
        gap = abs(np.mean(old == truth) - np.mean(new == truth))
        self.worst = max(self.worst, float(gap))
        return new


def sections(X: np.ndarray, authors: np.ndarray, n_rep: int, n_svm: int) -> dict:
    """B3's SVM sections at the notebook's parameters (seed 0, C = 0.1, tau up to 10, two starts)."""
    L = X.shape[1] - 1
    study = HeldOutBases.split(X, first=L // 2, seed=0)
    first, tau_max = study.first, min(10, L - study.first)
    pilots = subsamples(study, 0, n_plot=400, n_svm=n_svm)
    starts = study.starts(2, last=L - tau_max)
    verdict = VerdictSvm(n_rep=n_rep, seed=0, C=0.1)
    svm = {"seed": 0, "C": 0.1}
    found: dict[str, Callable] = {
        "5-fold curves, tau 1..10": lambda: svm_by_tau(
            study, pilots.test, np.arange(1, tau_max + 1), **svm
        ),
        "true vs true": lambda: svm_true_vs_true(
            study, pilots.shuffled, (1, tau_max), **svm
        ),
        "held-out verdicts": lambda: repeated_svm(
            study, starts, tau_max, n_svm, verdict
        ),
    }
    for bases in BASES_FROM:
        found[f"paper's protocol, bases from {bases}"] = lambda bases=bases: (
            same_pilot_svm(X[authors], first, starts, tau_max, verdict, bases)
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n-s", type=int, default=None, help="pilots (all of Walden)")
    parser.add_argument("--n-rep", type=int, default=2, help="repetitions (book: 50)")
    parser.add_argument("--n-svm", type=int, default=1000)
    args = parser.parse_args()
    ens = open_ensemble(args.model, n_k=50, n_s=args.n_s, device="cpu")
    authors = ens.authors_pilots("2.8D", 0, cap=args.n_s)
    print(
        f"{args.model}: N = {len(ens.X)}, L = {ens.L}, D = {ens.D}, n_rep = {args.n_rep}"
    )
    extrapolation.linear_svc(np.eye(4), np.array([0, 0, 1, 1]), 1.0)  # numba compiles
    tallies = {}
    with single_thread():
        for name, run in sections(ens.X, authors, args.n_rep, args.n_svm).items():
            tally = tallies[name] = Tally()
            extrapolation.svm_predictions = tally.both
            start = time.perf_counter()
            run()
            tally.wall_s = time.perf_counter() - start
    extrapolation.svm_predictions = NEW
    report(tallies)


def report(tallies: dict[str, Tally]) -> None:
    """One row per section and the totals."""
    head = (
        f"{'section':38s} {'fits':>5s} {'rows':>7s} {'flips':>5s} {'max |d acc|':>11s}"
    )
    print(f"{head} {'old s':>7s} {'new s':>7s} {'old/new':>7s} {'other s':>7s}")
    for name, t in tallies.items():
        other = t.wall_s - t.old_s - t.new_s
        print(
            f"{name:38s} {t.fits:5d} {t.rows:7d} {t.flips:5d} {t.worst:11.1e} {t.old_s:7.1f} "
            f"{t.new_s:7.1f} {t.old_s / t.new_s:7.2f} {other:7.1f}"
        )
    old = sum(t.old_s for t in tallies.values())
    new = sum(t.new_s for t in tallies.values())
    other = sum(t.wall_s for t in tallies.values()) - old - new
    print(
        f"all fits: {sum(t.fits for t in tallies.values())}, flips "
        f"{sum(t.flips for t in tallies.values())}; the sections take {old + other:.1f} s "
        f"with the old fits, {new + other:.1f} s with the new ({other:.1f} s outside the fits)"
    )


if __name__ == "__main__":
    main()
