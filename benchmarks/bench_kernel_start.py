"""Chapter start with kernels forked from a zygote (`lotlib.book.kernel`) against a fresh kernel per chapter:
the same quick chapters run one after the other in one process, alternating the two ways, timed in one run.

    python benchmarks/bench_kernel_start.py [--chapters a1_geometry a3_reachable_tokens a6_svd_tables] [--rounds 2]

Each way's first chapter pays for its kernel's imports (the zygote's, or the fresh kernel's); the chapters after
it show what a book saves per chapter. Prints each chapter's seconds and the ratio of the totals.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

from lotlib.book.build import book_parameters
from lotlib.book.pipeline import project_root, run_notebook
from lotlib.book.zygote import ZYGOTE_VARIABLE

WAYS = {"fresh kernel": "0", "forked kernel": "1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapters", nargs="+", default=["a1_geometry", "a3_reachable_tokens", "a6_svd_tables"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = project_root()
    seconds = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as out:
        for round_ in range(args.rounds):
            for name in args.chapters:
                for way, flag in WAYS.items():
                    os.environ[ZYGOTE_VARIABLE] = flag
                    start = time.perf_counter()
                    run_notebook(root / "notebooks" / f"{name}.py", Path(out) / way / f"{name}.ipynb",
                                 book_parameters(root, name, quick=True), progress=False, reuse=False, threads=1)
                    seconds[way].append(time.perf_counter() - start)
                    print(f"round {round_ + 1} {name:24s} {way:14s} {seconds[way][-1]:6.1f} s", flush=True)
    fresh, forked = (sum(seconds[way]) for way in WAYS)
    print(f"total: fresh {fresh:.1f} s, forked {forked:.1f} s; fresh / forked = {fresh / forked:.2f}")
    later = [sum(seconds[way][1:]) / (len(seconds[way]) - 1) for way in WAYS]
    print(f"per chapter after the first: fresh {later[0]:.1f} s, forked {later[1]:.1f} s, saved {later[0] - later[1]:.1f} s")


if __name__ == "__main__":
    main()
