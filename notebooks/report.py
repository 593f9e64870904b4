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
# # Reproduction report
#
# **What you will see.** One row per quantitative claim of the two papers: what the authors report,
# what this book measured (with the model and parameters of that run), the tolerance the verdict uses,
# and the verdict — *holds*, *differs*, *not applicable* (a claim shown without a test), or *missing*
# (the chapter did not produce the value).
#
# **How it is made.** Every chapter ends by recording its measured values in a summary file beside the
# executed notebook. This page reads those summaries and the claim list in `book/claims/*.yml`, where
# the only typed numbers are the papers' own values and the tolerances. The papers measured GPT-2
# (small for Traveling Words, medium for Lines of Thought); the default model here is SmolLM2-135M, so a
# *differs* is a finding about this model, not necessarily about the paper.

# %% tags=["parameters"]
summaries_dir: str = "."  # folder of the chapters' *.summary.json (the book's executed notebooks)
claims_dir: "str | None" = None  # folder of the claims (*.yml); None: book/claims of this project

# %%
from pathlib import Path

import pandas as pd
from IPython.display import HTML

from lotlib.book.pipeline import project_root
from lotlib.book.report import report_table
from lotlib.book.summary import record

claims = Path(claims_dir) if claims_dir else project_root() / "book" / "claims"
table = report_table(claims, summaries_dir)
counts = table["verdict"].value_counts()
print(f"{len(table)} claims from {table['chapter'].nunique()} chapters: "
      + ", ".join(f"{n} {v}" for v, n in counts.items()))


# %%
def _fmt(value):
    return f"{value:.4g}" if isinstance(value, float) else value


shown = table.assign(
    ours=table["ours"].map(_fmt),
    chapter=[f'<a href="{c}.html">{c}</a>' for c in table["chapter"]],
)
HTML(shown.to_html(index=False, escape=False, na_rep="—"))

# %% [markdown]
# **Reading the table.** *Paper value* is what the authors report for their model; *ours* is this
# book's measurement, computed in the linked chapter with the listed parameters. A claim the papers
# make only qualitatively carries its figure's description as the paper value and either a stated
# quantitative test (the tolerance column) or no verdict.

# %%
record({"claims": len(table), **{f"verdict_{v.replace(' ', '_')}": int(n) for v, n in counts.items()}})
