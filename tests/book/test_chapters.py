"""Chapters that read like a paper: no function or class defined in a chapter (the analysis lives in
the library), no `print(` (numbers reach the page through glue, tables and figures), and at most 40% of a
science chapter's non-blank lines in code cells. Checked statically on the Jupytext sources."""
import re

import pytest

from lotlib.book.build import _parameters_table, book_notebooks
from lotlib.book.pipeline import project_root

from ..conftest import ROOT

CODE_SHARE = 0.40  # a bound set for any chapter, not chosen from ours


def _science_chapters() -> list[str]:
    root = project_root(ROOT)
    last = _parameters_table(root).get("run_last") or []
    return [name for name in book_notebooks(root) if name not in last]


def line_counts(text: str) -> dict[str, int]:
    """Non-blank lines in code cells and in markdown cells of a percent-format notebook, and the code lines
    that define a function or class or call print."""
    counts, kind = {"code": 0, "markdown": 0, "defs": 0, "prints": 0}, None
    for line in text.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
        elif line.strip() and kind:
            counts[kind] += 1
            if kind == "code":
                counts["defs"] += bool(re.match(r"\s*(async\s+)?(def|class)\s", line))
                counts["prints"] += line.count("print(")
    return counts


def test_line_counts_tell_code_from_prose():
    text = '# %% [markdown]\n# Prose.\n# More.\n\n# %% tags=["hide-input"]\nx = 1\n\ndef f():\n    print(x)\n'
    assert line_counts(text) == {"code": 3, "markdown": 2, "defs": 1, "prints": 1}


@pytest.mark.parametrize("name", _science_chapters())
def test_a_chapter_is_prose_with_figures(name):
    counts = line_counts((ROOT / "notebooks" / f"{name}.py").read_text())
    share = counts["code"] / (counts["code"] + counts["markdown"])
    assert counts["defs"] == 0, f"{name} defines a function or class: move it into lotlib"
    assert counts["prints"] == 0, f"{name} prints: glue the value into a sentence instead"
    assert share <= CODE_SHARE, f"{name}: {share:.1%} of its lines are code (at most {CODE_SHARE:.0%})"
