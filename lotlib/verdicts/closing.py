"""A chapter's closing paragraph and table: its claims judged, in sentences."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..summary import glue, not_applicable, record
from .claims import chapter_claims, recorded_keys
from .judging import format_value, judge
from .names import BOOK_NULLS, ELSEWHERE
from .tables import band_text, chapter_outcomes

SAID = {
    "passes": "holds",
    "fails": "does not hold",
    "straddles": "is inconclusive (its interval straddles the bound)",
    "no interval": "is inconclusive (no interval)",
    "missing": "was not measured",
    "not applicable": "has no verdict",
}
SAID_PAPER = {
    ELSEWHERE: "is measured by the paper's protocol in {chapter} (the report judges it)",
    "agrees": "agrees with the paper's {printed}",
    "differs": "differs from the paper's {printed}",
    "inconclusive": "cannot be compared with the paper's {printed} (no interval)",
    "missing": "was not measured by the paper's protocol",
    "not applicable": "has no value by the paper's protocol",
}


def closing_sentences(
    notebook: str,
    values: dict,
    model: str,
    why_not_diagnostic: str,
    claims_folder: str | Path | None = None,
) -> list[str]:
    """A chapter's closing paragraph, one sentence per claim: against the paper (the value by the paper's
    protocol and whether it meets the band of the tolerance rule), then the book's test on `model` and each of
    the claim's own nulls recorded in `values`; where both pass, the sentence says the test is not diagnostic
    and gives `why_not_diagnostic` (the chapter's reason)."""
    sentences = []
    for c in chapter_claims(notebook, claims_folder):
        row = judge(c, values, {})
        line = c["id"]
        if c.get("as_paper") and row["against paper"] == ELSEWHERE:
            line += f" {SAID_PAPER[ELSEWHERE].format(chapter=row['paper chapter'])}; the book's test"
        elif c.get("as_paper") and row["against paper"] in SAID_PAPER:
            printed = c["as_paper"]["printed"]
            line += (
                f" {SAID_PAPER[row['against paper']].format(printed=printed)} by its protocol: "
                f"{format_value(row['as paper'])}, band {band_text(row['band'])}"
            )
            if row["second reading"] is not None:
                reading, answer, value = row["second reading"]
                said = SAID_PAPER.get(answer, answer).format(printed=printed)
                line += f"; read with {reading}, it {said}: {format_value(value)}"
            line += "; the book's test"
        line += f" {SAID[row['outcome']]} on {model}: {format_value(row['ours'])}, test {row['test']}"
        for null in row["nulls"]:
            if null.name in BOOK_NULLS:
                continue
            line += f"; {null.name}: {format_value(null.value)}, {null.outcome}"
            if row["outcome"] == null.outcome == "passes":
                line += f" too (not diagnostic: {why_not_diagnostic})"
        sentences.append(line)
    return sentences


def conclude_not_applicable(
    notebook: str, model: str, reason: str, claims_folder: str | Path | None = None
) -> pd.DataFrame:
    """The last cell of a chapter that does not apply to `model` (`lotlib.book.pipeline`): every key its claims
    read recorded as `not_applicable(reason)`, one sentence saying so (glued as `closing` and shown) and the
    table of claims."""
    from IPython.display import Markdown, display

    claims = chapter_claims(notebook, claims_folder)
    values = {
        key: not_applicable(reason)
        for key in sorted(recorded_keys(notebook, claims_folder))
    }
    record(values)
    ids = ", ".join(c["id"] for c in claims) or "none"
    paragraph = f"No claim of this chapter applies to {model} ({ids}): {reason}."
    glue("closing", paragraph)
    display(Markdown(paragraph))
    return chapter_outcomes(notebook, values, claims_folder)


def conclude(
    notebook: str,
    values: dict,
    model: str,
    why_not_diagnostic: str = "the nulls pass the same test",
    claims_folder: str | Path | None = None,
) -> pd.DataFrame:
    """A chapter's last cell: record its `values` (`lotlib.summary.record`), say each claim's outcome on
    `model` in one paragraph (`closing_sentences`, glued as `closing` and shown) and return the table of
    claims (`chapter_outcomes`) for the cell to display."""
    from IPython.display import Markdown, display

    record(values)
    sentences = closing_sentences(
        notebook, values, model, why_not_diagnostic, claims_folder
    )
    paragraph = " ".join(s + "." for s in sentences)
    glue("closing", paragraph)
    display(Markdown(paragraph))
    return chapter_outcomes(notebook, values, claims_folder)
