"""Forward passes against analysis, per chapter, for a built book.

    python benchmarks/profile_book.py [--model smollm2-135m] [--quick] [--build build] [--no-null]
    python benchmarks/profile_book.py --cold [--model ...] [--quick]     # build it cold first, then profile
    python benchmarks/profile_book.py ... --row     # and docs/performance.md's table row for this book
    python benchmarks/profile_book.py --cold --keep DIR ...   # the cold build in DIR, kept (to compare summaries)

Reads each executed chapter's seconds (in all, and in forward passes timed by `ModelView.run`) and its kernel's
peak memory from the book's notebooks and its null books' (its untrained variant and the paper's untrained
GPT-2), prints one line per chapter, the totals (chapter-seconds: chapters run two at a time), the ratio of the
total to the forward passes (1.0 would mean the book costs no more than its model) and the largest peak. Only a cold build counts its forward passes: a
chapter whose trajectories were cached shows none.
`--cold` builds the book first with an empty trajectory cache in a temporary folder (the embedded model's
de-quantized folder is reused from the usual cache, so de-quantizing is not counted).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from lotlib.book.build import BookOptions, book_folder, build_book, null_books
from lotlib.book.pipeline import executed_metadata, project_root
from lotlib.book.profile import profile_totals, runs_profile
from lotlib.models.sources import DEFAULT_MODEL
from lotlib.storage.paths import CACHE_ENV, cache_root


def book_profile(books: dict[str, Path]) -> pd.DataFrame:
    """One row per executed chapter of each book (name -> its build folder, holding `notebooks/`): seconds in
    all, in forward passes and in the rest, the forward share, and the peak resident memory of its kernel in GB
    (NaN for a run that recorded none); chapters without a profile are left out.

    The pipeline times every execution and, through `ModelView.run`, the forward passes inside its kernel
    (`lotlib.models.forward_clock`), and keeps both in the executed notebook's metadata (`seconds`). Everything
    that is not a forward pass is analysis (bootstrap resamples, SVDs, fits, figures) or the kernel's start.
    """
    profiles = {}
    for name, folder in books.items():
        for executed in sorted(Path(folder, "notebooks").glob("*.ipynb")):
            if executed.name.endswith((".partial.ipynb", ".input.ipynb")):
                continue
            metadata = executed_metadata(executed)
            if metadata.get("seconds"):
                profiles[f"{name} / {executed.stem}"] = {
                    **metadata["seconds"],
                    "peak_memory_gb": metadata.get("peak_memory_gb"),
                }
    return runs_profile(profiles)


def _cold_build(
    root: Path, model: str, quick: bool, null: bool, scratch: Path
) -> float:
    """Build the book into `scratch` with a trajectory cache that holds only the de-quantized models (the usual
    cache's `models` folder, linked, not copied: a de-quantized Qwen is 6.7 GB, and its folders are read-only)."""
    cache = scratch / "cache"
    usual = cache_root()
    if (usual / "models").is_dir():
        cache.mkdir(parents=True)
        (cache / "models").symlink_to(
            (usual / "models").resolve(), target_is_directory=True
        )
    os.environ[CACHE_ENV] = str(cache)
    start = time.perf_counter()
    build_book(root, BookOptions(model=model, quick=quick, null=null, build=scratch / "build"))
    return time.perf_counter() - start


def _commit(root: Path) -> str:
    """The checkout's short commit hash, or "unknown" outside git."""
    run = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return run.stdout.strip() if run.returncode == 0 else "unknown"


def performance_row(
    model: str, quick: bool, totals: dict, wall: float | None, commit: str
) -> str:
    """docs/performance.md's row for one book: cold time, chapter-seconds, forward share, peak, commit."""
    cold = f"{int(wall // 60)} min {round(wall % 60):02d} s" if wall else "not measured"
    share = totals["forward"] / totals["total"] if totals["total"] else 0.0
    peak = (
        f"{totals['peak_memory_gb']:.2f} GB ({totals['peak_chapter']})"
        if totals["peak_chapter"]
        else "not recorded"
    )
    return (
        f"| {model}, {'quick' if quick else 'full'} | {cold} | {totals['total']:,.0f} | "
        f"{share:.0%} ({totals['forward']:,.0f} s) | {peak} | {commit} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--quick", action="store_true", help="the quick book")
    parser.add_argument("--build", type=Path, default=None, help="default: build/")
    parser.add_argument("--no-null", dest="null", action="store_false")
    parser.add_argument("--cold", action="store_true", help="build it cold first")
    parser.add_argument(
        "--row", action="store_true", help="print docs/performance.md's row too"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="with --cold: build in this new folder and keep it (its build/ holds the books)",
    )
    args = parser.parse_args()
    if args.keep and (not args.cold or args.keep.exists()):
        parser.error(
            f"--keep {args.keep}: needs --cold and a folder that does not exist yet (pick a new path)"
        )
    root = project_root()
    with tempfile.TemporaryDirectory(prefix="lotlib-profile-") as temporary:
        scratch = args.keep or Path(temporary)
        wall = None
        if args.cold:
            wall = _cold_build(root, args.model, args.quick, args.null, scratch)
            args.build = scratch / "build"
        models = [args.model, *null_books(args.model, args.null).values()]
        books = {m: book_folder(root, m, args.quick, args.build) for m in models}
        table = book_profile(books)
    if table.empty:
        print(
            f"no profiled chapters in {', '.join(map(str, books.values()))}: build the book first"
        )
        return 1
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    totals = profile_totals(table)
    print(
        f"\nchapter-seconds {totals['total']:.0f}, forward passes {totals['forward']:.0f}: "
        f"total / forward = {totals['total_over_forward']:.2f}"
        + (
            f"; largest peak memory of a chapter's kernel {totals['peak_memory_gb']:.2f} GB "
            f"({totals['peak_chapter']})"
            if totals["peak_chapter"]
            else ""
        )
        + (f"; wall clock of the cold build {wall / 60:.1f} min" if wall else "")
    )
    if args.row:
        print(performance_row(args.model, args.quick, totals, wall, _commit(root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
