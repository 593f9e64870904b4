# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Model atlas
#
# **What you will see.** The claims of the report side by side for every model whose book has been built
# on this machine: one column per model, each cell our value with its 95% interval and the verdict that model's
# report gives it. The untrained variant of a model appears as a column of its own: the null the verdicts of
# its trained model were judged against.
#
# **Why it matters.** The papers measured GPT-2, Llama 2, Mistral and Llama 3.2; the book runs on any causal
# language model. Whether a finding is a property of transformers in general, of one training run, or of the
# architecture alone reads in one row. Build another model's book with `lotlib book --model NAME` (an
# embedded name such as `gemma3-270m`, a local folder, or a hub id such as `gpt2-medium` when online) and
# this page gains a column the next time it is built.

# %% tags=["parameters", "remove-cell"]
books_dir: str = ".."  # the folder holding one folder per model's book (build/book or build/book-quick)
claims_dir: "str | None" = (
    None  # folder of the claims (*.yml); None: book/claims of this project
)

# %% tags=["remove-input"]
import html
import json
from pathlib import Path

import pandas as pd
from IPython.display import HTML, display

from lotlib.book.pipeline import project_root
from lotlib.book.report import COLORS, VERDICTS, format_value, load_claims, report_table
from lotlib.book.summary import record

claims = Path(claims_dir) if claims_dir else project_root() / "book" / "claims"


def book_model(folder: Path) -> str:
    """The model a book ran on: the `model` parameter its chapters recorded (the folder's name otherwise)."""
    for path in sorted(folder.glob("*.summary.json")):
        model = json.loads(path.read_text()).get("parameters", {}).get("model")
        if model:
            return model
    return folder.parent.name


books = {
    book_model(f): f
    for f in sorted(Path(books_dir).glob("*/notebooks"))
    if any(f.glob("*.summary.json"))
}
tables = {}
for model, folder in books.items():
    null = books.get(f"untrained:{model}")
    tables[model] = report_table(claims, folder, null).set_index("id")
models = sorted(tables, key=lambda m: (m.startswith("untrained:"), m))
print(f"{len(models)} books: {', '.join(models)}")


# %% tags=["remove-input"]
def cell(row) -> str:
    if row is None:
        return "—"
    return (
        f'{html.escape(format_value(row["ours"]))}<br><span style="color:{COLORS[row["verdict"]]};'
        f'font-weight:bold">{row["verdict"]}</span>'
    )


rows = []
for c in load_claims(claims):
    cells = [
        cell(tables[m].loc[c["id"]]) if c["id"] in tables[m].index else "—"
        for m in models
    ]
    rows.append(
        f"<tr><td><b>{c['id']}</b> <small>({c['nature']})</small><br><small>{html.escape(c['claim'])}</small>"
        f"</td><td><small>{html.escape(str(c['paper_value']))}</small></td>"
        + "".join(
            f"<td style='vertical-align:top'><small>{x}</small></td>" for x in cells
        )
        + "</tr>"
    )
header = "<th style='width:30%'>claim</th><th>paper</th>" + "".join(
    f"<th>{html.escape(m)}</th>" for m in models
)
display(
    HTML(
        f"<div style='overflow-x:auto'><table style='font-size:0.85em'><thead><tr>{header}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
)

# %% [markdown]
# **What to notice.** Read a row across: a finding *reproduced* on one model and *differs* on another is a
# property of that model; one that is *not diagnostic* everywhere is a test that cannot tell training from
# none. The untrained columns show what each test gives on an architecture that learned nothing. Below, which
# claims change verdict between the trained models.

# %% tags=["remove-input"]
trained = [m for m in models if not m.startswith("untrained:")]
verdicts = pd.DataFrame({m: tables[m]["verdict"] for m in trained})
changed = (
    verdicts[verdicts.nunique(axis=1) > 1] if len(trained) > 1 else verdicts.iloc[0:0]
)
if len(changed):
    display(changed)
else:
    print(
        "no claim changes verdict between the trained models"
        if len(trained) > 1
        else "only one trained model has a book so far"
    )
counts = {
    m: tables[m]["verdict"].value_counts().reindex(list(VERDICTS), fill_value=0)
    for m in models
}
display(pd.DataFrame(counts).loc[lambda t: t.sum(axis=1) > 0])

# %%
record({"models": models, "claims_changing_verdict": list(changed.index)})
