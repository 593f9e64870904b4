"""Judging one claim: the paper's question (agrees / differs) and the book's (holds / fails against its nulls)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..stats import NOT_APPLICABLE, Estimate, as_estimate
from .claims import paper_chapter
from .names import ELSEWHERE, PAPER_NULL, PAPER_NULL_PAPER, UNTRAINED_NULL
from .tolerance import against_paper, allowed, interval_of, is_not_applicable


def outcome(
    value, test: dict, paper_value, deterministic: bool = False, band_=None
) -> str:
    """'passes', 'fails' or 'straddles' for a recorded value (an Estimate or its JSON; a bare number only when
    `deterministic`; the boolean True or False for a test of kind true); 'no interval' for a sampled value
    without a finite interval (or a non-boolean under kind true), 'missing' for None, 'not applicable' for
    `not_applicable(...)` or a test of kind none. `band_` is question 1's band (tests of kind paper)."""
    if test["kind"] == "none" or is_not_applicable(value):
        return "not applicable"
    if value is None:
        return "missing"
    if test["kind"] == "true":
        return (
            "passes" if value is True else "fails" if value is False else "no interval"
        )
    if test["kind"] == "paper" and band_ is None:
        return "missing"
    found = interval_of(value, deterministic)
    if isinstance(found, str):
        return found
    lo, hi = found
    low, high = allowed(test, paper_value, band_)
    if low <= lo and hi <= high:
        return "passes"
    if hi < low or lo > high:
        return "fails"
    return "straddles"


@dataclass(frozen=True)
class Null:
    """A null's name, its recorded value and that value's outcome under the claim's test."""

    name: str
    value: object
    outcome: str


def verdict(claim: dict, ours, nulls: list[Null], band_=None) -> str:
    """Question 2's verdict word for `claim` (see the module docstring) from our value and the nulls'."""
    mine = outcome(
        ours,
        claim["test"],
        claim["paper_value"],
        claim.get("deterministic", False),
        band_,
    )
    if mine in ("not applicable", "missing"):
        return mine
    if mine in ("straddles", "no interval"):
        return "inconclusive"
    if claim["nature"] == "identity":
        return "identity holds" if mine == "passes" else "identity fails"
    if mine == "fails" or claim["nature"] == "null-control":
        return "holds" if mine == "passes" else "fails"
    judged = [n.outcome for n in nulls]
    if not judged or any(o != "fails" for o in judged if o != "passes"):
        return "inconclusive"  # no null, or one that straddles, has no interval, was not run or not applicable
    return "not diagnostic" if "passes" in judged else "holds"


def unresolved_nulls(nulls: list[Null]) -> list[str]:
    """The names of the nulls that leave a finding inconclusive: not run, not applicable, no interval."""
    return [
        n.name
        for n in nulls
        if n.outcome in ("missing", "not applicable", "no interval")
    ]


def format_value(value, sample: bool = True) -> str:
    """`value [lo, hi]` for an Estimate (with `sample`, the sample it came from), the reason for
    not_applicable, the value otherwise."""
    if value is None:
        return "—"
    if is_not_applicable(value):
        return f"n/a ({value[NOT_APPLICABLE]})"
    estimate = as_estimate(value) if not isinstance(value, bool) else None
    if estimate is not None and isinstance(value, (dict, Estimate)):
        text = format(estimate, ".3g")
        return (
            f"{text} (n = {estimate.n} {estimate.unit})"
            if sample and estimate.lo != estimate.hi
            else text
        )
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(map(str, value[:6])) + (" …" if len(value) > 6 else "")
    return str(value)


def describe_test(test: dict, paper_value, band_=None) -> str:
    kind = test["kind"]
    if kind == "none":
        return "no verdict"
    if kind == "true":
        return "true"
    if kind == "paper" and band_ is None:
        return "in the paper's band"
    low, high = allowed(test, paper_value, band_)
    if kind == "max":
        return f"≤ {high:g}"
    if kind == "min":
        return f"≥ {low:g}"
    return f"in [{low:.3g}, {high:.3g}]"


# ----------------------------------------------------------------------------------------------
# the report and the atlas


def paper_nulled(claim: dict) -> bool:
    """Whether `claim` is judged against the paper's architecture too (`PAPER_NULL`): a finding of Traveling
    Words with a test."""
    return (
        claim["nature"] == "finding"
        and claim["paper"] == PAPER_NULL_PAPER
        and claim["test"]["kind"] != "none"
    )


def judge(
    claim: dict,
    values: dict,
    untrained: dict | None,
    paper_null: dict | None = None,
    paper_values: dict | None = None,
) -> dict:
    """Both questions for one claim, from its chapter's recorded `values` and, for a finding, the untrained
    model's values of the same chapter (`untrained`) and, where `paper_nulled`, the untrained paper
    architecture's (`paper_null`); None: that book was not built, and the null is missing. A claim whose
    `as_paper.chapter` is another chapter reads question 1 from `paper_values`, that chapter's values (None:
    not at hand, question 1 reads `ELSEWHERE`). Returns the row's verdicts, values, nulls, band and test."""
    spec = claim.get("as_paper") or {}
    chapter = paper_chapter(claim)
    source = values if chapter == claim["notebook"] else paper_values
    second = None
    if source is None:
        answer, as_paper, band_ = ELSEWHERE, None, None
    else:
        answer, as_paper, band_ = against_paper(claim, source)
        if spec.get("second_reading") is not None:
            second_answer, second_value, _ = against_paper(
                claim, source, "second_reading"
            )
            second = (spec["second_reading"]["reading"], second_answer, second_value)
    ours, nulls = values.get(claim["key"]), []
    judge_ = partial(
        outcome,
        test=claim["test"],
        paper_value=claim["paper_value"],
        deterministic=claim.get("deterministic", False),
        band_=band_,
    )
    if claim["nature"] == "finding":
        named = [(UNTRAINED_NULL, (untrained or {}).get(claim["key"]))]
        if paper_nulled(claim):
            named.append((PAPER_NULL, (paper_null or {}).get(claim["key"])))
        named += [(n["name"], values.get(n["key"])) for n in claim["nulls"]]
        nulls = [Null(name, value, judge_(value)) for name, value in named]
    verdict_ = verdict(claim, ours, nulls, band_)
    return {
        "against paper": answer,
        "paper chapter": chapter,
        "as paper": as_paper,
        "second reading": second,
        "band": band_,
        "verdict": verdict_,
        "ours": ours,
        "outcome": judge_(ours),
        "nulls": nulls,
        "unresolved": unresolved_nulls(nulls) if verdict_ == "inconclusive" else [],
        "test": describe_test(claim["test"], claim["paper_value"], band_),
        "bound from": claim["test"].get(
            "source", "the tolerance rule" if claim["test"]["kind"] == "paper" else ""
        ),
    }


def chapter_values(summaries: dict | None, notebook: str) -> dict | None:
    """The values a null book recorded for `notebook` (None: the book was not built)."""
    return None if summaries is None else summaries.get(notebook, {}).get("values", {})
