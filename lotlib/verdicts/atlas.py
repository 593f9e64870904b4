"""The atlas: every claim judged on every built book, and the verdicts that move with the model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..stats import as_estimate
from ..summary import load_summaries
from .claims import load_claims
from .judging import format_value
from .names import PAPER_NULL_MODEL, UNTRAINED_PREFIX
from .tables import claims_table
from .tolerance import is_not_applicable


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
