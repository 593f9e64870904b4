"""What `lotlib book` runs: every chapter on the book's model with its device and dtype, the chapters with
findings on the null model, the report and atlas last with the summaries they read in their keys; a chapter
that runs another notebook re-executes when that notebook changes."""
from pathlib import Path

import pytest

from lotlib.book.build import (book_folder, chapters_with_findings, execute_chapters, model_slug, null_model,
                               plan_book)
from lotlib.book.pipeline import project_root

from ..conftest import ROOT


def test_a_book_per_model_with_its_null(tmp_path):
    root = project_root(ROOT)
    first, later = plan_book(root, quick=True, model="gemma3-270m", device="cpu", dtype="bfloat16")
    books = {c.book for c in first}
    assert books == {"gemma3-270m", "untrained:gemma3-270m"}
    mine = {c.name: c for c in first if c.book == "gemma3-270m"}
    assert mine["a4_a5_noun_probes"].parameters["model"] == "gemma3-270m"
    assert mine["a4_a5_noun_probes"].parameters["dtype"] == "bfloat16"
    assert mine["a4_a5_noun_probes"].output.parent == book_folder(root, "gemma3-270m", True) / "notebooks"
    nulls = {c.name for c in first if c.book != "gemma3-270m"}
    assert nulls == chapters_with_findings(root) - {c.name for c in later}
    report = next(c for c in later if c.name == "report")
    assert report.parameters["null_summaries_dir"] == "../../untrained-gemma3-270m/notebooks"
    assert null_model("untrained:gpt2") is None and null_model("gpt2") == "untrained:gpt2"
    assert model_slug("meta-llama/Llama-3.2-1B") == "meta-llama--Llama-3.2-1B"
    assert model_slug(str(tmp_path)).startswith(tmp_path.name + "-")
    without = plan_book(root, quick=True, model="gemma3-270m", null=False)[0]
    assert {c.book for c in without} == {"gemma3-270m"}


SWEEPER = '''# %% [markdown]
# A page that runs another notebook.

# %% tags=["parameters"]
chapter: str = "swept"  # the notebook it runs

# %%
print("runs", chapter)
'''
SWEPT = '''# %% tags=["parameters"]
n: int = 1

# %%
print(n)
'''


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "book" / "claims").mkdir(parents=True)
    (tmp_path / "book" / "_config.yml").write_text("title: test\n")
    (tmp_path / "book" / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/sweeper\n")
    (tmp_path / "book" / "parameters.yml").write_text("book:\n  sweeper: {}\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "sweeper.py").write_text(SWEEPER)
    (tmp_path / "notebooks" / "swept.py").write_text(SWEPT)
    return tmp_path


@pytest.mark.slow
def test_the_sweeps_page_re_executes_when_the_swept_notebook_changes(project):
    said = []

    def run() -> str:
        said.clear()
        first, _ = plan_book(project, quick=False, model="smollm2-135m", null=False)
        execute_chapters(first, jobs=1, say=said.append)
        return next(line for line in said if "done in" in line)

    assert "(cached)" not in run()
    assert "(cached)" in run()  # nothing changed
    (project / "notebooks" / "swept.py").write_text(SWEPT.replace("n: int = 1", "n: int = 2"))
    assert "(cached)" not in run()  # the swept notebook changed: the page runs again
