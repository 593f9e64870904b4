"""The reproduction report: every claim of the papers asks two questions, and the report answers both.

1. *Does our model give the paper's number?* The paper's statistic, computed with the paper's protocol (the
   authors' code where the text is silent), against the number as the paper prints it, under one tolerance
   rule for the whole book (`TOLERANCE_RULE`, `band`). Verdict: *agrees* / *differs* / *inconclusive*;
   *qualitative* when the paper states the claim without a number, *extension* when the claim is not the
   paper's (a reviewer's request, a question of ours): "differs from the paper" is never said of a number the
   paper did not give.
2. *Does the test tell a trained model from a null?* The book's own, stronger test (held-out scoring,
   dimensionless comparisons, nulls). Verdict for a finding: *holds* / *fails* / *not diagnostic* /
   *inconclusive*; *identity holds* / *identity fails* for an identity; *holds* / *fails* for a null-control
   (counted apart).

Claims live in `book/claims/<notebook>.yml`, a list of entries::

    - id: B4-lambda                       # unique, short
      paper: B                            # A = Traveling Words, B = Lines of Thought
      nature: finding                     # identity | finding | null-control
      origin: paper                       # paper (default) | reviewers | extension
      claim: "The residual variance grows as exp(lambda (t + tau)), lambda per layer"
      paper_value: "lambda ~ 0.18 per layer (GPT-2 medium)"   # as the paper says it, typed from PAPERS.md
      as_paper:                           # question 1 (only with a number the paper prints)
        key: paper_lambda_log_mean        # the chapter's value by the paper's statistic and protocol
        printed: "0.18"                   # the number or range as printed: "0.18", "50-51%", "~0"
        scale: rate                       # rate (a model's rate or scale) | share (a fraction, an accuracy)
        floor: mean_abs_z_gaussian        # only for "~0": the statistic's Gaussian sampling floor
        protocol: "N_s = 2.8 D, raw coordinates, same-pilot bases (dx_calculate.m)"
        chapter: b4_authors_protocol      # optional: the chapter that records key and floor, when not this one
      key: lambda_per_layer_log_mean      # question 2: the book's value (an Estimate)
      test: {kind: paper, source: "the tolerance rule"}   # how it is judged, and where its bound comes from
      nulls: [{key: lambda_cloud, name: "a structureless cloud with the same norm growth"}]
      deterministic: true                 # optional: a property of the weights, no sampling (no interval needed)

Tests judge an interval [lo, hi]: `abs` (within tol of `paper_value`), `rel` (within tol x abs(paper_value)), `max`
(at most bound), `min` (at least bound), `range` (between lo and hi), `paper` (inside question 1's band: the
tolerance rule applied to the paper's number), `true` (the boolean True, identities only), `none` (shown, no
verdict). Every bound says where it comes from in `source`: the paper (section, figure, table), the tolerance
rule, or the book's own reason. A value *passes* when its whole interval passes, *fails* when its whole
interval fails, and *straddles* otherwise; a value without a finite interval is not judged (*no interval*)
unless the claim is `deterministic`.

Where the paper's protocol needs a chapter of its own (B4's: it needs half the pilots of the book's held-out test,
so it runs where Walden is too short for that test), `as_paper.chapter` names it: the report reads question 1's
values from that chapter's summary, and the claim's own chapter says where they are.

Where the paper leaves a step of its protocol open and the readings disagree (B3: on which pilots the SVM's
bases are fit), `as_paper.second_reading` names the other one: the report shows its value and verdict, by the
same band, beside the first; the first alone counts in the headline.

A finding *holds* only when ours passes, at least one null ran and failed, and every null it names ran and
failed: the untrained model of the same architecture (the same chapter run on `untrained:<model>`, always),
for a judged finding of Traveling Words the paper's own architecture with random weights (`PAPER_NULL_MODEL`,
untrained GPT-2 small), and the claim's own `nulls` recorded by the chapter. A null that passes too makes it
*not diagnostic*; a null that straddles, was not run, or is not applicable makes it *inconclusive* (the report
names it).
*not applicable*: a test of kind none, or a value recorded as `not_applicable(reason)`; *missing*: the
chapter did not record the value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import yaml

from ..stats import Estimate, as_estimate, zero_band
from .pipeline import project_root
from .summary import NOT_APPLICABLE, load_summaries

KINDS = {"abs", "rel", "max", "min", "range", "paper", "true", "none"}
NATURES = ("identity", "finding", "null-control")
ORIGINS = ("paper", "reviewers", "extension")
SCALES = ("rate", "share")
AGAINST_PAPER = (
    "agrees",
    "differs",
    "inconclusive",
    "qualitative",
    "extension",
    "not applicable",
    "missing",
)
VERDICTS = (
    "holds",
    "fails",
    "inconclusive",
    "not diagnostic",
    "identity holds",
    "identity fails",
    "not applicable",
    "missing",
)
COLORS = {
    "holds": "#2e7d32",
    "agrees": "#2e7d32",
    "fails": "#c62828",
    "differs": "#c62828",
    "inconclusive": "#ef6c00",
    "not diagnostic": "#6a1b9a",
    "identity holds": "#546e7a",
    "identity fails": "#b71c1c",
    "qualitative": "#8d6e63",
    "extension": "#0277bd",
    "not applicable": "#9e9e9e",
    "missing": "#424242",
}
UNTRAINED_NULL = "untrained model, same architecture"
UNTRAINED_PREFIX = "untrained:"
# Traveling Words measured GPT-2 small: its judged findings (a test other than `none`) are also run on GPT-2
# small's architecture with random weights (LayerNorm, GELU, learned positions, GPT-2's tokenizer), so that a
# finding the book's model shows is not one any LayerNorm transformer shows at initialisation. Lines of
# Thought's untrained-model claims run on an untrained GPT-2 medium inside the null-tests chapter (`paper_null`).
PAPER_NULL_MODEL = "untrained:gpt2"
PAPER_NULL_PAPER = "A"
PAPER_NULL = "untrained GPT-2 small, the paper's architecture"
# the nulls that are other books, judged in the report (a chapter's own table shows only the nulls it recorded)
BOOK_NULLS = (UNTRAINED_NULL, PAPER_NULL)
# question 1 in the closing table of a chapter whose claim is measured by the paper's protocol in another
# (`as_paper.chapter`); the report, which reads every chapter, never says it
ELSEWHERE = "in another chapter"
PAPERS = {"A": "Traveling Words", "B": "Lines of Thought"}
REQUIRED = {"id", "paper", "nature", "claim", "paper_value", "key", "test"}
SOURCED = {"abs", "rel", "max", "min", "range"}

# The papers' own spread between their models: Lines of Thought gives lambda ~ 0.18 per layer for GPT-2 medium
# and ~ 0.27 for Llama 2 7B, the one number either paper reports for two models.
CROSS_MODEL_FACTOR = 0.27 / 0.18
TOLERANCE_RULE = (
    "A number of the papers agrees with ours when our 95% interval meets its band, and differs when the "
    "interval lies wholly outside it. The band is the number as printed, widened by half a unit of its last "
    "printed digit (a range printed as a-b keeps both ends, each widened the same way). A rate or scale of a "
    "model (lambda, alpha, a divergence in nats) is widened further by the factor that separates the papers' "
    "own models for the same kind of number: lambda is 0.18 for GPT-2 medium and 0.27 for Llama 2 7B, a factor "
    f"of {CROSS_MODEL_FACTOR:.2f}, so the band runs from its low end divided by {CROSS_MODEL_FACTOR:.2f} to its "
    "high end times it. A share or an accuracy keeps the printed precision. A value the paper draws as about "
    "zero, with no digits, has the band from 0 to the same statistic's sampling floor: the upper end of its "
    "values on Gaussian samples of the same size (from their lower end, where that is below 0: a signed "
    "statistic such as an excess kurtosis). No band is set from our results; a value without a finite interval is "
    "inconclusive unless it is a deterministic property of the weights."
)


def load_claims(folder: str | Path, notebook: str | None = None) -> list[dict]:
    """All claims of `folder/*.yml` (only `<notebook>.yml` when given), each tagged with its notebook;
    checked for well-formedness (a malformed claim raises, naming the file, the claim and the problem)."""
    claims, seen = [], set()
    for path in sorted(Path(folder).glob(f"{notebook or '*'}.yml")):
        for entry in yaml.safe_load(path.read_text()) or []:
            # YAML reads a bare `null:` key as None
            spec = (
                entry.pop("nulls", None)
                or entry.pop(None, None)
                or entry.pop("null", None)
            )
            entry = {
                "origin": "paper",
                **entry,
                "notebook": path.stem,
                "nulls": _nulls(spec),
            }
            problems = _problems(entry) + (
                ["duplicate id"] if entry.get("id") in seen else []
            )
            if problems:
                raise ValueError(
                    f"{path}: claim {entry.get('id')!r} is malformed: {'; '.join(problems)}"
                )
            seen.add(entry["id"])
            claims.append(entry)
    return claims


def _problems(entry: dict) -> list[str]:
    problems = (
        [f"missing {sorted(REQUIRED - set(entry))}"] if REQUIRED - set(entry) else []
    )
    test, nature = entry.get("test", {}), entry.get("nature")
    if test.get("kind") not in KINDS:
        problems.append(f"test kind not in {sorted(KINDS)}")
    elif test["kind"] in SOURCED and not test.get("source"):
        problems.append(
            "the test's bound does not say where it comes from (test.source)"
        )
    if nature not in NATURES:
        problems.append(f"nature not in {NATURES}")
    if entry.get("origin") not in ORIGINS:
        problems.append(f"origin not in {ORIGINS}")
    if entry["nulls"] and nature != "finding":
        problems.append("only a finding names nulls")
    if test.get("kind") == "true" and nature != "identity":
        problems.append(
            "a true/false test is for identities; a finding needs a measured value with an interval"
        )
    as_paper = entry.get("as_paper")
    if as_paper is not None:
        if entry.get("origin") != "paper":
            problems.append("as_paper is for a number the paper prints (origin: paper)")
        if not {"key", "printed", "scale", "protocol"} <= set(as_paper):
            problems.append("as_paper needs key, printed, scale and protocol")
        elif as_paper["scale"] not in SCALES:
            problems.append(f"as_paper.scale not in {SCALES}")
        else:
            try:
                band(as_paper["printed"], as_paper["scale"], (0.0, 0.0))
            except ValueError as error:
                problems.append(str(error))
        if as_paper.get("chapter") is not None and test.get("kind") == "paper":
            problems.append(
                "a test of kind paper judges the as_paper value of its own chapter (drop as_paper.chapter)"
            )
        second = as_paper.get("second_reading")
        if second is not None and not {"key", "reading"} <= set(second):
            problems.append(
                "as_paper.second_reading needs key and reading (what it reads otherwise)"
            )
    if test.get("kind") == "paper" and as_paper is None:
        problems.append(
            "a test of kind paper needs as_paper (the band it is judged by)"
        )
    return problems


def _nulls(spec) -> list[dict]:
    specs = [] if spec is None else spec if isinstance(spec, list) else [spec]
    for s in specs:
        if not isinstance(s, dict) or not {"key", "name"} <= set(s):
            raise ValueError(f"a null is {{key: ..., name: ...}}, got {s!r}")
    return specs


# ----------------------------------------------------------------------------------------------
# the tolerance rule

_PRINTED = re.compile(
    r"^\s*~?\s*(\d+(?:\.\d+)?)\s*(?:[-–]\s*(\d+(?:\.\d+)?))?\s*(%?)\s*$"
)


def _widened(number: str, percent: bool) -> tuple[float, float]:
    """A printed number and half a unit of its last digit, as a fraction when printed as a percentage."""
    digits = len(number.split(".")[1]) if "." in number else 0
    half, value = 0.5 * 10.0**-digits, float(number)
    scale = 0.01 if percent else 1.0
    return (value - half) * scale, (value + half) * scale


def band(
    printed: str, scale: str, floor: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The band of values that agree with a paper number printed as `printed` ("0.18", "50-51%", "1-1.5",
    "~0"), under `TOLERANCE_RULE`: the printed precision, widened by `CROSS_MODEL_FACTOR` for a `rate`;
    "~0" is `intervals.zero_band` of `floor`, the range (low, high) of the statistic on Gaussian samples
    of the same size."""
    if printed.replace(" ", "") in ("~0", "0"):
        if floor is None or not all(math.isfinite(x) for x in floor):
            raise ValueError(
                f"a paper value printed as {printed!r} needs as_paper.floor (a sampling floor)"
            )
        return zero_band(*floor)
    match = _PRINTED.match(printed)
    if not match:
        raise ValueError(
            f"as_paper.printed {printed!r} is not a number, a range a-b or ~0 (a % sign may follow)"
        )
    first, second, percent = match.groups()
    lo = _widened(first, bool(percent))[0]
    hi = _widened(second or first, bool(percent))[1]
    if scale == "rate":
        return lo / CROSS_MODEL_FACTOR, hi * CROSS_MODEL_FACTOR
    return lo, hi


def against_paper(
    claim: dict, values: dict, reading: str = "key"
) -> tuple[str, object, tuple[float, float] | None]:
    """Question 1 for `claim` from a chapter's recorded `values`: the verdict word (`AGAINST_PAPER`), the value
    by the paper's statistic and protocol, and the band it is judged against (None without a paper number).
    `reading="second_reading"`: the same for the value of `as_paper.second_reading` (another reading of a
    protocol the paper leaves open, judged by the same band)."""
    if claim["nature"] == "identity":
        return (
            "not applicable",
            None,
            None,
        )  # an identity checks our code, not a number of the paper
    if claim["origin"] != "paper":
        return "extension", None, None
    spec = claim.get("as_paper")
    if spec is None:
        return "qualitative", None, None
    value = values.get(spec["key"] if reading == "key" else spec[reading]["key"])
    if is_not_applicable(value):
        return "not applicable", value, None
    floor = _floor_range(values.get(spec.get("floor"))) if spec.get("floor") else None
    try:
        low, high = band(spec["printed"], spec["scale"], floor)
    except ValueError:
        return "missing", value, None  # the floor was not recorded
    found = _interval(value, claim.get("deterministic", False))
    if found in ("missing", "not applicable"):
        return found, value, (low, high)
    if found == "no interval":
        return "inconclusive", value, (low, high)
    lo, hi = found
    return ("differs" if hi < low or lo > high else "agrees"), value, (low, high)


def _floor_range(value) -> tuple[float, float] | None:
    """A recorded sampling floor as (low, high): its interval, or its value twice when it has none."""
    estimate = as_estimate(value)
    if estimate is None:
        return None
    if math.isfinite(estimate.lo) and math.isfinite(estimate.hi):
        return estimate.lo, estimate.hi
    return estimate.value, estimate.value


# ----------------------------------------------------------------------------------------------
# judging one value


def allowed(
    test: dict, paper_value, band_: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The interval of values that pass `test` (kinds abs, rel, max, min, range; paper: `band_`)."""
    kind = test["kind"]
    if kind == "abs":
        return paper_value - test["tol"], paper_value + test["tol"]
    if kind == "rel":
        return paper_value - test["tol"] * abs(paper_value), paper_value + test[
            "tol"
        ] * abs(paper_value)
    if kind == "max":
        return -math.inf, test["bound"]
    if kind == "min":
        return test["bound"], math.inf
    if kind == "range":
        return test["lo"], test["hi"]
    if kind == "paper" and band_ is not None:
        return band_
    raise ValueError(f"no interval for a test of kind {kind!r}")


def is_not_applicable(value) -> bool:
    return isinstance(value, dict) and NOT_APPLICABLE in value


def _interval(value, deterministic: bool):
    """(lo, hi) of a recorded value; 'missing', 'not applicable' or 'no interval' when it has none to judge
    (a point value counts as [v, v] only when `deterministic`)."""
    if is_not_applicable(value):
        return "not applicable"
    if value is None:
        return "missing"
    estimate = as_estimate(value) if not isinstance(value, bool) else None
    if estimate is None or not math.isfinite(estimate.value):
        return "missing"
    sampled = (
        estimate.method != "exact"
    )  # `intervals.exact`: a point value, no sampling behind it
    if sampled and math.isfinite(estimate.lo) and math.isfinite(estimate.hi):
        return estimate.lo, estimate.hi
    return (estimate.value, estimate.value) if deterministic else "no interval"


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
    found = _interval(value, deterministic)
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
    chapter = _paper_chapter(claim)
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
                    _chapter_values(untrained, c["notebook"]),
                    _chapter_values(paper_null, c["notebook"]),
                    _chapter_values(summaries, _paper_chapter(c)),
                ),
                "paper value": c["paper_value"],
                "protocol": (c.get("as_paper") or {}).get("protocol", ""),
                "chapter": c["notebook"],
                "run with": ", ".join(f"{k}={v}" for k, v in params.items()),
                "model revision": summary.get("model_revision") or "",
            }
        )
    return pd.DataFrame(rows)


def _paper_chapter(claim: dict) -> str:
    """The chapter that records `claim`'s value by the paper's protocol (`as_paper.chapter`, else its own)."""
    return (claim.get("as_paper") or {}).get("chapter") or claim["notebook"]


def _chapter_values(summaries: dict | None, notebook: str) -> dict | None:
    """The values a null book recorded for `notebook` (None: the book was not built)."""
    return None if summaries is None else summaries.get(notebook, {}).get("values", {})


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


def chapter_claims(
    notebook: str, claims_folder: str | Path | None = None
) -> list[dict]:
    """The claims of one chapter, from `claims_folder`; by default `book/claims` of the project running it
    (`project_root`)."""
    if claims_folder is None:
        claims_folder = project_root() / "book" / "claims"
    return load_claims(claims_folder, notebook)


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
                "band": _band_text(row["band"]),
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


def _band_text(band_) -> str:
    return "—" if band_ is None else f"[{band_[0]:.3g}, {band_[1]:.3g}]"


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
                f"{format_value(row['as paper'])}, band {_band_text(row['band'])}"
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


def built_books(books_dir: str | Path) -> dict[str, Path]:
    """The books built under `books_dir` (one folder per model, `*/notebooks` holding summaries), by the model
    their chapters recorded (the folder's name when none did)."""
    found = {}
    for folder in sorted(Path(books_dir).glob("*/notebooks")):
        models = [
            s.get("parameters", {}).get("model")
            for s in load_summaries(folder).values()
        ]
        if models:  # a folder with summaries
            found[next((m for m in models if m), folder.parent.name)] = folder
    return found


def model_shape(summaries: dict[str, dict]) -> tuple[int, int] | None:
    """A built book's (width d_model, depth n_layers), as its chapters' summaries (notebook -> summary) recorded
    them (the open-questions chapter runs on every model and records both); None when no chapter did."""
    for summary in summaries.values():
        values = summary.get("values", {})
        shape = values.get("d_model"), values.get("n_layers")
        if all(isinstance(v, int) for v in shape):
            return shape
    return None


def by_scale(shapes: dict[str, tuple[int, int] | None]) -> list[str]:
    """Models (model -> its `model_shape`) in the atlas's order: trained models first, each group from the
    narrowest to the widest (then the shallowest, then by name); a book that recorded no shape comes last in
    its group."""
    return sorted(
        shapes,
        key=lambda m: (
            m.startswith(UNTRAINED_PREFIX),
            shapes[m] is None,
            shapes[m] or (0, 0),
            m,
        ),
    )


def shape_words(shape: tuple[int, int] | None) -> str:
    """ "D 576, L 30" for a recorded (width, depth); "shape not recorded" otherwise."""
    return f"D {shape[0]}, L {shape[1]}" if shape else "shape not recorded"


def atlas_table(claims_folder: str | Path, books: dict[str, Path]) -> pd.DataFrame:
    """The claims side by side for several models, long form: one row per claim and model (`by_scale`: trained
    models first, narrowest first; each judged against its untrained book and the paper architecture's when
    they are in `books`, model -> summaries folder), with the model's width and depth as its chapters
    recorded them (`shape`), the claim's paper, chapter, nature, both verdicts (against the paper, the book's
    test), and the value each judges (`JUDGED`) as text and as a point."""
    summaries = {model: load_summaries(folder) for model, folder in books.items()}
    shapes = {model: model_shape(loaded) for model, loaded in summaries.items()}
    claims = load_claims(claims_folder)
    frames = []
    for model in by_scale(shapes):
        null = summaries.get(f"{UNTRAINED_PREFIX}{model}")
        paper = summaries.get(PAPER_NULL_MODEL) if null is not None else None
        table = claims_table(claims, summaries[model], null, paper)
        frames.append(
            table.assign(
                model=model,
                shape=shape_words(shapes[model]),
                value=[format_value(v, sample=False) for v in table["ours"]],
                point=table["ours"].map(_point),
                **{
                    "value as paper": [
                        format_value(v, sample=False) for v in table["as paper"]
                    ],
                    "point as paper": table["as paper"].map(_point),
                },
            )
        )
    columns = [
        "id",
        "paper",
        "chapter",
        "nature",
        "claim",
        "model",
        "shape",
        "model revision",
        "against paper",
        "verdict",
        "value",
        "point",
        "value as paper",
        "point as paper",
    ]
    return pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)


# The value each verdict judges, as text and as a point: question 1 reads the value measured by the paper's
# protocol (for some claims another statistic, or another chapter's, than the book's own test reads).
JUDGED = {
    "verdict": ("value", "point"),
    "against paper": ("value as paper", "point as paper"),
}


UNJUDGED = ("not applicable", "missing")  # no verdict to compare across models


def verdict_changes(atlas: pd.DataFrame, column: str = "verdict") -> pd.DataFrame:
    """The claims whose verdict in `column` ("verdict": the book's test; "against paper": question 1) is not
    the same on every trained model of `atlas` (`atlas_table`) where the claim was judged (not applicable and
    missing cells are left out): one row per such claim, one column per trained model in the atlas's order
    (narrowest first), each cell "verdict (the value it judges)"."""
    trained = atlas[~atlas["model"].str.startswith(UNTRAINED_PREFIX)]
    judged = trained[~trained[column].isin(UNJUDGED)]
    moving = judged.groupby("id")[column].nunique().loc[lambda n: n > 1].index
    value = trained[JUDGED[column][0]]
    cells = trained.assign(cell=trained[column] + " (" + value + ")")
    table = cells[cells["id"].isin(moving)].pivot(
        index=["id", "claim"], columns="model", values="cell"
    )
    return table.reindex(columns=list(dict.fromkeys(trained["model"])))


def _point(value) -> str:
    """A recorded value's point estimate in three digits ("" for text, lists or nothing)."""
    if isinstance(value, bool) or is_not_applicable(value):
        return ""
    estimate = as_estimate(value)
    return format(estimate.value, ".3g") if estimate is not None else ""


def verdict_heatmap(atlas: pd.DataFrame, column: str = "verdict", ax=None):
    """Claims x models at a glance: one cell per claim and model, colored by the verdict in `column`
    ("verdict": the book's test; "against paper": question 1) and labelled with the point estimate of the value
    that verdict judges (`JUDGED`), claims grouped by paper and chapter."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    words = AGAINST_PAPER if column == "against paper" else VERDICTS
    models = list(dict.fromkeys(atlas["model"]))
    rows = atlas.drop_duplicates("id").sort_values(["paper", "chapter"], kind="stable")
    codes = atlas.pivot(index="id", columns="model", values=column).reindex(
        index=rows["id"], columns=models
    )
    text = atlas.pivot(index="id", columns="model", values=JUDGED[column][1])
    text = text.reindex_like(codes)
    index = codes.apply(lambda values: values.map(words.index))
    if ax is None:
        size = (2.2 + 1.7 * len(models), 0.26 * len(codes) + 1.5)
        ax = plt.subplots(figsize=size)[1]
    sns.heatmap(
        index.astype(float),
        cmap=ListedColormap([COLORS[v] for v in words]),
        vmin=-0.5,
        vmax=len(words) - 0.5,
        annot=text.fillna(""),
        fmt="",
        annot_kws={"fontsize": 6, "color": "white"},
        cbar=False,
        linewidths=0.5,
        linecolor="white",
        ax=ax,
    )
    ax.set_yticks(
        [i + 0.5 for i in range(len(codes))],
        [f"{i}  ({c})" for i, c in zip(rows["id"], rows["chapter"])],
        fontsize=6,
    )
    ax.set(xlabel="", ylabel="")
    ax.xaxis.tick_top()
    # untrained models' names are long: slanted, so that neighbouring columns' names do not overlap
    ax.tick_params(axis="x", labelrotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("left")
    seen = [v for v in words if (atlas[column] == v).any()]
    ax.legend(
        [Patch(color=COLORS[v]) for v in seen],
        seen,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=7,
        frameon=False,
    )
    return ax


def verdict_bars(counts: pd.DataFrame, model: str, ax=None):
    """The headline counts of `headline` as one stacked bar per paper and group, colored by verdict."""
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.subplots(figsize=(8, 1.4 + 0.4 * len(counts)))[1]
    labels = [f"{PAPERS.get(p, p)}: {g}" for p, g in counts.index]
    left = pd.Series(0, index=counts.index)
    for name in counts.columns:
        ax.barh(labels, counts[name], left=left, color=COLORS[name], label=name)
        left += counts[name]
    ax.invert_yaxis()
    ax.set(xlabel="claims", title=f"Verdicts on {model}")
    ax.legend(ncols=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    return ax


def claims_view(rows: pd.DataFrame, with_nulls: bool):
    """Claims of a `report_table` as a styled table for a page, both questions side by side: against the
    paper (a badge, the paper's number, our value by the paper's protocol and the band; the protocol on
    hover) and the book's test (a badge, our value with its interval, the nulls with `with_nulls`, the test
    with where its bound comes from on hover), and a link to the chapter (its parameters on hover)."""
    import html

    def badge(word: str, why: str = "") -> str:
        title = f' title="{html.escape(why)}"' if why else ""
        return (
            f'<span style="background:{COLORS[word]};color:white;padding:1px 6px;'
            f'border-radius:3px;white-space:nowrap"{title}>{word}</span>'
        )

    def paper(row) -> str:
        text = f"{badge(row['against paper'], row['protocol'])}<br>{html.escape(str(row['paper value']))}"
        if row["band"] is not None:
            text += f"<br>ours: {html.escape(_paper_text(row, sample=False))}"
            text += f" (band {_band_text(row['band'])})"
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


def claim_keys(claim: dict) -> set[str]:
    """Every summary key a claim reads from its own chapter: its value, its nulls' and, unless another chapter
    measures it (`as_paper.chapter`), the paper protocol's value, floor and second reading (`paper_keys`)."""
    keys = {claim["key"], *(n["key"] for n in claim["nulls"])}
    return (
        keys if _paper_chapter(claim) != claim["notebook"] else keys | paper_keys(claim)
    )


def paper_keys(claim: dict) -> set[str]:
    """The summary keys of a claim's value by the paper's protocol: value, floor and second reading."""
    paper = claim.get("as_paper") or {}
    keys = {paper[k] for k in ("key", "floor") if paper.get(k)}
    if paper.get("second_reading"):
        keys.add(paper["second_reading"]["key"])
    return keys


def recorded_keys(notebook: str, claims_folder: str | Path | None = None) -> set[str]:
    """Every key the report reads from `notebook`'s summary: its claims' (`claim_keys`) and the paper
    protocol's keys of other chapters' claims that it measures (`as_paper.chapter`)."""
    folder = claims_folder or project_root() / "book" / "claims"
    keys = set()
    for claim in load_claims(folder):
        if claim["notebook"] == notebook:
            keys |= claim_keys(claim)
        if _paper_chapter(claim) == notebook and claim["notebook"] != notebook:
            keys |= paper_keys(claim)
    return keys


def conclude_not_applicable(
    notebook: str, model: str, reason: str, claims_folder: str | Path | None = None
) -> pd.DataFrame:
    """The last cell of a chapter that does not apply to `model` (`lotlib.book.pipeline`): every key its claims
    read recorded as `not_applicable(reason)`, one sentence saying so (glued as `closing` and shown) and the
    table of claims."""
    from IPython.display import Markdown, display

    from .summary import glue, not_applicable, record

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
    """A chapter's last cell: record its `values` (`lotlib.book.summary.record`), say each claim's outcome on
    `model` in one paragraph (`closing_sentences`, glued as `closing` and shown) and return the table of
    claims (`chapter_outcomes`) for the cell to display."""
    from IPython.display import Markdown, display

    from .summary import glue, record

    record(values)
    sentences = closing_sentences(
        notebook, values, model, why_not_diagnostic, claims_folder
    )
    paragraph = " ".join(s + "." for s in sentences)
    glue("closing", paragraph)
    display(Markdown(paragraph))
    return chapter_outcomes(notebook, values, claims_folder)
