"""The reproduction report: each claim of the papers, the paper's value, ours with its interval, the value
of a null on which the same test should fail, and a verdict.

Claims live in `book/claims/<notebook>.yml`, a list of entries:

    - id: B4-arrival-only                 # unique, short
      paper: B                            # A = Traveling Words, B = Lines of Thought
      nature: finding                     # identity | finding | null-control
      claim: "The residual variance depends on the arrival layer only"
      paper_value: "function of t + tau only (Eq. 2)"   # what the authors report, typed from PAPERS.md
      key: arrival_r2_relative            # the chapter's summary value that answers it (an Estimate)
      test: {kind: min, bound: 0.9}       # how the value is judged (below)
      nulls: [{key: arrival_r2_relative_cloud, name: "a structureless cloud with the same norm growth"}]

Natures. An *identity* holds for any weights by construction (it checks our code, not the paper); a
*finding* is about what a trained model does; a *null-control* is about a null model's own behaviour.

Tests judge an interval [lo, hi] (an exact value has lo = hi): `abs` (within tol of the paper's value), `rel`
(within tol x abs(paper)), `max` (at most bound), `min` (at least bound), `range` (between lo and hi), `true`
(a boolean check, identities only), `none` (shown, no verdict). The value *passes* when its whole interval
passes, *fails* when its whole interval fails, and *straddles* otherwise.

Verdicts. identity: *identity holds* / *identity fails*. null-control: *reproduced* / *differs* /
*inconclusive*. finding: *differs* when ours fails, *inconclusive* when ours straddles; when ours passes,
every null is judged by the same test: the untrained model of the same architecture (the same chapter run
on `untrained:<model>`, always) and the claim's own `nulls` (a mapping or a list of them; `null:` is read
too), values recorded by the chapter: *reproduced*
when every null fails, *not diagnostic* when a null passes too, *inconclusive* when a null straddles or
was not measured. *not applicable*: a test of kind none, or a value recorded as `not_applicable(reason)`;
*missing*: the chapter did not record the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from ..intervals import Estimate, as_estimate
from .pipeline import project_root
from .summary import NOT_APPLICABLE, load_summaries

KINDS = {"abs", "rel", "max", "min", "range", "true", "none"}
NATURES = ("identity", "finding", "null-control")
VERDICTS = (
    "reproduced",
    "differs",
    "inconclusive",
    "not diagnostic",
    "identity holds",
    "identity fails",
    "not applicable",
    "missing",
)
COLORS = {
    "reproduced": "#2e7d32",
    "differs": "#c62828",
    "inconclusive": "#ef6c00",
    "not diagnostic": "#6a1b9a",
    "identity holds": "#546e7a",
    "identity fails": "#b71c1c",
    "not applicable": "#9e9e9e",
    "missing": "#424242",
}
UNTRAINED_NULL = "untrained model, same architecture"
UNTRAINED_PREFIX = "untrained:"
PAPERS = {"A": "Traveling Words", "B": "Lines of Thought"}
REQUIRED = {"id", "paper", "nature", "claim", "paper_value", "key", "test"}


def load_claims(folder: str | Path, notebook: str | None = None) -> list[dict]:
    """All claims of `folder/*.yml` (only `<notebook>.yml` when given), each tagged with its notebook;
    checked for well-formedness."""
    claims, seen = [], set()
    for path in sorted(Path(folder).glob(f"{notebook or '*'}.yml")):
        for entry in yaml.safe_load(path.read_text()) or []:
            spec = (
                entry.pop("nulls", None)
                or entry.pop(None, None)
                or entry.pop("null", None)
            )  # YAML reads a
            entry = {
                **entry,
                "notebook": path.stem,
                "nulls": _nulls(spec),
            }  # bare `null:` key as None
            problems = (
                [f"missing {sorted(REQUIRED - set(entry))}"]
                if REQUIRED - set(entry)
                else []
            )
            if entry.get("test", {}).get("kind") not in KINDS:
                problems.append(f"test kind not in {sorted(KINDS)}")
            if entry.get("nature") not in NATURES:
                problems.append(f"nature not in {NATURES}")
            if entry["nulls"] and entry.get("nature") != "finding":
                problems.append("only a finding names nulls")
            if (
                entry.get("test", {}).get("kind") == "true"
                and entry.get("nature") == "finding"
            ):
                problems.append(
                    "a finding needs a measured value with an interval, not a true/false test"
                )
            if entry.get("id") in seen:
                problems.append("duplicate id")
            if problems:
                raise ValueError(
                    f"{path}: claim {entry.get('id')!r} is malformed: {'; '.join(problems)}"
                )
            seen.add(entry["id"])
            claims.append(entry)
    return claims


def _nulls(spec) -> list[dict]:
    specs = [] if spec is None else spec if isinstance(spec, list) else [spec]
    for s in specs:
        if not isinstance(s, dict) or not {"key", "name"} <= set(s):
            raise ValueError(f"a null is {{key: ..., name: ...}}, got {s!r}")
    return specs


# ----------------------------------------------------------------------------------------------
# judging one value


def allowed(test: dict, paper_value) -> tuple[float, float]:
    """The interval of values that pass `test` (kinds abs, rel, max, min, range)."""
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
    raise ValueError(f"no interval for a test of kind {kind!r}")


def is_not_applicable(value) -> bool:
    return isinstance(value, dict) and NOT_APPLICABLE in value


def outcome(value, test: dict, paper_value) -> str:
    """'passes', 'fails' or 'straddles' for a recorded value (Estimate, its JSON, number or boolean);
    'missing' for None, 'not applicable' for `not_applicable(...)` or a test of kind none."""
    if test["kind"] == "none" or is_not_applicable(value):
        return "not applicable"
    if value is None:
        return "missing"
    if test["kind"] == "true":
        estimate = as_estimate(value)
        return (
            "passes"
            if (estimate.value if estimate is not None else bool(value))
            else "fails"
        )
    estimate = as_estimate(value)
    if estimate is None or not math.isfinite(estimate.value):
        return "missing"
    lo, hi = (
        (estimate.lo, estimate.hi)
        if math.isfinite(estimate.lo) and math.isfinite(estimate.hi)
        else (estimate.value, estimate.value)
    )
    low, high = allowed(test, paper_value)
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


def verdict(claim: dict, ours, nulls: list[Null]) -> str:
    """The verdict word of `claim` (see the module docstring) from our value and the nulls' values."""
    mine = outcome(ours, claim["test"], claim["paper_value"])
    if mine in ("not applicable", "missing"):
        return mine
    nature = claim["nature"]
    if nature == "identity":
        return {
            "passes": "identity holds",
            "fails": "identity fails",
            "straddles": "inconclusive",
        }[mine]
    if mine == "fails":
        return "differs"
    if mine == "straddles":
        return "inconclusive"
    if nature == "null-control":
        return "reproduced"
    judged = [n.outcome for n in nulls if n.outcome != "not applicable"]
    if "passes" in judged:
        return "not diagnostic"
    if not judged or any(o in ("straddles", "missing") for o in judged):
        return "inconclusive"
    return "reproduced"


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


def describe_test(test: dict, paper_value) -> str:
    kind = test["kind"]
    if kind == "none":
        return "no verdict"
    if kind == "true":
        return "true"
    low, high = allowed(test, paper_value)
    if kind == "max":
        return f"≤ {high:g}"
    if kind == "min":
        return f"≥ {low:g}"
    return f"in [{low:g}, {high:g}]"


# ----------------------------------------------------------------------------------------------
# the report and the atlas


def report_table(
    claims_folder: str | Path,
    summaries_folder: str | Path,
    null_folder: str | Path | None = None,
) -> pd.DataFrame:
    """One row per claim: verdict, ours, the nulls (the untrained model's value from the summaries in
    `null_folder`, and the claim's own nulls), the paper's value, the test, the chapter and its run."""
    summaries = load_summaries(summaries_folder)
    null_summaries = load_summaries(null_folder) if null_folder else {}
    rows = []
    for c in load_claims(claims_folder):
        summary = summaries.get(c["notebook"], {})
        values = summary.get("values", {})
        ours = values.get(c["key"])
        nulls = []
        if c["nature"] == "finding":
            if null_folder is not None:
                null_value = (
                    null_summaries.get(c["notebook"], {})
                    .get("values", {})
                    .get(c["key"])
                )
                nulls.append(
                    Null(
                        UNTRAINED_NULL,
                        null_value,
                        outcome(null_value, c["test"], c["paper_value"]),
                    )
                )
            nulls += [
                Null(
                    n["name"],
                    values.get(n["key"]),
                    outcome(values.get(n["key"]), c["test"], c["paper_value"]),
                )
                for n in c["nulls"]
            ]
        params = summary.get("parameters", {})
        rows.append(
            {
                "id": c["id"],
                "paper": c["paper"],
                "nature": c["nature"],
                "claim": c["claim"],
                "verdict": verdict(c, ours, nulls),
                "ours": ours,
                "nulls": nulls,
                "paper value": c["paper_value"],
                "test": describe_test(c["test"], c["paper_value"]),
                "chapter": c["notebook"],
                "run with": ", ".join(f"{k}={v}" for k, v in params.items()),
            }
        )
    return pd.DataFrame(rows)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """Counts of each verdict per paper (rows A, B) in the order of VERDICTS, identities folded into one
    column per outcome."""
    counts = pd.crosstab(table["paper"], table["verdict"]).reindex(
        columns=list(VERDICTS), fill_value=0
    )
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
    """For a chapter's closing paragraph: each of its claims, our value with its interval and whether that
    interval passes, fails or straddles the test, and the same for the claim's own nulls recorded in
    `values` (the untrained model's value, from another run, is judged in the report)."""
    rows = []
    for c in chapter_claims(notebook, claims_folder):
        judge = lambda key: outcome(values.get(key), c["test"], c["paper_value"])  # noqa: E731
        nulls = "; ".join(
            f"{n['name']}: {format_value(values.get(n['key']))} ({judge(n['key'])})"
            for n in c["nulls"]
        )
        rows.append(
            {
                "claim": c["id"],
                "nature": c["nature"],
                "test": describe_test(c["test"], c["paper_value"]),
                "ours": format_value(values.get(c["key"])),
                "outcome": judge(c["key"]),
                "nulls": nulls or "—",
            }
        )
    return pd.DataFrame(rows)


SAID = {
    "passes": "holds",
    "fails": "does not hold",
    "straddles": "is inconclusive (its interval straddles the bound)",
    "missing": "was not measured",
    "not applicable": "has no verdict",
}


def closing_sentences(
    notebook: str,
    values: dict,
    model: str,
    why_not_diagnostic: str,
    claims_folder: str | Path | None = None,
) -> list[str]:
    """A chapter's closing paragraph, one sentence per claim: whether our value passes its test on `model`, and
    each of the claim's own nulls recorded in `values` with its outcome; where both pass, the sentence says the
    test is not diagnostic and gives `why_not_diagnostic` (the chapter's reason)."""
    sentences = []
    for c in chapter_claims(notebook, claims_folder):
        judge = lambda key: outcome(values.get(key), c["test"], c["paper_value"])  # noqa: E731
        ours = judge(c["key"])
        line = (
            f"{c['id']} {SAID[ours]} on {model}: {format_value(values.get(c['key']))}, "
            f"test {describe_test(c['test'], c['paper_value'])}"
        )
        for null in c["nulls"]:
            theirs = judge(null["key"])
            line += (
                f"; {null['name']}: {format_value(values.get(null['key']))}, {theirs}"
            )
            if ours == theirs == "passes":
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


def atlas_table(claims_folder: str | Path, books: dict[str, Path]) -> pd.DataFrame:
    """The claims side by side for several models, long form: one row per claim and model (trained models
    first, each judged against its untrained book when one is in `books`, model -> summaries folder), with
    the claim's paper, chapter, nature, verdict and our value as text."""
    models = sorted(books, key=lambda m: (m.startswith(UNTRAINED_PREFIX), m))
    frames = []
    for model in models:
        null = books.get(f"{UNTRAINED_PREFIX}{model}")
        table = report_table(claims_folder, books[model], null)
        frames.append(
            table.assign(
                model=model,
                value=[format_value(v, sample=False) for v in table["ours"]],
                point=table["ours"].map(_point),
            )
        )
    columns = [
        "id",
        "paper",
        "chapter",
        "nature",
        "claim",
        "model",
        "verdict",
        "value",
        "point",
    ]
    return pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)


def _point(value) -> str:
    """A recorded value's point estimate in three digits ("" for text, lists or nothing)."""
    if isinstance(value, bool) or is_not_applicable(value):
        return ""
    estimate = as_estimate(value)
    return format(estimate.value, ".3g") if estimate is not None else ""


def verdict_heatmap(atlas: pd.DataFrame, ax=None):
    """Claims x models at a glance: one cell per claim and model, colored by verdict and labelled with our
    value's point estimate (`atlas_table`'s `point`), claims grouped by paper and chapter."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    models = list(dict.fromkeys(atlas["model"]))
    rows = atlas.drop_duplicates("id").sort_values(["paper", "chapter"], kind="stable")
    codes = atlas.pivot(index="id", columns="model", values="verdict").reindex(
        index=rows["id"], columns=models
    )
    text = atlas.pivot(index="id", columns="model", values="point").reindex_like(codes)
    index = codes.apply(lambda column: column.map(VERDICTS.index))
    if ax is None:
        size = (2.2 + 1.7 * len(models), 0.26 * len(codes) + 1.5)
        ax = plt.subplots(figsize=size)[1]
    sns.heatmap(
        index.astype(float),
        cmap=ListedColormap([COLORS[v] for v in VERDICTS]),
        vmin=-0.5,
        vmax=len(VERDICTS) - 0.5,
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
    seen = [v for v in VERDICTS if (atlas["verdict"] == v).any()]
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
    """The headline counts of `headline` as one stacked bar per paper, colored by verdict."""
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(counts)))[1]
    left = pd.Series(0, index=counts.index)
    for name in counts.columns:
        labels = [PAPERS.get(p, p) for p in counts.index]
        ax.barh(labels, counts[name], left=left, color=COLORS[name], label=name)
        left += counts[name]
    ax.set(xlabel="claims", title=f"Verdicts on {model}")
    ax.legend(ncols=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    return ax


def claims_view(rows: pd.DataFrame, with_nulls: bool):
    """Claims of a `report_table` as a styled table for a page: the verdict as a colored badge, our value with
    its interval, the nulls (with `with_nulls`), the paper's value, the test and a link to the chapter (its
    parameters on hover)."""
    import html

    def badge(word: str) -> str:
        return (
            f'<span style="background:{COLORS[word]};color:white;padding:1px 6px;'
            f'border-radius:3px;white-space:nowrap">{word}</span>'
        )

    def nulls(items) -> str:
        shown = [
            f"<i>{html.escape(n.name)}</i>: {html.escape(format_value(n.value))} ({n.outcome})"
            for n in items
        ]
        return "<br>".join(shown) or "—"

    def link(row) -> str:
        return (
            f'<a href="{row["chapter"]}.html" title="{html.escape(row["run with"])}">'
            f"{row['chapter']}</a>"
        )

    frame = pd.DataFrame(
        {
            "verdict": rows["verdict"].map(badge),
            "claim": [
                f"<b>{i}</b> {html.escape(c)}"
                for i, c in zip(rows["id"], rows["claim"])
            ],
            "ours [95% interval]": rows["ours"].map(
                lambda v: html.escape(format_value(v))
            ),
            **({"nulls": rows["nulls"].map(nulls)} if with_nulls else {}),
            "paper": rows["paper value"].map(lambda v: html.escape(str(v))),
            "test": rows["test"].map(html.escape),
            "chapter": rows.apply(link, axis=1),
        }
    )
    return frame.style.hide(axis="index").set_table_attributes(
        'style="font-size:0.85em"'
    )


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
