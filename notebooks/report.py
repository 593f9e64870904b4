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
# **What you will see.** Every quantitative claim of the two papers, judged on this book's model: our
# measurement with its 95% interval, the same measurement on a *null* (a model or a dataset on which the
# test should fail), the paper's value, and the verdict. The counts come first, then the findings, then the
# checks of our own code.
#
# **How to read a verdict.** A claim is a *finding* (about what a trained model does), an *identity* (true
# for any weights by construction: it checks our code, not the paper) or a *null-control* (about a null
# model's own behaviour). A test passes when the whole interval passes and fails when the whole interval
# fails; otherwise it is *inconclusive*. A finding is **reproduced** only when ours passes and every null
# fails: the same chapter run on the untrained model of the same architecture, and the claim's own null where
# it has one (shuffled tokens, gibberish, a structureless cloud, random-word queries). A finding that passes
# on its null too is **not diagnostic**: the test cannot tell a trained model from one that learned nothing,
# and its chapter says why. **differs** means our interval lies on the wrong side of the paper's test.
#
# The papers measured GPT-2 (small for Traveling Words, medium for Lines of Thought); the default model here
# is SmolLM2-135M, so *differs* is a finding about this model, not necessarily about the paper. The atlas
# page sets the same claims side by side for every model whose book has been built.

# %% tags=["parameters", "remove-cell"]
summaries_dir: str = "."  # folder of the chapters' *.summary.json
null_summaries_dir: "str | None" = (
    None  # the untrained model's (None: no model null)
)
claims_dir: "str | None" = (
    None  # folder of the claims (*.yml); None: this project's
)

# %% tags=["remove-input"]
from pathlib import Path

import matplotlib.pyplot as plt

from lotlib import plots
from lotlib.book.pipeline import project_root
from lotlib.book.report import (
    VERDICTS,
    claims_view,
    headline,
    report_table,
    verdict_bars,
)
from lotlib.book.summary import glue, record

plots.apply_theme()
claims = Path(claims_dir) if claims_dir else project_root() / "book" / "claims"
table = report_table(claims, summaries_dir, null_summaries_dir)
counts = headline(table)
total = counts.sum()
model = next(iter(table["run with"].str.extract(r"model=([^,]+)")[0].dropna()), "?")
glue("n_chapters", table["chapter"].nunique())
glue("counts", ", ".join(f"{int(total[v])} {v}" for v in counts.columns))
glue(
    "null_note",
    ""
    if null_summaries_dir
    else " No null model was run: findings cannot be reproduced.",
)
record(
    {
        "claims": len(table),
        "model": model,
        "null_model": bool(null_summaries_dir),
        **{
            f"verdict_{v.replace(' ', '_')}": int(total.get(v, 0)) for v in VERDICTS
        },
    }
)

# %% [markdown]
# ## The verdicts at a glance
#
# **{glue:text}`claims` claims** from {glue:text}`n_chapters` chapters on {glue:text}`model`:
# {glue:text}`counts`.{glue:text}`null_note`

# %% tags=["remove-input"]
verdict_bars(counts, model)
plt.show()
# %% [markdown]
# ## Findings and null-controls
#
# Sorted by verdict, Traveling Words (paper A) first. Hover a chapter link for the parameters it ran with;
# the chapter shows the measurement.

# %% tags=["remove-input"]
rank = {v: i for i, v in enumerate(VERDICTS)}
findings = table[table["nature"] != "identity"].sort_values(
    ["paper", "verdict"], key=lambda s: s.map(rank) if s.name == "verdict" else s
)
claims_view(findings, with_nulls=True)

# %% [markdown]
# ## Checks of our own code
#
# Identities hold for any weights: they are not results of the papers but checks that our implementation
# computes what it says (a failure here is a bug, not a finding).

# %% tags=["remove-input"]
claims_view(table[table["nature"] == "identity"], with_nulls=False)

# %% [markdown]
# ## Not diagnostic: why the test cannot tell
#
# Each finding below passes on our model *and* on a null ({glue:text}`verdict_not_diagnostic` of them).
# The sentence in its chapter says why; the number beside it is the null's.

# %% tags=["remove-input"]
claims_view(table[table["verdict"] == "not diagnostic"], with_nulls=True)
