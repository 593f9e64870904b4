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

from ..run_context import BOOK_ENV, SUMMARY_ENV
from ..storage.atomic import write_atomic, write_text_atomic
from .parameters import check_parameters, read_declared
from .summary import read_summary

KERNEL = "python3"
PACKAGE = Path(__file__).resolve().parents[1]  # the lotlib package folder


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
    return {name: p.default for name, p in read_declared(Path(source), nb).items()}


def _imported_modules(code: str, module: str | None = None, is_package: bool = False) -> set[str]:
    """Dotted names of the lotlib modules that `code` imports: `module` names the code's own module (for
    relative imports; None for a notebook). A name may be a package attribute rather than a module;
    `lotlib_dependencies` keeps those that are files. `import lotlib` brings every lazily exported module."""
    from .. import _EXPORTS

    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "lotlib":
                    found |= {"lotlib", *(f"lotlib.{m}" for m in _EXPORTS.values())}
                elif alias.name.startswith("lotlib."):
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if module is None:
                    continue
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != "lotlib":
                continue
            found.add(base)
            for alias in node.names:
                found.add(f"{base}.{alias.name}")
                if base == "lotlib" and alias.name in _EXPORTS:
                    found.add(f"lotlib.{_EXPORTS[alias.name]}")
    return found


def _module_file(name: str) -> Path | None:
    """lotlib.models.view -> .../lotlib/models/view.py (a package -> its __init__.py); None if not a file."""
    base = PACKAGE.parent.joinpath(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return base / "__init__.py" if (base / "__init__.py").is_file() else None


def lotlib_dependencies(code: str) -> list[Path]:
    """The lotlib source files `code` depends on: the modules it imports, the packages that hold them, and
    what those import, transitively."""
    todo, seen = _imported_modules(code), {}
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo |= {".".join(parts[:i]) for i in range(1, len(parts))}  # importing a module runs its packages
        todo |= _imported_modules(path.read_text(), name, path.name == "__init__.py")
    return sorted(seen.values())


def notebook_dependencies(source: Path) -> list[Path]:
    """A notebook's source file and the lotlib files its code depends on."""
    code = "\n".join(c.source for c in jupytext.read(source).cells if c.cell_type == "code")
    return [Path(source), *lotlib_dependencies(code)]


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

    Unknown names and values that do not fit their declared types or the model raise `ParameterError`
    before anything runs (`lotlib.book.parameters`). A cell that raises (or writes an error
    output) raises NotebookFailed naming the notebook and cell; the partial notebook is kept
    beside `output` as `*.partial.ipynb` for inspection. `reuse` skips the run when `output`
    holds an execution with the same key (`depends_on`: input files whose content joins the key).
    The executed notebook opens with a generated note of the parameters it ran with.
    """
    source, output = Path(source).resolve(), Path(output).resolve()  # papermill runs in output's folder
    parameters = dict(parameters or {})
    nb = jupytext.read(source)  # read once: parameters, key and execution all use it
    declared = read_declared(source, nb)
    check_parameters(declared, parameters, source.name)
    known = {name: p.default for name, p in declared.items()}
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
    from .. import __version__

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
