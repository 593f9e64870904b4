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
# on this machine: first at a glance, one colored cell per claim and model (the verdict that model's report
# gives it, with our value written in), then as a table with the 95% intervals. The untrained variant of
# a model appears as a column of its own: the null the verdicts of
# its trained model were judged against (with untrained GPT-2 small, Traveling Words' architecture).
#
# **Why it matters.** The papers measured GPT-2, Llama 2, Mistral and Llama 3.2; the book runs on any causal
# language model, and on the post-LN encoders (BERT, MPNet: trained LayerNorm weights), where the chapters
# that need an LM head or a next token are not applicable. Whether a finding is a property of transformers in
# general, of one training run, or of the architecture alone reads in one row. Build another model's book with `lotlib book --model NAME` (an
# embedded name such as `gemma3-270m`, a local folder, or a hub id such as `gpt2-medium` when online) and
# this page gains a column the next time it is built.

# %% tags=["parameters", "remove-cell"]
books_dir: str = ".."  # a folder per model's book (build/book or build/book-quick)
claims_dir: "str | None" = None  # folder of the claims (*.yml); None: the project's

# %% tags=["remove-input"]
from pathlib import Path

import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.book.pipeline import project_root
from lotlib.summary import glue, record
from lotlib.verdicts import (
    atlas_table,
    built_books,
    revision_words,
    verdict_changes,
    verdict_heatmap,
)

plots.apply_theme()
claims = Path(claims_dir) if claims_dir else project_root() / "book" / "claims"
atlas = atlas_table(claims, built_books(books_dir))
models = list(dict.fromkeys(atlas["model"]))
trained = [m for m in models if not m.startswith("untrained:")]
changing = {
    column: verdict_changes(atlas, column)
    for column in ("against paper", "verdict")
}
glue(
    "model_list",
    "; ".join(
        f"{m} ({book['shape'].iloc[0]}; weights {revision_words(book)})"
        for m, book in atlas.groupby("model", sort=False)
    ),
)
for column, name in (
    ("against paper", "n_moving_paper"),
    ("verdict", "n_changing"),
):
    glue(
        name,
        len(changing[column])
        if len(trained) > 1
        else "no comparison (one trained model)",
    )
record(
    {
        "models": models,
        "claims_changing_verdict": list(
            changing["verdict"].index.get_level_values("id")
        ),
        "claims_changing_against_paper": list(
            changing["against paper"].index.get_level_values("id")
        ),
    }
)

# %% [markdown]
# ## At a glance
#
# Books built: {glue:text}`model_list`. Rows are the claims, grouped by paper (A: Traveling Words, B: Lines of
# Thought) and chapter; columns the models from the narrowest to the widest (D, the width of the residual
# stream, as the chapters recorded it), the untrained ones last. Read a row from left to right to see a
# verdict move with scale.

# %% tags=["remove-input"]
verdict_heatmap(atlas, column="against paper")
plt.show()
# %% [markdown]
# **What to notice.** The first question, for each model: does it give the paper's number, by the paper's
# statistic and protocol, under the book's one tolerance rule (see the report)? Rows marked *qualitative* or
# *extension* have no number of the paper to compare with.

# %% tags=["remove-input"]
verdict_heatmap(atlas)
plt.show()
# %% [markdown]
# **What to notice.** The second question: the book's test against its nulls. Read a row across: a finding
# that *holds* on one model and *fails* on another is a property of that model; one that is *not diagnostic*
# everywhere is a test that cannot tell training from none. A trained model whose untrained book was not built
# has no finding that holds. The untrained columns show what each test gives on an architecture that learned
# nothing.
#
# ## Which verdicts move with the model
#
# The claims judged on more than one trained model whose verdict is not the same on all of them (a cell that is
# not applicable, such as Part II on an encoder, or missing, is left out of the comparison), the models from the
# narrowest to the widest, each cell the verdict and our value. Against the paper's numbers (question 1),
# {glue:text}`n_moving_paper` claims move:

# %% tags=["remove-input"]
changing["against paper"]

# %% [markdown]
# **What to notice.** A number that *agrees* with the paper on one model and *differs* on another measures a
# property of the model, not of transformers in general; whether it moves with width can be read across the
# row. By the book's test against its nulls (question 2), {glue:text}`n_changing` claims move:

# %% tags=["remove-input"]
changing["verdict"]

# %% [markdown]
# ## Every value with its interval

# %% tags=["remove-input"]
atlas.pivot(index=["id", "claim"], columns="model", values="value")[models]
