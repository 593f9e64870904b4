"""Notebook pipeline: Jupytext `.py` -> papermill execution -> Jupyter Book 1 (Sphinx) HTML.

Executions are cached: an executed notebook is reused while its source, its parameters and the
lotlib source are unchanged (the key is stored in the notebook's metadata).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import jupytext
import nbformat
import papermill
import yaml

from .atomic import write_atomic, write_text_atomic
from .plots import BOOK_ENV
from .summary import SUMMARY_ENV, read_summary

KERNEL = "python3"


class NotebookFailed(RuntimeError):
    """A notebook cell raised or wrote an error output."""


def project_root(start: Path | None = None) -> Path:
    """The folder holding `book/_config.yml` and `notebooks/`, searched upward from `start` (cwd)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "book" / "_config.yml").exists() and (folder / "notebooks").is_dir():
            return folder
    raise FileNotFoundError(f"no lotlib project (book/_config.yml and notebooks/) in {here} or above; "
                            f"run from the project folder")


def notebook_parameters(source: Path) -> dict:
    """Names and default values of the `parameters` cell of a Jupytext notebook."""
    nb = jupytext.read(source)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise NotebookFailed(f"{source} has no cell tagged 'parameters'")
    scope: dict = {}
    exec(cells[0].source, scope)  # the parameters cell holds plain assignments of literals
    return {k: v for k, v in scope.items() if not k.startswith("__")}


def _lotlib_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def execution_key(source: Path, parameters: dict) -> str:
    payload = json.dumps({"source": hashlib.sha256(source.read_bytes()).hexdigest(), "parameters": parameters,
                          "lotlib": _lotlib_fingerprint()}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def run_notebook(source: Path, output: Path, parameters: dict | None = None, *, book: bool = False,
                 progress: bool = True, reuse: bool = True) -> Path:
    """Execute Jupytext notebook `source` with papermill `parameters` into `output` (.ipynb).

    Unknown parameter names raise before anything runs. A cell that raises (or writes an error
    output) raises NotebookFailed naming the notebook and cell; the partial notebook is kept
    beside `output` as `*.partial.ipynb` for inspection. `reuse` skips the run when `output`
    holds an execution with the same key.
    """
    source, output = Path(source), Path(output)
    parameters = dict(parameters or {})
    known = notebook_parameters(source)
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise NotebookFailed(f"{source.name}: unknown parameter(s) {', '.join(unknown)}; "
                             f"the notebook takes: {', '.join(known)}")
    key = execution_key(source, parameters)
    if reuse and output.exists() and nbformat.read(output, 4).metadata.get("lotlib", {}).get("key") == key:
        return output
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    output.parent.mkdir(parents=True, exist_ok=True)
    staged = output.with_suffix(".input.ipynb")
    nbformat.write(nb, staged)
    partial = output.with_suffix(".partial.ipynb")
    summary = summary_path(output)
    summary.unlink(missing_ok=True)
    environment = {SUMMARY_ENV: str(summary), **({BOOK_ENV: "1"} if book else {})}
    try:
        with _environment(environment):
            executed = papermill.execute_notebook(str(staged), str(partial), parameters=parameters,
                                                  kernel_name=KERNEL, cwd=str(output.parent),
                                                  progress_bar=progress)
    except papermill.PapermillExecutionError as err:
        raise NotebookFailed(f"{source.name}: cell {err.exec_count} raised {err.ename}: {err.evalue} "
                             f"(partial notebook kept in {partial})") from None
    finally:
        staged.unlink(missing_ok=True)
    _check_no_error_outputs(executed, source, partial)
    ran_with = {**known, **parameters}
    executed.metadata["lotlib"] = {"key": key, "parameters": ran_with}
    if summary.exists():
        payload = {**read_summary(summary), "notebook": source.stem, "parameters": ran_with}
        write_text_atomic(summary, json.dumps(payload, indent=1, sort_keys=True, default=str))
    write_atomic(output, lambda tmp: nbformat.write(executed, str(tmp)))
    partial.unlink(missing_ok=True)
    return output


def summary_path(executed: Path) -> Path:
    """Where the summary of executed notebook `executed` (.ipynb) is written."""
    return executed.with_suffix(".summary.json")


@contextmanager
def _environment(values: dict[str, str]):
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_no_error_outputs(nb, source: Path, kept: Path) -> None:
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                raise NotebookFailed(f"{source.name}: cell {index} wrote an error output "
                                     f"{out.get('ename')}: {out.get('evalue')} (see {kept})")


# ----------------------------------------------------------------------------------------------
# the book


def book_notebooks(root: Path) -> list[str]:
    """Names of the notebooks the book's table of contents lists (`notebooks/<name>` entries)."""
    toc = yaml.safe_load((root / "book" / "_toc.yml").read_text())
    names: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            entry = node.get("file", "")
            if entry.startswith("notebooks/"):
                names.append(entry.split("/", 1)[1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return names


def book_parameters(root: Path, name: str, quick: bool) -> dict:
    """Parameters of notebook `name` in the book (`book/parameters.yml`: `book:` and `quick:`)."""
    table = yaml.safe_load((root / "book" / "parameters.yml").read_text()) or {}
    params = dict((table.get("book") or {}).get(name) or {})
    if quick:
        params.update((table.get("quick") or {}).get(name) or {})
    return params


def build_book(root: Path, quick: bool = False, progress: bool = True) -> Path:
    """Execute every chapter notebook, then build the HTML book strictly. Returns the HTML folder."""
    stage = root / "build" / ("book-quick" if quick else "book")
    shutil.copytree(root / "book", stage, dirs_exist_ok=True)
    static = stage / "_static"
    static.mkdir(exist_ok=True)
    shutil.copy(Path(__import__("plotly").__file__).parent / "package_data" / "plotly.min.js", static)
    for name in book_notebooks(root):
        print(f"[lotlib book] {name}", flush=True)
        run_notebook(root / "notebooks" / f"{name}.py", stage / "notebooks" / f"{name}.ipynb",
                     book_parameters(root, name, quick), book=True, progress=progress)
    jb = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run([str(jb), "build", str(stage), "--warningiserror", "--nitpick", "--keep-going"])
    if result.returncode != 0:
        raise NotebookFailed(f"jupyter-book build of {stage} failed (exit {result.returncode}); see the log above")
    return stage / "_build" / "html"
