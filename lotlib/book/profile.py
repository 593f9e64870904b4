"""Where a book's time goes: each executed chapter's seconds in all and in forward passes.

The pipeline times every execution and, through `ModelView.run`, the forward passes inside its kernel
(`lotlib.models.forward_clock`), and keeps both in the executed notebook's metadata (`seconds`). Everything
that is not a forward pass is analysis (bootstrap resamples, SVDs, fits, figures) or the kernel's start.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .pipeline import executed_metadata

COLUMNS = ["book", "chapter", "total", "forward", "analysis", "forward share"]


def book_profile(books: dict[str, Path]) -> pd.DataFrame:
    """One row per executed chapter of each book (name -> its build folder, holding `notebooks/`): seconds in
    all, in forward passes and in the rest, and the forward share; chapters without a profile are left out."""
    rows = []
    for name, folder in books.items():
        for executed in sorted(Path(folder, "notebooks").glob("*.ipynb")):
            if executed.name.endswith((".partial.ipynb", ".input.ipynb")):
                continue
            seconds = executed_metadata(executed).get("seconds")
            if seconds:
                total, forward = float(seconds["total"]), float(seconds["forward"])
                rows.append(
                    [
                        name,
                        executed.stem,
                        total,
                        forward,
                        total - forward,
                        forward / total,
                    ]
                )
    return pd.DataFrame(rows, columns=COLUMNS)


def profile_totals(table: pd.DataFrame) -> dict[str, float]:
    """The whole build: seconds in all and in forward passes (summed over chapters, so chapter-seconds when
    chapters ran in parallel), and the total over the forward passes (1 when only forward passes ran)."""
    total, forward = float(table["total"].sum()), float(table["forward"].sum())
    return {
        "total": total,
        "forward": forward,
        "total_over_forward": total / forward if forward else float("inf"),
    }
