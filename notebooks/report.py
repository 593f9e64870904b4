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
summaries_dir: str = (
    "."  # folder of the chapters' *.summary.json (the book's executed notebooks)
)
null_summaries_dir: "str | None" = (
    None  # the same chapters run on the untrained model (None: no model null)
)
claims_dir: "str | None" = (
    None  # folder of the claims (*.yml); None: book/claims of this project
)

# %% tags=["remove-input"]
import html
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import HTML, Markdown, display

from lotlib import plots
from lotlib.book.pipeline import project_root
from lotlib.book.report import COLORS, VERDICTS, format_value, headline, report_table
from lotlib.book.summary import record

plots.apply_theme()
claims = Path(claims_dir) if claims_dir else project_root() / "book" / "claims"
table = report_table(claims, summaries_dir, null_summaries_dir)
counts = headline(table)
model = next(
    (
        p.split("=", 1)[1]
        for run in table["run with"]
        for p in run.split(", ")
        if p.startswith("model=")
    ),
    "the default model",
)

# %% [markdown]
# ## The verdicts at a glance

# %% tags=["remove-input"]
papers = {"A": "Traveling Words", "B": "Lines of Thought"}
fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(counts)))
left = pd.Series(0, index=counts.index)
for verdict in counts.columns:
    ax.barh(
        [papers.get(p, p) for p in counts.index],
        counts[verdict],
        left=left,
        color=COLORS[verdict],
        label=verdict,
    )
    left += counts[verdict]
ax.set(xlabel="claims", title=f"Verdicts on {model}")
ax.legend(
    ncols=4, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45), frameon=False
)
plt.show()
total = counts.sum()
display(
    Markdown(
        f"**{len(table)} claims** from {table['chapter'].nunique()} chapters on {model}: "
        + ", ".join(f"{int(total[v])} {v}" for v in counts.columns)
        + (
            "."
            if null_summaries_dir
            else " (no null model was run: findings cannot be reproduced)."
        )
    )
)


# %% tags=["remove-input"]
def badge(verdict: str) -> str:
    return (
        f'<span style="background:{COLORS[verdict]};color:white;padding:1px 6px;border-radius:3px;'
        f'white-space:nowrap">{verdict}</span>'
    )


def nulls_text(nulls) -> str:
    return (
        "<br>".join(
            f"<i>{html.escape(n.name)}</i>: {html.escape(format_value(n.value))} ({n.outcome})"
            for n in nulls
        )
        or "—"
    )


def claims_html(rows: pd.DataFrame, with_nulls: bool) -> str:
    head = [
        "verdict",
        "claim",
        "ours [95% interval]",
        *(["null"] if with_nulls else []),
        "paper",
        "test",
        "chapter",
    ]
    body = []
    for _, r in rows.iterrows():
        cells = [
            badge(r["verdict"]),
            f"<b>{r['id']}</b> {html.escape(r['claim'])}",
            html.escape(format_value(r["ours"])),
            *([nulls_text(r["nulls"])] if with_nulls else []),
            html.escape(str(r["paper value"])),
            html.escape(r["test"]),
            f'<a href="{r["chapter"]}.html" title="{html.escape(r["run with"])}">{r["chapter"]}</a>',
        ]
        body.append(
            "<tr>"
            + "".join(f'<td style="vertical-align:top">{c}</td>' for c in cells)
            + "</tr>"
        )
    widths = {"claim": "32%", "null": "20%"}
    header = "".join(
        f'<th style="width:{widths.get(h, "auto")}">{h}</th>' for h in head
    )
    return (
        f'<table style="font-size:0.85em;table-layout:auto;width:100%"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


order = {v: i for i, v in enumerate(VERDICTS)}
findings = table[table["nature"] != "identity"].sort_values(
    "verdict", key=lambda s: s.map(order), kind="stable"
)

# %% [markdown]
# ## Findings and null-controls
#
# Sorted by verdict. Hover a chapter link for the parameters it ran with; the chapter shows the measurement.

# %% tags=["remove-input"]
for paper, rows in findings.groupby("paper", sort=True):
    display(
        HTML(
            f"<h3>Paper {paper} · {papers.get(paper, paper)}</h3>"
            + claims_html(rows, with_nulls=True)
        )
    )

# %% [markdown]
# ## Checks of our own code
#
# Identities hold for any weights: they are not results of the papers but checks that our implementation
# computes what it says (a failure here is a bug, not a finding).

# %% tags=["remove-input"]
identities = table[table["nature"] == "identity"]
display(HTML(claims_html(identities, with_nulls=False)))

# %% [markdown]
# ## Not diagnostic: why the test cannot tell
#
# Each finding below passes on our model *and* on a null. The sentence in its chapter says why; the number
# beside it is the null's.

# %% tags=["remove-input"]
weak = table[table["verdict"] == "not diagnostic"]
if len(weak):
    display(HTML(claims_html(weak, with_nulls=True)))
else:
    print("none")

# %% tags=["remove-input"]
runs = table.drop_duplicates("chapter")[["chapter", "run with"]]
display(
    HTML(
        "<details><summary>Parameters of every chapter's run</summary><ul>"
        + "".join(
            f"<li><b>{c}</b>: {html.escape(p)}</li>"
            for c, p in zip(runs["chapter"], runs["run with"])
        )
        + "</ul></details>"
    )
)
record(
    {
        "claims": len(table),
        "model": model,
        "null_model": bool(null_summaries_dir),
        **{f"verdict_{v.replace(' ', '_')}": int(total.get(v, 0)) for v in VERDICTS},
    }
)
