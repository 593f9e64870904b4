"""Parameter sweeps: one notebook over the cartesian product of a grid, in parallel, resumable.

Each run executes in its own folder `OUT/runs/<run id>/` (executed notebook, summary JSON, status.json).
A run whose status is `ok` (and whose notebook, parameters and lotlib code are unchanged, and whose summary
is its own) is skipped when the sweep starts again; every other run (failed, missing, interrupted) is run
again. A run that fails for any reason, its worker process killed included, is recorded as failed with its
reason, its temporary files are removed, and the others go on. Runs go to `workers` local worker processes
(a worker that dies takes only the run it was executing with it; a fresh worker takes the next), or to a
Dask cluster (`scheduler`; a task whose workers keep dying ends in `KilledWorker`, recorded as that run's
failure). The sweep always ends with `OUT/results.csv` (also when interrupted): every run's parameters,
status and summary values.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import pandas as pd
import yaml
from tqdm.auto import tqdm

from ..intervals import is_estimate
from ..models.bounds import ParameterError
from ..storage.atomic import write_text_atomic
from .parameters import check_parameters
from .pipeline import (
    code_of,
    declared_of,
    execution_key,
    is_current,
    own_summary,
    records_summary,
    run_notebook,
)

STATUS = "status.json"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class SweepError(ValueError):
    """The grid is empty, names an unknown parameter, or gives a value of the wrong type."""


def parse_values(text: str) -> list:
    """`"1,2,3"` -> [1, 2, 3]; each item parsed as YAML (numbers, true/false, null, text)."""
    return [yaml.safe_load(item.strip()) for item in text.split(",") if item.strip()]


def load_grid(
    pairs: list[tuple[str, str]] = (), grid_file: str | Path | None = None
) -> dict[str, list]:
    """Grid from a YAML file (`name: [values]`) and `-p name v1,v2` pairs (which win)."""
    grid: dict[str, list] = {}
    if grid_file is not None:
        loaded = yaml.safe_load(Path(grid_file).read_text()) or {}
        if not isinstance(loaded, dict):
            raise SweepError(
                f"{grid_file}: a grid file maps parameter names to lists of values"
            )
        grid.update({k: v if isinstance(v, list) else [v] for k, v in loaded.items()})
    grid.update({name: parse_values(text) for name, text in pairs})
    return grid


def validate_grid(
    notebook: Path, grid: dict[str, list], base: dict | None = None
) -> None:
    """Refuse an empty grid, unknown names (listing the notebook's parameters), and any run whose values do
    not fit their declared types or the model (`lotlib.book.parameters`): before the first run starts."""
    declared = declared_of(notebook)
    if not grid or any(len(v) == 0 for v in grid.values()):
        raise SweepError(
            f"empty grid: give at least one value for at least one parameter "
            f"(-p name v1,v2); {notebook.name} takes: {', '.join(declared)}"
        )
    unknown = sorted(set(grid) - set(declared))
    if unknown:
        raise SweepError(
            f"{notebook.name} has no parameter {', '.join(unknown)}; it takes: "
            + ", ".join(f"{k} (default {p.default!r})" for k, p in declared.items())
        )
    for combo in expand(grid):
        try:
            check_parameters(declared, {**(base or {}), **combo}, notebook.name)
        except ParameterError as err:
            raise SweepError(str(err)) from None


def expand(grid: dict[str, list]) -> list[dict]:
    """Cartesian product of the grid, in the order given."""
    names = list(grid)
    return [
        dict(zip(names, combo))
        for combo in itertools.product(*(grid[n] for n in names))
    ]


def run_id(parameters: dict) -> str:
    """A readable, unique folder name for one run."""
    text = "__".join(f"{k}={v}" for k, v in parameters.items())
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "-", text)[:80]
    return f"{slug}__{hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:8]}"


def execute_run(
    source: str,
    folder: str,
    parameters: dict,
    threads: int | None = None,
    environment: dict | None = None,
) -> dict:
    """Run one notebook into `folder`; never raises: the status (also written to `folder/status.json`) says
    ok or failed, with the error. `environment` (the sweep's LOTLIB_* variables) fills what a remote worker
    lacks; `threads` caps the kernel's BLAS threads. The run's context reaches its kernel through the
    notebook itself (`lotlib.book.pipeline`), so runs may share a process (the threads of a Dask worker)."""
    for key, value in (environment or {}).items():
        os.environ.setdefault(key, value)
    if (
        threads
    ):  # the kernel inherits them: parallel runs must not oversubscribe the cores
        os.environ.update({name: str(threads) for name in THREAD_VARIABLES})
    folder = Path(folder)
    try:
        run_notebook(
            Path(source),
            folder / f"{Path(source).stem}.ipynb",
            parameters,
            progress=False,
            keep_partial=False,
        )
    except Exception as err:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        details = getattr(err, "details", "") or traceback.format_exc(limit=3)
        return record_failure(
            folder, parameters, f"{type(err).__name__}: {err}", details
        )
    return _write_status(
        folder, {"run": folder.name, "parameters": parameters, "status": "ok"}
    )


def record_failure(
    folder: Path, parameters: dict, error: str, details: str = ""
) -> dict:
    """Record run `folder` as failed with `error` (and `details`: a traceback), and remove its temporary
    files (the staged and partial notebooks a dead run leaves behind)."""
    for pattern in ("*.input.ipynb", "*.partial.ipynb", ".*.tmp"):
        for path in Path(folder).glob(pattern):
            path.unlink(missing_ok=True)
    return _write_status(
        Path(folder),
        {
            "run": Path(folder).name,
            "parameters": parameters,
            "status": "failed",
            "error": error,
            "traceback": details,
        },
    )


def _write_status(folder: Path, status: dict) -> dict:
    write_text_atomic(folder / STATUS, json.dumps(status, indent=1, default=str))
    return status


def _read_status(folder: Path) -> dict | None:
    try:
        return json.loads((folder / STATUS).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _finished(folder: Path, source: Path, parameters: dict, records: bool) -> bool:
    """A run is finished when its status is ok, its notebook was executed from the current code, and its
    summary (when the notebook records one) is its own."""
    status = _read_status(folder) or {}
    return status.get("status") == "ok" and is_current(
        folder / f"{source.stem}.ipynb", execution_key(source, parameters), records
    )


def run_sweep(
    source: str | Path,
    grid: dict[str, list],
    out: str | Path,
    *,
    base: dict | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run notebook `source` over `grid` (on top of `base` parameters) into `out`; return the results table
    (also written to `out/results.csv`, whatever happens)."""
    import jupytext

    source, out = Path(source).resolve(), Path(out).resolve()
    validate_grid(source, grid, base)
    records = records_summary(code_of(jupytext.read(source)))
    runs = [{**(base or {}), **combo} for combo in expand(grid)]
    folders = {run_id(p): p for p in runs}
    todo = {
        name: p
        for name, p in folders.items()
        if not _finished(out / "runs" / name, source, p, records)
    }
    for name in todo:  # an interrupted sweep must not leave a stale status behind
        (out / "runs" / name / STATUS).unlink(missing_ok=True)
    workers = workers or min(4, os.cpu_count() or 1)
    environment = {k: v for k, v in os.environ.items() if k.startswith("LOTLIB_")}
    threads = max(1, (os.cpu_count() or 1) // workers)
    bar = tqdm(
        total=len(runs),
        initial=len(runs) - len(todo),
        desc=f"sweep {source.stem}",
        unit="run",
        disable=not progress,
    )
    counts = {"ok": len(runs) - len(todo), "failed": 0}
    args = [
        (str(source), str(out / "runs" / name), p, threads, environment)
        for name, p in todo.items()
    ]
    try:
        for status in _execute(args, workers, scheduler):
            counts[status["status"]] += 1
            bar.update()
            bar.set_postfix(counts)
            bar.write(
                f"{status['status']:6s} {status['run']}"
                + (f": {status['error']}" if "error" in status else "")
            )
    finally:
        bar.close()
        table = results_table(out, folders)
        write_text_atomic(out / "results.csv", table.to_csv(index=False))
    return table


def _execute(args: list[tuple], workers: int, scheduler: str | None):
    if not args:
        return
    yield from (_on_dask(args, scheduler) if scheduler else _locally(args, workers))


def _locally(args: list[tuple], workers: int):
    """The runs on `workers` local worker processes, one run at a time each; statuses as they finish."""
    tasks, done = queue.SimpleQueue(), queue.SimpleQueue()
    for task in args:
        tasks.put(task)
    for _ in range(min(workers, len(args))):
        threading.Thread(target=_drive, args=(tasks, done), daemon=True).start()
    for _ in args:
        yield done.get()


def _drive(tasks: queue.SimpleQueue, done: queue.SimpleQueue) -> None:
    """Feed runs to one worker process; when it dies, its run is recorded as failed and a fresh worker
    takes the next run."""
    worker = None
    while True:
        try:
            task = tasks.get_nowait()
        except queue.Empty:
            break
        if worker is None or worker.poll() is not None:
            worker = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        done.put(_ask(worker, task))
    if worker is not None:
        worker.stdin.close()
        worker.wait()


def _ask(worker: subprocess.Popen, task: tuple) -> dict:
    """Send one run to `worker` and read its status; a worker that dies meanwhile fails the run."""
    try:
        worker.stdin.write(json.dumps(task) + "\n")
        worker.stdin.flush()
        reply = worker.stdout.readline()
    except BrokenPipeError:
        reply = ""
    if reply:
        return json.loads(reply)
    code = worker.wait()
    how = (
        f"was killed by {signal.Signals(-code).name}"
        if code < 0
        else f"exited with code {code}"
    )
    _, folder, parameters, *_ = task
    return record_failure(
        Path(folder),
        parameters,
        f"WorkerDied: the worker process running this run {how}",
    )


def _serve() -> None:
    """A local worker process: each line of stdin is one run's `execute_run` arguments (JSON); each run's
    status goes back as one line on the original stdout (anything else printed goes to stderr)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        replies.write(json.dumps(execute_run(*json.loads(line)), default=str) + "\n")
        replies.flush()


def _on_dask(args: list[tuple], scheduler: str):
    """Each run as a task of the Dask cluster at `scheduler`; a task that errs (KilledWorker: its workers
    kept dying) is recorded as its run's failure."""
    from distributed import Client, as_completed as dask_completed

    with Client(scheduler) as client:
        futures = {client.submit(execute_run, *a, pure=False): a for a in args}
        for future in dask_completed(futures):
            try:
                yield future.result()
            except Exception as err:  # noqa: BLE001 - the run failed, the sweep goes on
                _, folder, parameters, *_ = futures[future]
                yield record_failure(
                    Path(folder), parameters, f"{type(err).__name__}: {err}"
                )


def _flat(values: dict) -> dict:
    """Summary values for a table: an Estimate becomes its value and the columns `<key>_lo`, `<key>_hi`."""
    out = {}
    for key, value in values.items():
        if is_estimate(value):
            out.update(
                {
                    key: value["value"],
                    f"{key}_lo": value["lo"],
                    f"{key}_hi": value["hi"],
                }
            )
        else:
            out[key] = value
    return out


def results_table(out: Path, folders: dict[str, dict]) -> pd.DataFrame:
    """One row per run: its parameters, status (and error), and, for a run that is ok, every value of its
    own summary (a summary another execution wrote is never read; an Estimate gives three columns: the
    value, `<key>_lo` and `<key>_hi`)."""
    rows = []
    for name, parameters in folders.items():
        folder = out / "runs" / name
        status = _read_status(folder) or {"status": "not run"}
        row = {
            "run": name,
            **parameters,
            "status": status["status"],
            "error": status.get("error", ""),
        }
        if status["status"] == "ok":
            for summary in folder.glob("*.summary.json"):
                own = own_summary(
                    folder / summary.name.replace(".summary.json", ".ipynb")
                )
                row.update(_flat((own or {}).get("values", {})))
        rows.append(row)
    return pd.DataFrame(rows)


if __name__ == "__main__":  # a local worker process (see _drive)
    _serve()
