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
# **What you will see.** The numbers the two papers print for their claims, each set beside the same statistic measured on this
# book's model with its 95% interval, and whether the two agree. Below the table, every claim is asked a
# second question: does the book's stronger test tell a trained model from a null?

# %% tags=["parameters", "remove-cell"]
summaries_dir: str = "."  # folder of the chapters' *.summary.json
null_summaries_dir: "str | None" = None  # the untrained model's (None: none)
paper_null_summaries_dir: "str | None" = (
    None  # untrained GPT-2 small's (None: none)
)
claims_dir: "str | None" = None  # folder of the claims (*.yml); None: the project's

# %% tags=["remove-input"]
from pathlib import Path

import matplotlib.pyplot as plt
from lotlib import plots
from lotlib.book.pipeline import project_root
from lotlib.summary import glue, record
from lotlib.verdicts import (
    AGAINST_PAPER,
    GROUPS,
    PAPER_NUMBERS,
    TOLERANCE_RULE,
    VERDICTS,
    claims_view,
    headline,
    paper_numbers_view,
    report_table,
    revision_words,
    verdict_bars,
)

plots.apply_theme()
claims = Path(claims_dir) if claims_dir else project_root() / "book" / "claims"
table = report_table(
    claims, summaries_dir, null_summaries_dir, paper_null_summaries_dir
)
counts = headline(table)
model = next(iter(table["run with"].str.extract(r"model=([^,]+)")[0].dropna()), "?")
glue("model_revision", revision_words(table))
by_group = counts.groupby(level="group").sum()
glue("tolerance_rule", TOLERANCE_RULE)
glue("n_chapters", table["chapter"].nunique())
numbered = table["against paper"].value_counts()
glue("n_numbers", int(numbered.reindex(PAPER_NUMBERS, fill_value=0).sum()))
glue(
    "numbers_counts",
    ", ".join(f"{int(numbered[v])} {v}" for v in PAPER_NUMBERS if v in numbered)
    or "none",
)
for group in GROUPS:
    row = by_group.loc[group] if group in by_group.index else {}
    said = [f"{int(n)} {word}" for word, n in dict(row).items() if n]
    glue(
        f"counts_{group.replace(' ', '_').replace('-', '_')}",
        ", ".join(said) or "none",
    )
glue(
    "null_note",
    (
        ""
        if null_summaries_dir
        else " The untrained model was not run: no finding can hold."
    )
    + (
        ""
        if paper_null_summaries_dir
        else " Untrained GPT-2 small was not run: no finding of Traveling Words can hold."
    ),
)
record(
    {
        "claims": len(table),
        "model": model,
        "weights_revision": revision_words(table, digits=64),
        "null_model": bool(null_summaries_dir),
        "paper_null_model": bool(paper_null_summaries_dir),
        **{
            f"paper_{v.replace(' ', '_')}": int((table["against paper"] == v).sum())
            for v in AGAINST_PAPER
        },
        **{
            f"{nature.replace('-', '_')}_{v.replace(' ', '_')}": int(
                ((table["nature"] == nature) & (table["verdict"] == v)).sum()
            )
            for nature in ("finding", "null-control", "identity")
            for v in VERDICTS
        },
    }
)

# %% [markdown]
# ## The papers' numbers against ours
#
# {glue:text}`n_numbers` numbers of the papers, measured on {glue:text}`model` by each paper's own statistic
# and protocol: {glue:text}`numbers_counts`. A verdict is *agrees* when our 95% interval meets
# the band the paper's printed number allows, *differs* when it lies wholly outside, and *inconclusive* when
# ours has no interval. Hover a verdict for the protocol; the chapter link opens the figure.

# %% tags=["remove-input"]
paper_numbers_view(table)

# %% [markdown]
# ## The verdicts at a glance
#
# **{glue:text}`claims` claims** from {glue:text}`n_chapters` chapters on {glue:text}`model` (weights
# revision {glue:text}`model_revision`). Against the
# papers' numbers: {glue:text}`counts_numbers_of_the_paper`. The book's tests, findings:
# {glue:text}`counts_findings`; null-controls: {glue:text}`counts_null_controls`; identities:
# {glue:text}`counts_identities`.{glue:text}`null_note`

# %% tags=["remove-input"]
verdict_bars(counts, model)
plt.show()
# %% [markdown]
# ## Findings and null-controls, by chapter
#
# Both questions side by side, Traveling Words (paper A) first, chapter by chapter. Hover a verdict for the
# paper's protocol or the missing null, a test for where its bound comes from, a chapter link for the
# parameters it ran with.

# %% tags=["remove-input"]
findings = table[table["nature"] != "identity"].sort_values(
    ["paper", "chapter"], kind="stable"
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
# Each finding below passes on our model *and* on a null ({glue:text}`finding_not_diagnostic` of them).
# The sentence in its chapter says why; the number beside it is the null's.

# %% tags=["remove-input"]
claims_view(table[table["verdict"] == "not diagnostic"], with_nulls=True)

# %% [markdown]
# ## How to read a verdict
#
# Two questions per claim. *Against the paper*: our value by the paper's statistic, judged by one tolerance
# rule for the whole book. *The book's test*: a finding **holds** only when our interval passes and every
# null it names ran and failed.
#
# :::{dropdown} The rules in full
# **Question 1: against the paper.** One tolerance rule for the whole book, set from outside our results:
# {glue:text}`tolerance_rule` *agrees* / *differs* / *inconclusive* answer it; *qualitative* marks a claim the
# paper makes without a number, and *extension* one the paper does not make (a reviewer's request, a question
# of ours): "differs from the paper" is never said of a number the paper did not give. The paper's own
# statistic is computed with the paper's protocol; the authors' code decides where the text is silent.
#
# **Question 2: the book's test.** A claim is a *finding* (about what a trained model does), an *identity*
# (true for any weights: it checks our code) or a *null-control* (about a null model's own behaviour, counted
# apart). A test passes when the whole interval passes and fails when the whole interval fails; otherwise it
# is *inconclusive*.
#
# A finding **holds** only when ours passes and every null it names ran and failed: the same chapter run on
# the untrained model of the same architecture; for Traveling Words, whose findings were measured on GPT-2
# small, the same chapter on GPT-2 small's architecture with random weights too; and the claim's own nulls
# (shuffled tokens, gibberish, a structureless cloud, random-word queries). A null that passes too makes it
# **not diagnostic**; a null that was not run makes it *inconclusive*. Each bound says where it comes from
# (hover the test).
#
# The papers measured GPT-2 (small for Traveling Words, medium for Lines of Thought); the default model here
# is SmolLM2-135M, so *differs* is a finding about this model, not necessarily about the paper. The atlas
# page sets the same claims side by side for every model whose book has been built.
# :::
