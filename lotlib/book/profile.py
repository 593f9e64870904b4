"""Where a build's time goes: each chapter run's seconds in all and in forward passes, and the totals."""

from __future__ import annotations

import pandas as pd

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
