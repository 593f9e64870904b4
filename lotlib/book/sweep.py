"""Parameter sweeps: one notebook over the cartesian product of a grid, in parallel, resumable.

Each run executes in its own folder `OUT/runs/<run id>/` (executed notebook, summary JSON, status.json).
A run whose status is `ok` (and whose notebook, parameters and lotlib code are unchanged) is skipped
when the sweep starts again; a failed run records its error and does not stop the others. Runs go to
local worker processes, or to a Dask cluster (`scheduler`). The sweep ends with `OUT/results.csv`: every run's parameters, status and summary values.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import nbformat
import pandas as pd
import yaml
from tqdm.auto import tqdm

from ..storage.atomic import write_text_atomic
from ..models.bounds import ParameterError
from .parameters import check_parameters, read_declared
from .pipeline import execution_key, run_notebook


class SweepError(ValueError):
    """The grid is empty, names an unknown parameter, or gives a value of the wrong type."""


def parse_values(text: str) -> list:
    """`"1,2,3"` -> [1, 2, 3]; each item parsed as YAML (numbers, true/false, null, text)."""
    return [yaml.safe_load(item.strip()) for item in text.split(",") if item.strip()]


def load_grid(pairs: list[tuple[str, str]] = (), grid_file: str | Path | None = None) -> dict[str, list]:
    """Grid from a YAML file (`name: [values]`) and `-p name v1,v2` pairs (which win)."""
    grid: dict[str, list] = {}
    if grid_file is not None:
        loaded = yaml.safe_load(Path(grid_file).read_text()) or {}
        if not isinstance(loaded, dict):
            raise SweepError(f"{grid_file}: a grid file maps parameter names to lists of values")
        grid.update({k: v if isinstance(v, list) else [v] for k, v in loaded.items()})
    grid.update({name: parse_values(text) for name, text in pairs})
    return grid


def validate_grid(notebook: Path, grid: dict[str, list], base: dict | None = None) -> None:
    """Refuse an empty grid, unknown names (listing the notebook's parameters), and any run whose values do
    not fit their declared types or the model (`lotlib.book.parameters`): before the first run starts."""
    declared = read_declared(notebook)
    if not grid or any(len(v) == 0 for v in grid.values()):
        raise SweepError(f"empty grid: give at least one value for at least one parameter "
                         f"(-p name v1,v2); {notebook.name} takes: {', '.join(declared)}")
    unknown = sorted(set(grid) - set(declared))
    if unknown:
        raise SweepError(f"{notebook.name} has no parameter {', '.join(unknown)}; it takes: "
                         + ", ".join(f"{k} (default {p.default!r})" for k, p in declared.items()))
    for combo in expand(grid):
        try:
            check_parameters(declared, {**(base or {}), **combo}, notebook.name)
        except ParameterError as err:
            raise SweepError(str(err)) from None


def expand(grid: dict[str, list]) -> list[dict]:
    """Cartesian product of the grid, in the order given."""
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


def run_id(parameters: dict) -> str:
    """A readable, unique folder name for one run."""
    text = "__".join(f"{k}={v}" for k, v in parameters.items())
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "-", text)[:80]
    return f"{slug}__{hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:8]}"


def execute_run(source: str, folder: str, parameters: dict, threads: int | None = None,
                environment: dict | None = None) -> dict:
    """Run one notebook into `folder`; never raises: the status says ok or failed (with the error)."""
    for key, value in (environment or {}).items():
        os.environ.setdefault(key, value)
    if threads:  # the kernel inherits them: parallel runs must not oversubscribe the cores
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(threads)
    folder = Path(folder)
    status = {"run": folder.name, "parameters": parameters}
    try:
        run_notebook(Path(source), folder / f"{Path(source).stem}.ipynb", parameters, progress=False)
        status["status"] = "ok"
    except Exception as err:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        status.update(status="failed", error=f"{type(err).__name__}: {err}",
                      traceback=traceback.format_exc(limit=3))
    write_text_atomic(folder / "status.json", json.dumps(status, indent=1, default=str))
    return status


def _finished(folder: Path, source: Path, parameters: dict) -> bool:
    """A run is finished when its status is ok and its notebook was executed from the current code."""
    try:
        status = json.loads((folder / "status.json").read_text())["status"]
        executed = nbformat.read(folder / f"{source.stem}.ipynb", 4)
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return False
    return status == "ok" and executed.metadata.get("lotlib", {}).get("key") == execution_key(source, parameters)


def run_sweep(source: str | Path, grid: dict[str, list], out: str | Path, *, base: dict | None = None,
              workers: int | None = None, scheduler: str | None = None, progress: bool = True) -> pd.DataFrame:
    """Run notebook `source` over `grid` (on top of `base` parameters) into `out`; return the results table."""
    source, out = Path(source).resolve(), Path(out).resolve()
    validate_grid(source, grid, base)
    runs = [{**(base or {}), **combo} for combo in expand(grid)]
    folders = {run_id(p): p for p in runs}
    todo = {name: p for name, p in folders.items() if not _finished(out / "runs" / name, source, p)}
    workers = workers or min(4, os.cpu_count() or 1)
    environment = {k: v for k, v in os.environ.items() if k.startswith("LOTLIB_")}
    threads = max(1, (os.cpu_count() or 1) // workers)
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc=f"sweep {source.stem}", unit="run",
               disable=not progress)
    counts = {"ok": len(runs) - len(todo), "failed": 0}
    args = [(str(source), str(out / "runs" / name), p, threads, environment) for name, p in todo.items()]
    for status in _execute(args, workers, scheduler):
        counts[status["status"]] += 1
        bar.update()
        bar.set_postfix(counts)
        bar.write(f"{status['status']:6s} {status['run']}" + (f": {status['error']}" if "error" in status else ""))
    bar.close()
    table = results_table(out, folders)
    write_text_atomic(out / "results.csv", table.to_csv(index=False))
    return table


def _execute(args: list[tuple], workers: int, scheduler: str | None):
    if not args:
        return
    if scheduler:
        from distributed import Client, as_completed as dask_completed

        with Client(scheduler) as client:
            futures = [client.submit(execute_run, *a, pure=False) for a in args]
            for future in dask_completed(futures):
                yield future.result()
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        for future in as_completed([pool.submit(execute_run, *a) for a in args]):
            yield future.result()


def results_table(out: Path, folders: dict[str, dict]) -> pd.DataFrame:
    """One row per run: its parameters, status (and error), and every value of its summary."""
    rows = []
    for name, parameters in folders.items():
        folder = out / "runs" / name
        row = {"run": name, **parameters}
        try:
            status = json.loads((folder / "status.json").read_text())
            row.update(status=status["status"], error=status.get("error", ""))
        except FileNotFoundError:
            row.update(status="not run", error="")
        summaries = list(folder.glob("*.summary.json"))
        if summaries:
            row.update(json.loads(summaries[0].read_text()).get("values", {}))
        rows.append(row)
    return pd.DataFrame(rows)
