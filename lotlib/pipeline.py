"""Run one Jupytext notebook with papermill: parameters checked, executions cached, failures loud.

An executed notebook is reused while its source, its parameters, the lotlib source and any
declared input files are unchanged (the key is stored in the notebook's metadata).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import jupytext
import nbformat
import papermill

from .atomic import write_atomic, write_text_atomic
from .paths import BOOK_ENV
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


def notebook_parameters(source: Path, nb=None) -> dict:
    """Names and default values of the `parameters` cell of a Jupytext notebook (`nb`: already read)."""
    nb = nb or jupytext.read(source)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise NotebookFailed(f"{source} has no cell tagged 'parameters'")
    scope: dict = {}
    exec(cells[0].source, scope)  # the parameters cell holds plain assignments of literals
    return {k: v for k, v in scope.items() if not k.startswith("__")}


def _imported_lotlib_modules(code: str, package_relative: bool) -> set[str]:
    """Names of lotlib modules that `code` imports (`__init__` for the package itself)."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".", 1)[1] if "." in a.name else "__init__"
                      for a in node.names if a.name.split(".")[0] == "lotlib"}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if package_relative and node.level == 1:
                names = [module] if module else [a.name for a in node.names]
            elif node.level == 0 and module.split(".")[0] == "lotlib":
                names = [module.split(".", 1)[1]] if "." in module else ["__init__"] + [a.name for a in node.names]
            else:
                continue
            found |= set(names)
    return found


def lotlib_dependencies(code: str) -> list[Path]:
    """The lotlib source files `code` depends on: what it imports, and what those import, transitively."""
    package = Path(__file__).parent
    todo, seen = _imported_lotlib_modules(code, package_relative=False), set()
    while todo:
        name = todo.pop()
        path = package / f"{name}.py"
        if name in seen or not path.exists():
            continue
        seen.add(name)
        todo |= _imported_lotlib_modules(path.read_text(), package_relative=True)
        if name == "__init__":  # the package's lazily loaded public names
            from . import _EXPORTS

            todo |= set(_EXPORTS.values())
    return sorted(package / f"{name}.py" for name in seen)


def execution_key(source: Path, parameters: dict, depends_on: list[Path] = (), nb=None) -> str:
    """Hash of what an execution's result depends on: the notebook, its parameters, the lotlib modules
    it imports (transitively) and any declared input files (`nb`: the notebook, already read)."""
    code = "\n".join(c.source for c in (nb or jupytext.read(source)).cells if c.cell_type == "code")
    files = [*lotlib_dependencies(code), *sorted(depends_on)]
    inputs = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    payload = json.dumps({"source": hashlib.sha256(source.read_bytes()).hexdigest(), "parameters": parameters,
                          "inputs": inputs}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def run_notebook(source: Path, output: Path, parameters: dict | None = None, *, book: bool = False,
                 progress: bool = True, reuse: bool = True, depends_on: list[Path] = ()) -> Path:
    """Execute Jupytext notebook `source` with papermill `parameters` into `output` (.ipynb).

    Unknown parameter names raise before anything runs. A cell that raises (or writes an error
    output) raises NotebookFailed naming the notebook and cell; the partial notebook is kept
    beside `output` as `*.partial.ipynb` for inspection. `reuse` skips the run when `output`
    holds an execution with the same key (`depends_on`: input files whose content joins the key).
    The executed notebook opens with a generated note of the parameters it ran with.
    """
    source, output = Path(source).resolve(), Path(output).resolve()  # papermill runs in output's folder
    parameters = dict(parameters or {})
    nb = jupytext.read(source)  # read once: parameters, key and execution all use it
    known = notebook_parameters(source, nb)
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise NotebookFailed(f"{source.name}: unknown parameter(s) {', '.join(unknown)}; "
                             f"the notebook takes: {', '.join(known)}")
    key = execution_key(source, parameters, depends_on, nb)
    if reuse and output.exists() and nbformat.read(output, 4).metadata.get("lotlib", {}).get("key") == key:
        return output
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
    _insert_run_note(executed, ran_with)
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


def _insert_run_note(nb, parameters: dict) -> None:
    """A note after the title cell listing the parameters this execution used (read from the run)."""
    from . import __version__

    items = " · ".join(f"`{k} = {v!r}`" for k, v in parameters.items())
    note = nbformat.v4.new_markdown_cell(
        f"```{{admonition}} Run with\n:class: note\n{items}\n\n"
        f"lotlib {__version__}; executed {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n```")
    note.metadata["tags"] = ["lotlib-run-note"]
    for cell in nb.cells:  # papermill's injected cell repeats what the note says
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.metadata["tags"] = [*cell.metadata["tags"], "remove-cell"]
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
    nb.cells.insert(first + 1, note)


def _check_no_error_outputs(nb, source: Path, kept: Path) -> None:
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                raise NotebookFailed(f"{source.name}: cell {index} wrote an error output "
                                     f"{out.get('ename')}: {out.get('evalue')} (see {kept})")
