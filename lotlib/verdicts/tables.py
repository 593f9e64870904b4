"""The report's tables: one row per claim, the papers' numbers against ours, counts, a chapter's closing table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..summary import load_summaries
from .claims import NATURES, chapter_claims, load_claims, paper_chapter
from .judging import chapter_values, format_value, judge
from .names import AGAINST_PAPER, BOOK_NULLS, COLORS, ELSEWHERE, VERDICTS
from .tolerance import interval_of


def report_table(
    claims_folder: str | Path,
    summaries_folder: str | Path,
    null_folder: str | Path | None = None,
    paper_null_folder: str | Path | None = None,
) -> pd.DataFrame:
    """One row per claim: question 1 (`against paper`: the verdict, our value by the paper's protocol, the
    band) and question 2 (`verdict`: ours, the nulls, the test and where its bound comes from), the paper's
    value, the chapter and its run. The untrained model's values come from the summaries in `null_folder`,
    the untrained paper architecture's (`PAPER_NULL_MODEL`) from `paper_null_folder`; without them every
    finding that names that null misses it, so it does not hold."""
    untrained, paper_null = (
        load_summaries(folder) if folder else None
        for folder in (null_folder, paper_null_folder)
    )
    return claims_table(
        load_claims(claims_folder),
        load_summaries(summaries_folder),
        untrained,
        paper_null,
    )


def claims_table(
    claims: list[dict],
    summaries: dict[str, dict],
    untrained: dict[str, dict] | None = None,
    paper_null: dict[str, dict] | None = None,
) -> pd.DataFrame:
    """`report_table` from loaded claims and summaries (notebook -> summary; None: that null book was not
    built)."""
    rows = []
    for c in claims:
        summary = summaries.get(c["notebook"], {})
        params = summary.get("parameters", {})
        rows.append(
            {
                "id": c["id"],
                "paper": c["paper"],
                "nature": c["nature"],
                "origin": c["origin"],
                "claim": c["claim"],
                **judge(
                    c,
                    summary.get("values", {}),
                    chapter_values(untrained, c["notebook"]),
                    chapter_values(paper_null, c["notebook"]),
                    chapter_values(summaries, paper_chapter(c)),
                ),
                "paper value": c["paper_value"],
                "protocol": (c.get("as_paper") or {}).get("protocol", ""),
                "chapter": c["notebook"],
                "run with": ", ".join(f"{k}={v}" for k, v in params.items()),
                "model revision": summary.get("model_revision") or "",
            }
        )
    return pd.DataFrame(rows)


def revision_words(table: pd.DataFrame, digits: int = 12) -> str:
    """The model revision(s) a report's chapters ran on, for the prose: one short hash (a hub commit, or the
    sha256 of the weights), "several: ..." when chapters ran on different weights, "not recorded" when none
    says."""
    found = sorted(set(table.get("model revision", pd.Series(dtype=str))) - {""})
    short = [r if r.startswith("published:") else r[:digits] for r in found]
    if not short:
        return "not recorded"
    return short[0] if len(short) == 1 else "several: " + ", ".join(short)


GROUPS = ("numbers of the paper", "findings", "null-controls", "identities")


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """Counts per paper and group: question 1 over every claim but the identities ("numbers of the paper":
    agrees, differs, ..., qualitative, extension) and question 2 apart for findings, null-controls and identities. Rows (paper,
    group), columns the verdict words that occur."""
    words = list(dict.fromkeys(AGAINST_PAPER + VERDICTS))
    claims = table[table["nature"] != "identity"]
    groups = [claims.assign(group=GROUPS[0], word=claims["against paper"])]
    for nature, group in zip(NATURES, (GROUPS[3], GROUPS[1], GROUPS[2])):
        rows = table[table["nature"] == nature]
        groups.append(rows.assign(group=group, word=rows["verdict"]))
    long = pd.concat(groups)
    counts = pd.crosstab([long["paper"], long["group"]], long["word"]).reindex(
        columns=words, fill_value=0
    )
    order = sorted(counts.index, key=lambda i: (i[0], GROUPS.index(i[1])))
    counts = counts.loc[order]
    return counts.loc[:, counts.sum() > 0]


def chapter_outcomes(
    notebook: str, values: dict, claims_folder: str | Path | None = None
) -> pd.DataFrame:
    """For a chapter's closing paragraph: each of its claims against the paper (the value by the paper's
    protocol and its band), our value with its interval and whether it passes, fails or straddles the book's
    test, and the claim's own nulls recorded in `values` (the untrained model's value, from another run, is
    judged in the report)."""
    rows = []
    for c in chapter_claims(notebook, claims_folder):
        row = judge(c, values, {})
        own = [n for n in row["nulls"] if n.name not in BOOK_NULLS]
        rows.append(
            {
                "claim": c["id"],
                "nature": c["nature"],
                "against paper": row["against paper"],
                "paper's protocol": _paper_text(row) if c.get("as_paper") else "—",
                "band": band_text(row["band"]),
                "test": row["test"],
                "ours": format_value(row["ours"]),
                "outcome": row["outcome"],
                "nulls": "; ".join(
                    f"{n.name}: {format_value(n.value)} ({n.outcome})" for n in own
                )
                or "—",
            }
        )
    return pd.DataFrame(rows)


def _paper_text(row, sample: bool = True) -> str:
    """Our value by the paper's protocol and, where the claim has one, its second reading with its verdict."""
    if row["against paper"] == ELSEWHERE:
        return f"in {row['paper chapter']}"
    text = format_value(row["as paper"], sample=sample)
    if row["second reading"] is not None:
        reading, answer, value = row["second reading"]
        text += (
            f"; read with {reading}: {format_value(value, sample=sample)} ({answer})"
        )
    return text


def band_text(band_) -> str:
    return "—" if band_ is None else f"[{band_[0]:.3g}, {band_[1]:.3g}]"


def badge(word: str, why: str = "") -> str:
    """A verdict word as a coloured HTML badge, `why` on hover."""
    import html

    title = f' title="{html.escape(why)}"' if why else ""
    return (
        f'<span style="background:{COLORS[word]};color:white;padding:1px 6px;'
        f'border-radius:3px;white-space:nowrap"{title}>{word}</span>'
    )


def claims_view(rows: pd.DataFrame, with_nulls: bool):
    """Claims of a `report_table` as a styled table for a page, both questions side by side: against the
    paper (a badge, the paper's number, our value by the paper's protocol and the band; the protocol on
    hover) and the book's test (a badge, our value with its interval, the nulls with `with_nulls`, the test
    with where its bound comes from on hover), and a link to the chapter (its parameters on hover)."""
    import html

    def paper(row) -> str:
        text = f"{badge(row['against paper'], row['protocol'])}<br>{html.escape(str(row['paper value']))}"
        if row["band"] is not None:
            text += f"<br>ours: {html.escape(_paper_text(row, sample=False))}"
            text += f" (band {band_text(row['band'])})"
        return text

    def book(row) -> str:
        missing = (
            f" (missing null: {', '.join(row['unresolved'])})"
            if row["unresolved"]
            else ""
        )
        return f"{badge(row['verdict'], missing)}<br>{html.escape(format_value(row['ours']))}"

    def nulls(items) -> str:
        shown = [
            f"<i>{html.escape(n.name)}</i>: {html.escape(format_value(n.value))} ({n.outcome})"
            for n in items
        ]
        return "<br>".join(shown) or "—"

    def test(row) -> str:
        return f'<span title="{html.escape(row["bound from"])}">{html.escape(row["test"])}</span>'

    def link(row) -> str:
        return f'<a href="{row["chapter"]}.html" title="{html.escape(row["run with"])}">{row["chapter"]}</a>'

    each = lambda show: [show(row) for _, row in rows.iterrows()]
    frame = pd.DataFrame(
        {
            "claim": [
                f"<b>{i}</b> {html.escape(c)}"
                for i, c in zip(rows["id"], rows["claim"])
            ],
            "against the paper": each(paper),
            "the book's test [95% interval]": each(book),
            **({"nulls": rows["nulls"].map(nulls)} if with_nulls else {}),
            "test (bound's source on hover)": each(test),
            "chapter": each(link),
        }
    )
    return frame.style.hide(axis="index").set_table_attributes(
        'style="font-size:0.85em"'
    )


PAPER_NUMBERS = ("agrees", "differs", "inconclusive")


def paper_reason(row) -> str:
    """A few words on why question 1 answered as it did: where our interval lies against the band."""
    if row["band"] is None:
        return "no band"
    found = interval_of(row["as paper"], False)
    if isinstance(found, str):
        return f"ours has {found}"
    (lo, hi), (low, high) = found, row["band"]
    band_words = band_text(row["band"])
    if hi < low:
        return f"below {band_words}"
    if lo > high:
        return f"above {band_words}"
    return f"inside {band_words}" if low <= lo and hi <= high else f"meets {band_words}"


def _numbered(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of claims the paper gives a number for, paper A first, chapter by chapter."""
    rows = table[table["against paper"].isin(PAPER_NUMBERS)]
    return rows.sort_values(["paper", "chapter"], kind="stable")


def paper_numbers(table: pd.DataFrame) -> pd.DataFrame:
    """The papers' numbers against ours, one row per claim the paper gives a number for (question 1 answered
    agrees, differs or inconclusive): the claim, the paper's value, ours by the paper's protocol with its 95%
    interval, the verdict, why in a few words and the chapter."""
    rows = _numbered(table)
    return pd.DataFrame(
        {
            "claim": [f"{i}: {c}" for i, c in zip(rows["id"], rows["claim"])],
            "the paper": rows["paper value"].astype(str).to_numpy(),
            "ours [95% interval]": [
                _paper_text(row, sample=False) for _, row in rows.iterrows()
            ],
            "verdict": rows["against paper"].to_numpy(),
            "why": [paper_reason(row) for _, row in rows.iterrows()],
            "chapter": rows["chapter"].to_numpy(),
        }
    )


def paper_numbers_view(table: pd.DataFrame):
    """`paper_numbers` as a styled table for the report's top: the verdict as a coloured badge, the chapter a
    link, the paper's protocol on hover over the verdict."""
    import html

    frame = paper_numbers(table)
    rows = _numbered(table)
    frame["verdict"] = [badge(v, p) for v, p in zip(frame["verdict"], rows["protocol"])]
    frame["chapter"] = [f'<a href="{c}.html">{c}</a>' for c in frame["chapter"]]
    frame["claim"] = frame["claim"].map(html.escape)
    return (
        frame.style.hide(axis="index")
        .set_properties(subset=["why"], **{"white-space": "nowrap"})
        .set_table_attributes('style="font-size:0.85em"')
    )
