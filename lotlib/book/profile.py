"""Where a book's time goes: each executed chapter's seconds in all and in forward passes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .pipeline import executed_metadata

COLUMNS = [
    "book",
    "chapter",
    "total",
    "forward",
    "analysis",
    "forward share",
    "peak GB",
]


def _row(book: str, chapter: str, profile: dict) -> list:
    """One table row from a run's profile (`{"total", "forward"}` seconds, `"peak_memory_gb"` when recorded)."""
    total, forward = float(profile["total"]), float(profile["forward"])
    peak = profile.get("peak_memory_gb")
    return [
        book,
        chapter,
        total,
        forward,
        total - forward,
        forward / total,
        float("nan") if peak is None else float(peak),
    ]


def book_profile(books: dict[str, Path]) -> pd.DataFrame:
    """One row per executed chapter of each book (name -> its build folder, holding `notebooks/`): seconds in
    all, in forward passes and in the rest, the forward share, and the peak resident memory of its kernel in GB
    (NaN for a run that recorded none); chapters without a profile are left out.

    The pipeline times every execution and, through `ModelView.run`, the forward passes inside its kernel
    (`lotlib.models.forward_clock`), and keeps both in the executed notebook's metadata (`seconds`). Everything
    that is not a forward pass is analysis (bootstrap resamples, SVDs, fits, figures) or the kernel's start.
    """
    rows = []
    for name, folder in books.items():
        for executed in sorted(Path(folder, "notebooks").glob("*.ipynb")):
            if executed.name.endswith((".partial.ipynb", ".input.ipynb")):
                continue
            metadata = executed_metadata(executed)
            if metadata.get("seconds"):
                profile = {
                    **metadata["seconds"],
                    "peak_memory_gb": metadata.get("peak_memory_gb"),
                }
                rows.append(_row(name, executed.stem, profile))
    return pd.DataFrame(rows, columns=COLUMNS)


def runs_profile(profiles: dict[str, dict]) -> pd.DataFrame:
    """The same table from the profiles a build returns (`"model / chapter"` label -> profile)."""
    rows = [_row(*label.rsplit(" / ", 1), p) for label, p in profiles.items()]
    return pd.DataFrame(rows, columns=COLUMNS)


def profile_totals(table: pd.DataFrame) -> dict[str, float]:
    """The whole build: seconds in all and in forward passes (summed over chapters, so chapter-seconds when
    chapters ran in parallel), the total over the forward passes (1 when only forward passes ran), and the
    largest peak memory of one chapter's kernel with its book and chapter (NaN and "" when none recorded one)."""
    total, forward = float(table["total"].sum()), float(table["forward"].sum())
    peaks = table.dropna(subset=["peak GB"])
    largest = peaks.loc[peaks["peak GB"].idxmax()] if len(peaks) else None
    return {
        "total": total,
        "forward": forward,
        "total_over_forward": total / forward if forward else float("inf"),
        "peak_memory_gb": float("nan")
        if largest is None
        else float(largest["peak GB"]),
        "peak_chapter": ""
        if largest is None
        else f"{largest['book']} / {largest['chapter']}",
    }
