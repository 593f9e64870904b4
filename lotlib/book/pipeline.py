"""Run one Jupytext notebook with papermill: parameters checked, executions cached, failures loud.

An executed notebook is reused while its source, its parameters, the lotlib source and any
declared input files are unchanged (the key is stored in the notebook's metadata).

Each run learns its own context (where its summary goes, whether it runs inside the book) from a hidden
first cell that the pipeline adds to that run's notebook: the cell calls `lotlib.run_context.enter` in the
run's own kernel, so no process-wide state (an environment variable, the working directory) is shared by
concurrent runs (threads of a Dask worker, a book built in parallel). The context names the execution with a
fresh id that `record` writes into the summary; a run whose notebook calls `record` and ends without its own
summary, or with one that names another execution, is a failed run.

Parameters are checked before anything heavy is imported: a value of the wrong type fails in about a second.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
import threading
import time
import uuid
from pathlib import Path

from .. import run_context
from ..storage.atomic import write_atomic, write_text_atomic
from .parameters import Parameter, check_parameters, declared_parameters, read_declared

KERNEL = "python3"
KERNEL_START_TIMEOUT = (
    300  # seconds: several kernels importing torch at once on two cores take minutes
)
PACKAGE = Path(__file__).resolve().parents[1]  # the lotlib package folder
PARSING = (
    threading.Lock()
)  # Python 3.11's ast is not thread-safe (SystemError "AST constructor recursion depth
# mismatch", CPython gh-106905): concurrent runs in one process (a Dask worker's threads) parse one at a time
CONTEXT_TAG = "lotlib-run-context"  # the hidden first cell that gives the kernel its run's context
PARAMETERS_MARKER = re.compile(r"""^# %%.*\btags\s*=\s*\[[^\]]*["']parameters["']""")


class NotebookFailed(RuntimeError):
    """A notebook cell raised or wrote an error output, its kernel died, or its summary is missing or not its
    own. `details` holds the cell's traceback when there is one."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details


class _PapermillNoise(logging.Filter):
    """papermill cannot parse annotated parameters cells and says so for every run ("Unable to parse line",
    then "Passed unknown parameter"); `lotlib.book.parameters` checks names and types itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(
            ("Passed unknown parameter", "Unable to parse line")
        )


for _logger in ("papermill", "papermill.translators"):
    logging.getLogger(_logger).addFilter(_PapermillNoise())


def project_root(start: Path | None = None) -> Path:
    """The folder holding `book/_config.yml` and `notebooks/`: in a notebook run by the pipeline, the project
    of the notebook's source (wherever its output goes); otherwise searched upward from `start` (cwd)."""
    context = run_context.current()
    if start is None and context is not None and context.project:
        return Path(context.project)
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "book" / "_config.yml").exists() and (
            folder / "notebooks"
        ).is_dir():
            return folder
    raise FileNotFoundError(
        f"no lotlib project (book/_config.yml and notebooks/) in {here} or above; "
        f"run from the project folder"
    )


def declared_of(source: Path) -> dict[str, Parameter]:
    """The declared parameters of notebook `source`. A percent-format file's parameters cell is read directly
    (without jupytext and nbformat, whose imports take seconds: a bad value fails at once); any other
    notebook through jupytext."""
    lines = Path(source).read_text().splitlines()
    start = next(
        (i for i, line in enumerate(lines) if PARAMETERS_MARKER.match(line)), None
    )
    if start is None:
        return read_declared(Path(source))
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")),
        len(lines),
    )
    return declared_parameters("\n".join(lines[start + 1 : end]), Path(source).name)


def notebook_parameters(source: Path, nb=None) -> dict:
    """Names and default values of the `parameters` cell of a Jupytext notebook (`nb`: already read)."""
    declared = (
        read_declared(Path(source), nb) if nb is not None else declared_of(Path(source))
    )
    return {name: p.default for name, p in declared.items()}


def _imported_modules(
    code: str, module: str | None = None, is_package: bool = False
) -> set[str]:
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
                base = ".".join(
                    package[: len(package) - node.level + 1]
                    + ([node.module] if node.module else [])
                )
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
        todo |= {
            ".".join(parts[:i]) for i in range(1, len(parts))
        }  # importing a module runs its packages
        todo |= _imported_modules(path.read_text(), name, path.name == "__init__.py")
    return sorted(seen.values())


def code_of(nb) -> str:
    """The code cells of a notebook read by jupytext, as one text."""
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def notebook_dependencies(source: Path) -> list[Path]:
    """A notebook's source file and the lotlib files its code depends on."""
    import jupytext

    return [Path(source), *lotlib_dependencies(code_of(jupytext.read(source)))]


def execution_key(
    source: Path, parameters: dict, depends_on: list[Path] = (), nb=None
) -> str:
    """Hash of what an execution's result depends on: the notebook, its parameters, the lotlib modules
    it imports (transitively) and any declared input files (`nb`: the notebook, already read)."""
    import jupytext

    files = [
        *lotlib_dependencies(code_of(nb or jupytext.read(source))),
        *sorted(depends_on),
    ]
    inputs = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    payload = json.dumps(
        {
            "source": hashlib.sha256(source.read_bytes()).hexdigest(),
            "parameters": parameters,
            "inputs": inputs,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def records_summary(code: str) -> bool:
    """Whether notebook code calls `lotlib.book.summary.record` (then every run of it must write its summary)."""
    tree = ast.parse(code)
    imported = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "lotlib.book.summary"
        and any(a.name == "record" for a in n.names)
        for n in ast.walk(tree)
    )
    return imported or (
        "lotlib.book.summary" in _imported_modules(code)
        and any(
            isinstance(n, ast.Attribute) and n.attr == "record" for n in ast.walk(tree)
        )
    )


def run_notebook(
    source: Path,
    output: Path,
    parameters: dict | None = None,
    *,
    book: bool = False,
    progress: bool = True,
    reuse: bool = True,
    depends_on: list[Path] = (),
    keep_partial: bool = True,
) -> Path:
    """Execute Jupytext notebook `source` with papermill `parameters` into `output` (.ipynb).

    Unknown names and values that do not fit their declared types or the model raise `ParameterError`
    before anything runs (`lotlib.book.parameters`). A cell that raises (or writes an error output), a
    kernel that dies, and a summary that is missing (the notebook calls `record`) or names another
    execution raise NotebookFailed naming the notebook; the partial notebook is kept beside `output` as
    `*.partial.ipynb` for inspection (removed with `keep_partial=False`). `reuse` skips the run when
    `output` holds an execution with the same key and, if the notebook records one, its own summary
    (`depends_on`: input files whose content joins the key). `book` tells the run it is part of the book.
    The executed notebook opens with a generated note of the parameters it ran with.
    """
    source, output = Path(source).resolve(), Path(output).resolve()
    parameters = dict(parameters or {})
    with PARSING:
        declared = declared_of(source)
    check_parameters(
        declared, parameters, source.name
    )  # before the heavy imports below
    import jupytext
    import nbformat

    with PARSING:
        nb = jupytext.read(source)  # read once: key and execution use it
        key = execution_key(source, parameters, depends_on, nb)
        records = records_summary(code_of(nb))
    if reuse and is_current(output, key, records):
        return output
    run, summary = uuid.uuid4().hex, summary_path(output)
    nb.metadata["kernelspec"] = {
        "name": KERNEL,
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells.insert(0, _context_cell(run, summary, book, source))
    output.parent.mkdir(parents=True, exist_ok=True)
    staged, partial = (
        output.with_suffix(".input.ipynb"),
        output.with_suffix(".partial.ipynb"),
    )
    summary.unlink(missing_ok=True)
    nbformat.write(nb, staged)
    kept = f" (partial notebook kept in {partial})" if keep_partial else ""
    try:
        executed = _execute(
            staged, partial, parameters, output.parent, progress, source.name, kept
        )
        _drop_context_cell(executed)
        _check_no_error_outputs(executed, source.name, kept)
        _check_summary(summary, run, records, source.name, kept)
    except BaseException:
        if not keep_partial:
            partial.unlink(missing_ok=True)
        raise
    finally:
        staged.unlink(missing_ok=True)
    ran_with = {**{name: p.default for name, p in declared.items()}, **parameters}
    executed.metadata["lotlib"] = {"key": key, "parameters": ran_with, "run": run}
    _insert_run_note(executed, ran_with)
    if summary.exists():
        payload = {
            **json.loads(summary.read_text()),
            "notebook": source.stem,
            "parameters": ran_with,
        }
        write_text_atomic(
            summary, json.dumps(payload, indent=1, sort_keys=True, default=str)
        )
    write_atomic(output, lambda tmp: nbformat.write(executed, str(tmp)))
    partial.unlink(missing_ok=True)
    return output


def summary_path(executed: Path) -> Path:
    """Where the summary of executed notebook `executed` (.ipynb) is written."""
    return executed.with_suffix(".summary.json")


def own_summary(executed: Path) -> dict | None:
    """The summary beside executed notebook `executed` if that execution wrote it (the summary's `run` is the
    one the notebook's metadata records), else None: missing, or another run's."""
    run = _metadata(executed).get("run")
    summary = _read_json(summary_path(executed))
    return (
        summary
        if run is not None and summary is not None and summary.get("run") == run
        else None
    )


def is_current(output: Path, key: str, records: bool) -> bool:
    """Whether `output` holds a finished execution with `key` and, when the notebook `records` a summary,
    its own summary beside it."""
    return _metadata(output).get("key") == key and (
        not records or own_summary(output) is not None
    )


def _metadata(executed: Path) -> dict:
    """The `lotlib` metadata of an executed notebook ({} when it is missing or unreadable)."""
    import nbformat

    try:
        return dict(nbformat.read(executed, 4).metadata.get("lotlib", {}))
    except (OSError, ValueError):
        return {}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _context_cell(run: str, summary: Path, book: bool, source: Path):
    """The hidden first cell: it gives this run's kernel its context (binding no name in the notebook)."""
    import nbformat

    try:
        project = str(project_root(source.parent))
    except FileNotFoundError:  # a notebook outside any project
        project = None
    cell = nbformat.v4.new_code_cell(
        f'__import__("lotlib.run_context", fromlist=["enter"]).enter({run!r}, {str(summary)!r}, book={book!r}, '
        f"project={project!r})"
    )
    cell.metadata["tags"] = ["remove-cell", CONTEXT_TAG]
    return cell


def _drop_context_cell(nb) -> None:
    """Remove the context cell from an executed notebook and number the other executions from 1 again."""
    nb.cells = [c for c in nb.cells if CONTEXT_TAG not in c.metadata.get("tags", [])]
    for cell in nb.cells:
        for item in (cell, *cell.get("outputs", [])):
            if item.get("execution_count"):
                item["execution_count"] -= 1


def _execute(
    staged: Path,
    partial: Path,
    parameters: dict,
    folder: Path,
    progress: bool,
    name: str,
    kept: str,
):
    """papermill, with the kernel started in `folder` (no process-wide chdir: concurrent runs share the process)."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    from .kernel import LocalKernelManager

    try:
        return papermill.execute_notebook(
            str(staged),
            str(partial),
            parameters=parameters,
            kernel_name=KERNEL,
            progress_bar=progress,
            resources={"metadata": {"path": str(folder)}},
            kernel_manager_class=LocalKernelManager,
            start_timeout=KERNEL_START_TIMEOUT,
        )
    except papermill.PapermillExecutionError as err:
        cell = (
            err.exec_count - 1 if err.exec_count else "?"
        )  # the hidden context cell ran first
        raise NotebookFailed(
            f"{name}: cell {cell} raised {err.ename}: {err.evalue}{kept}",
            details=re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(err.traceback)),
        ) from None
    except DeadKernelError as err:
        raise NotebookFailed(
            f"{name}: the kernel died ({err}): killed, or out of memory?{kept}"
        ) from None


def _check_summary(
    summary: Path, run: str, records: bool, name: str, kept: str
) -> None:
    written = _read_json(summary)
    if written is None and records:
        raise NotebookFailed(
            f"{name}: the run ended without writing its summary {summary.name} (the notebook "
            f"calls record(), which never ran or could not write){kept}"
        )
    if written is not None and written.get("run") != run:
        summary.unlink(missing_ok=True)
        raise NotebookFailed(
            f"{name}: the summary {summary} was written by another run ({written.get('run')!r}, "
            f"not this run's {run!r}); it was removed{kept}"
        )


def _insert_run_note(nb, parameters: dict) -> None:
    """A note after the title cell listing the parameters this execution used (read from the run)."""
    import nbformat

    from .. import __version__

    items = " · ".join(f"`{k} = {v!r}`" for k, v in parameters.items())
    note = nbformat.v4.new_markdown_cell(
        f"```{{admonition}} Run with\n:class: note\n{items}\n\n"
        f"lotlib {__version__}; executed {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n```"
    )
    note.metadata["tags"] = ["lotlib-run-note"]
    for cell in nb.cells:  # papermill's injected cell repeats what the note says
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.metadata["tags"] = [*cell.metadata["tags"], "remove-cell"]
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
    nb.cells.insert(first + 1, note)


def _check_no_error_outputs(nb, name: str, kept: str) -> None:
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                raise NotebookFailed(
                    f"{name}: cell {index} wrote an error output "
                    f"{out.get('ename')}: {out.get('evalue')}{kept}"
                )
