"""Run one Jupytext notebook with papermill: parameters checked, executions cached, failures loud."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import shutil
import time
from pathlib import Path

from .. import __version__
from ..models.bounds import model_shape
from ..models.corpus import walden_length
from ..models.forward_clock import FORWARD_LOG, forward_seconds
from ..models.sources import load_config, model_revision
from ..storage.atomic import write_atomic, write_text_atomic
from ..storage.checkpoints import CHECKPOINT_VARIABLE
from ..storage.paths import PROJECT_VARIABLE, project_root
from ..summary import summary_of
from .kernel import MEMORY_LOG, kernel_manager, peak_memory_gb
from .parameters import check_parameters, walden_demand
from .spec import PACKAGE, NotebookSpec, read_spec
from .zygote import FORKED_FOR, ZYGOTE_VARIABLE

KERNEL = "python3"
# seconds: several kernels importing torch at once on a few cores are slow to start
KERNEL_START_TIMEOUT = 300
# set in a run's kernel
BOOK_VARIABLE = "LOTLIB_BOOK"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


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


def model_revision_of(spec: NotebookSpec, parameters: dict) -> str | None:
    """The resolved revision of the model a run of `spec` loads (its `model` parameter; `sources.model_revision`:
    a hub commit, the sha256 of an embedded or folder model's weights), None when the notebook has no `model`."""

    if "model" not in spec.parameters:
        return None
    return model_revision(str({**spec.defaults, **parameters}["model"]))


def portable_name(path: Path, notebook: Path) -> str:
    """`path` as a key names it: relative to the folder that holds the lotlib package, or to the project of
    `notebook` (the folder above its `notebooks/`), else in full (a file outside both)."""
    path = Path(path).resolve()
    for anchor in (PACKAGE.parent, notebook.resolve().parent.parent):
        if path.is_relative_to(anchor):
            return path.relative_to(anchor).as_posix()
    return str(path)


def execution_key(
    spec: NotebookSpec,
    parameters: dict,
    revision: str | None,
    depends_on=(),
    page: list[str] | None = None,
) -> str:
    """Hash of what an execution's result depends on: the notebook, its parameters, the resolved `revision` of
    its model (`model_revision_of`: a hub model's new commit re-executes it), the lotlib modules it imports
    (transitively), any declared input files (one that does not exist yet hashes as missing) and why the run
    is a page that computes nothing (`page`, by default `page_reasons`; [] for a chapter that runs: a page decided
    by older code or another corpus is not taken for a run that now applies, nor the reverse). Files are named relative to the
    project or the installed package (`portable_name`), so a checkout moved or copied elsewhere keeps its
    executions."""

    def digest(path: Path) -> str | None:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None

    files = [*spec.dependencies, *sorted(Path(p) for p in depends_on)]
    payload = json.dumps(
        {
            "parameters": parameters,
            "model_revision": revision,
            "inputs": {portable_name(p, spec.source): digest(p) for p in files},
            "page": page_reasons(spec, parameters) if page is None else page,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def kernel_environment(
    spec: NotebookSpec, book: bool = False, threads: int | None = None, extra=None
) -> dict[str, str]:
    """The variables a run's kernel gets on top of this process's environment: the book flag, the project of
    the notebook, BLAS thread limits and `extra` (a sweep's or the book's LOTLIB_* folders)."""
    env = dict(extra or {})
    if book:
        env[BOOK_VARIABLE] = "1"
    try:
        env[PROJECT_VARIABLE] = str(project_root(spec.source.parent))
    except FileNotFoundError:  # a notebook outside any project
        pass
    if threads:
        env.update({name: str(threads) for name in THREAD_VARIABLES})
    return env


def run_notebook(
    source: str | Path | NotebookSpec,
    output: Path,
    parameters: dict | None = None,
    *,
    book: bool = False,
    progress: bool = True,
    reuse: bool = True,
    depends_on=(),
    keep_partial: bool = True,
    threads: int | None = None,
    environment: dict | None = None,
) -> Path:
    """Execute Jupytext notebook `source` (a path or its spec) with papermill `parameters` into `output`.

    Unknown names and values that do not fit their declared types or the model raise `ParameterError`
    before anything runs (`lotlib.book.parameters`). A cell that raises (or writes an error output), a
    kernel that dies, and a notebook that calls `record` but recorded nothing raise NotebookFailed naming the
    notebook; the partial notebook is kept beside `output` as `*.partial.ipynb` for inspection (removed with
    `keep_partial=False`). `reuse` skips the run when `output` holds an execution with the same key and its
    summary (`depends_on`: input files whose content joins the key). The kernel's environment gets `book`
    (part of the book), `threads` (BLAS threads) and `environment` (`kernel_environment`). The recorded
    values are written to the summary beside `output` with the notebook's name, parameters and key; the
    executed notebook opens with a note of the parameters it ran with.

    An executed notebook is reused while its source, its parameters, the lotlib source and any declared input
    files are unchanged (the key is stored in the notebook's metadata and in its summary). A run's values come
    out of the notebook itself: `record` displays them as an output of lotlib's MIME type, and the pipeline
    reads them from the executed notebook into the summary file (`lotlib.summary.summary_of`). What a kernel
    needs from its run (thread limits, the data and cache folders, whether it runs in the book, the project it
    belongs to) goes in through that kernel's environment, never through this process's `os.environ`: runs
    may share a process (threads of a Dask worker). Parameters are checked before anything heavy is imported,
    so a value of the wrong type fails at once.
    """
    spec = source if isinstance(source, NotebookSpec) else read_spec(source)
    output = Path(output).resolve()
    parameters = dict(parameters or {})
    # before heavy imports
    check_parameters(spec.parameters, parameters, spec.source.name)
    revision = model_revision_of(spec, parameters)  # once: a hub id asks the hub
    lacks = page_reasons(spec, parameters)  # once: it may cut Walden with the tokenizer
    key = execution_key(spec, parameters, revision, depends_on, lacks)
    if reuse and is_current(output, key, spec.records):
        return output
    env = {
        **kernel_environment(spec, book, threads, environment),
        CHECKPOINT_VARIABLE: str(checkpoint_folder(output, key)),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    staged = _stage(spec, output, lacks)
    executed, values, profile = _execute_logged(
        spec, staged, output, parameters, env, progress, keep_partial
    )
    ran_with = {**spec.defaults, **parameters}
    run = {"parameters": ran_with, "model_revision": revision, **profile}
    executed.metadata["lotlib"] = {"key": key, **run}
    _insert_run_note(executed, ran_with, revision)
    if values is not None:
        payload = {"notebook": spec.name, **run, "key": key, "values": values}
        text = json.dumps(payload, indent=1, sort_keys=True, default=str)
        write_text_atomic(summary_path(output), text)
    import nbformat

    write_atomic(output, lambda tmp: nbformat.write(executed, str(tmp)))
    output.with_suffix(".partial.ipynb").unlink(missing_ok=True)
    shutil.rmtree(Path(env[CHECKPOINT_VARIABLE]).parent, ignore_errors=True)
    return output


def _stage(spec: NotebookSpec, output: Path, lacks: list[str]) -> Path:
    """Write the notebook papermill executes beside `output` (`*.input.ipynb`): the source read by jupytext,
    or the page saying the chapter does not apply (`lacks`); the old summary is removed."""
    import jupytext
    import nbformat

    nb = jupytext.read(spec.source)
    if lacks:
        nb = not_applicable_notebook(nb, spec.name, lacks)
    nb.metadata["kernelspec"] = {
        "name": KERNEL,
        "display_name": "Python 3",
        "language": "python",
    }
    staged = output.with_suffix(".input.ipynb")
    summary_path(output).unlink(missing_ok=True)
    nbformat.write(nb, staged)
    return staged


def _execute_logged(
    spec: NotebookSpec,
    staged: Path,
    output: Path,
    parameters: dict,
    env: dict,
    progress: bool,
    keep_partial: bool,
) -> tuple:
    """Execute `staged` into `output`'s partial notebook with the kernel logging its forward passes and memory;
    check it (`_checked_values`). Returns the executed notebook, its recorded values (None without) and its
    profile: `{"seconds": {"total", "forward"}, "peak_memory_gb"}`."""

    partial = output.with_suffix(".partial.ipynb")
    kept = f" (partial notebook kept in {partial})" if keep_partial else ""
    forward_log, memory_log = (
        output.with_suffix(s) for s in (".forward.log", ".memory.log")
    )
    for log in (forward_log, memory_log):
        log.unlink(missing_ok=True)
    env = {**env, FORWARD_LOG: str(forward_log), MEMORY_LOG: str(memory_log)}
    # a light notebook gets a fresh kernel, not a zygote's fork (`lotlib.book.zygote`)
    if not spec.packages & FORKED_FOR:
        env[ZYGOTE_VARIABLE] = "0"
    start = time.perf_counter()
    try:
        executed = _execute(staged, partial, parameters, env, progress, spec, kept)
        values = _checked_values(executed, spec, kept)
    except BaseException:
        if not keep_partial:
            partial.unlink(missing_ok=True)
        raise
    finally:
        staged.unlink(missing_ok=True)
        forward, peak = forward_seconds(forward_log), peak_memory_gb(memory_log)
        for log in (forward_log, memory_log):
            log.unlink(missing_ok=True)
    seconds = {  # the profile: forward passes (`ModelView.run`) against the rest
        "total": round(time.perf_counter() - start, 2),
        "forward": round(forward, 2),
    }
    # the kernel's peak resident memory (`kernel.MEMORY_LOG`)
    return executed, values, {"seconds": seconds, "peak_memory_gb": peak}


def _checked_values(executed, spec: NotebookSpec, kept: str) -> dict | None:
    """The values `executed` recorded, after its checks: no error output, every quoted glue glued once, and a
    summary when the notebook records one (else NotebookFailed)."""

    _check_no_error_outputs(executed, spec.source.name, kept)
    _check_glue(executed, spec.source.name, kept)
    values = summary_of(executed)
    if values is None and spec.records:
        raise NotebookFailed(
            f"{spec.source.name}: the run recorded no values (the notebook calls "
            f"record(), which never ran){kept}"
        )
    return values


def checkpoint_folder(output: Path, key: str) -> Path:
    """Where the run of `output` with execution key `key` keeps its resumable loops' finished steps
    (`lotlib.storage.checkpoints`): `<output>.checkpoints/<key>`. A stopped run's steps stay there for the
    next run with the same key; those of other keys (the code or parameters changed since) are removed."""
    root = output.with_suffix(".checkpoints")
    if root.is_dir():
        for other in root.iterdir():
            if other.name != key[:24]:
                shutil.rmtree(other, ignore_errors=True)
    return root / key[:24]


def page_reasons(spec: NotebookSpec, parameters: dict) -> list[str]:
    """Why a run of `spec` is a page saying it does not apply, one line each: what the model lacks
    (`missing_needs`), else what Walden lacks (`corpus_shortfall`); [] when the chapter runs."""
    return missing_needs(spec, parameters) or corpus_shortfall(spec, parameters)


def missing_needs(spec: NotebookSpec, parameters: dict) -> list[str]:
    """Why the model of a run of `spec` lacks what the chapter needs (`spec.needs`, e.g. an LM head), one line
    each (`lotlib.models.view.lacking`, from the model's config: nothing is loaded); [] when it has all."""
    if not spec.needs or "model" not in spec.parameters:
        return []
    from ..models.view import LACKS, lacking

    unknown = sorted(set(spec.needs) - set(LACKS))
    if unknown:
        raise ValueError(
            f"{spec.source.name}: the header's needs {unknown} are not among {sorted(LACKS)}"
        )
    model = str({**spec.defaults, **parameters}["model"])
    lacks = lacking(load_config(model).get("model_type", ""))
    return [lacks[need] for need in spec.needs if need in lacks]


def corpus_shortfall(spec: NotebookSpec, parameters: dict) -> list[str]:
    """Why Walden is too short for a run of `spec`, in one line ([] when it is long enough): the fewest
    pseudo-sentences the run needs (`parameters.walden_demand`, from the model's width) against those
    Walden gives at the run's `n_k` with the model's tokenizer (the tokenizer alone is loaded)."""
    merged = {**spec.defaults, **parameters}
    if not isinstance(merged.get("model"), str) or "n_k" not in merged:
        return []

    model, n_k = merged["model"], merged["n_k"]
    d_model = model_shape(model).d_model
    demand = walden_demand(spec.parameters, merged, d_model)
    if demand is None:
        return []
    name, value, wanted = demand
    have = walden_tokens(model) // n_k
    if wanted <= have:
        return []
    asked = "None (all of Walden)" if value is None else repr(value)
    return [
        (
            f"Walden cuts into {have} pseudo-sentences of {n_k} tokens with {model}'s tokenizer, and {name} = "
            f"{asked} needs at least {wanted} at its width D = {d_model}: the corpus is too short for this chapter's "
            f"bases (the paper's wider models read all of Walden, fewer pilots than D); a smaller n_k or a "
            f"lower {name} would fit"
        )
    ]


@functools.lru_cache(maxsize=16)
def walden_tokens(model: str) -> int:
    """Walden's length in tokens of `model`'s tokenizer (cached for the process: a book asks once per model)."""
    from ..models.loading import load_tokenizer

    return walden_length(load_tokenizer(model))


def not_applicable_notebook(nb, name: str, lacks: list[str]):
    """The page of a chapter that does not apply to the run's model: the chapter's opening cell (less the
    paragraphs that quote the run's values: none are computed), a note saying why (`lacks`, one line each),
    its parameters cell (the run's parameters are injected as usual) and a hidden cell recording each of its
    claims as not applicable (`lotlib.verdicts.conclude_not_applicable`)."""
    import nbformat

    opening = next(c for c in nb.cells if c.cell_type == "markdown")
    paragraphs = opening.source.split("\n\n")
    opening.source = "\n\n".join(p for p in paragraphs if "{glue" not in p)
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    reason = "; ".join(lacks)
    note = nbformat.v4.new_markdown_cell(
        "```{admonition} Not applicable to this model\n:class: warning\n"
        + "\n\n".join(f"{why}." for why in lacks)
        + "\n\nWhat this chapter measures needs it, so nothing below was computed: each of its "
        "claims is recorded as not applicable, and the report lists them so.\n```"
    )
    record = nbformat.v4.new_code_cell(
        "from lotlib.verdicts import conclude_not_applicable\n\n"
        f"conclude_not_applicable({name!r}, model, {reason!r})"
    )
    record.metadata["tags"] = ["remove-input"]
    nb.cells = [opening, note, parameters, record]
    return nb


def summary_path(executed: Path) -> Path:
    """Where the summary of executed notebook `executed` (.ipynb) is written."""
    return executed.with_suffix(".summary.json")


def recorded_values(executed: Path) -> dict | None:
    """The values executed notebook `executed` recorded, read from its own outputs (None when it has none or
    cannot be read)."""
    import nbformat

    try:
        return summary_of(nbformat.read(executed, 4))
    except (OSError, ValueError):
        return None


def is_current(output: Path, key: str, records: bool) -> bool:
    """Whether `output` holds a finished execution with `key` and, when the notebook `records`, the summary
    written from it (same key)."""
    if executed_metadata(output).get("key") != key:
        return False
    return not records or (read_json(summary_path(output)) or {}).get("key") == key


def executed_metadata(executed: Path) -> dict:
    """The `lotlib` metadata of an executed notebook ({} when it is missing or unreadable)."""
    import nbformat

    try:
        return dict(nbformat.read(executed, 4).metadata.get("lotlib", {}))
    except (OSError, ValueError):
        return {}


def read_json(path: Path) -> dict | None:
    """A JSON file's content; None when it is missing or not JSON (a summary not written yet)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _execute(
    staged: Path,
    partial: Path,
    parameters: dict,
    env: dict,
    progress: bool,
    spec: NotebookSpec,
    kept: str,
):
    """papermill, with the kernel started in the output's folder (no process-wide chdir: concurrent runs
    share the process) and `env` added to its environment."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    try:
        return papermill.execute_notebook(
            str(staged),
            str(partial),
            parameters=parameters,
            kernel_name=KERNEL,
            progress_bar=progress,
            resources={"metadata": {"path": str(partial.parent)}},
            kernel_manager_class=kernel_manager(env),
            start_timeout=KERNEL_START_TIMEOUT,
        )
    except papermill.PapermillExecutionError as err:
        raise NotebookFailed(
            f"{spec.source.name}: cell {err.exec_count or '?'} raised {err.ename}: "
            f"{err.evalue}{kept}",
            details=re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(err.traceback)),
        ) from None
    except DeadKernelError as err:
        raise NotebookFailed(
            f"{spec.source.name}: the kernel died ({err}): killed, or out of memory?{kept}"
        ) from None


def _insert_run_note(nb, parameters: dict, revision: str | None) -> None:
    """A note after the title cell listing the parameters this execution used and its model's resolved
    revision (read from the run)."""
    import nbformat

    items = " · ".join(f"`{k} = {v!r}`" for k, v in parameters.items())
    note = nbformat.v4.new_markdown_cell(
        f"```{{admonition}} Run with\n:class: note\n{items}\n\n"
        f"lotlib {__version__}; {f'model revision `{revision}`; ' if revision else ''}"
        f"executed {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n```"
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


GLUE_REFERENCE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)")


def _check_glue(nb, name: str, kept: str) -> None:
    """Every value the prose quotes (`{glue:text}`key``) was glued once: a key glued twice or never fails the
    run here, with the key named, rather than the book's Sphinx build later."""
    glued = [
        out["metadata"]["scrapbook"]["name"]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "scrapbook" in out.get("metadata", {})
    ]
    twice = sorted({key for key in glued if glued.count(key) > 1})
    quoted = {
        key
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for key in GLUE_REFERENCE.findall(cell.source)
    }
    never = sorted(quoted - set(glued))
    if twice or never:
        problems = [f"glued twice: {', '.join(twice)}"] * bool(twice)
        problems += [f"quoted but never glued: {', '.join(never)}"] * bool(never)
        raise NotebookFailed(f"{name}: {'; '.join(problems)}{kept}")
