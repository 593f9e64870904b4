"""Parameter sweeps: one notebook over the cartesian product of a grid, in parallel, resumable."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import threading
from pathlib import Path

import pandas as pd
import yaml
from tqdm.auto import tqdm

from ..models.bounds import ParameterError
from ..stats import is_estimate
from ..storage.atomic import write_text_atomic
from .parameters import check_parameters
from .pipeline import execution_key, is_current, model_revision_of, recorded_values
from .spec import NotebookSpec, read_spec
from .workers import DONE, Run, run_pool

STATUS = "status.json"


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
    spec: NotebookSpec, grid: dict[str, list], base: dict | None = None
) -> None:
    """Refuse an empty grid, unknown names (listing the notebook's parameters), and any run whose values do
    not fit their declared types or the model (`lotlib.book.parameters`): before the first run starts."""
    declared, notebook = spec.parameters, spec.source
    if not grid or any(len(v) == 0 for v in grid.values()):
        raise SweepError(
            f"empty grid: give at least one value for at least one parameter "
            f"(-p name v1,v2); {notebook.name} takes: {', '.join(declared)}"
        )
    for name, values in grid.items():
        repeated = [v for i, v in enumerate(values) if v in values[:i]]
        if repeated:
            raise SweepError(
                f"-p {name} {','.join(map(str, values))}: {', '.join(map(repr, dict.fromkeys(repeated)))} "
                f"given more than once; each run is one combination of values, so give each value once"
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


def _finished(folder: Path, spec: NotebookSpec, parameters: dict) -> bool:
    """A run is finished when its status is ok and its notebook was executed from the current code (with the
    summary written from it, when the notebook records one)."""
    status = _read_status(folder) or {}
    return status.get("status") == "ok" and is_current(
        folder / f"{spec.name}.ipynb",
        execution_key(spec, parameters, model_revision_of(spec, parameters)),
        spec.records,
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
    (also written to `out/results.csv`, whatever happens).

    Each run executes in its own folder `OUT/runs/<run id>/` (executed notebook, summary JSON, status.json).
    A run whose status is `ok` (and whose notebook, parameters and lotlib code are unchanged, and whose summary
    was written from its notebook) is skipped when the sweep starts again; every other run (failed, missing,
    interrupted) is run again. Runs go to the worker pool (`lotlib.book.workers`, shared with the book): `workers`
    local worker processes, or a Dask cluster (`scheduler`); a run that fails for any reason, its worker killed
    included, is recorded as failed with its reason, its temporary files are removed, and the others go on. The
    sweep always ends with `OUT/results.csv` (also when interrupted): every run's parameters, status and the
    values read from its executed notebook.
    """
    spec, out = read_spec(source), Path(out).resolve()
    validate_grid(spec, grid, base)
    runs = [{**(base or {}), **combo} for combo in expand(grid)]
    folders = {run_id(p): p for p in runs}
    try:
        _execute(spec, out, folders, workers, scheduler, progress)
    finally:  # a SIGTERM or Ctrl-C raised anywhere above still leaves the table of what is done
        with _signals_held():
            table = results_table(out, folders, spec.name)
            write_text_atomic(out / "results.csv", table.to_csv(index=False))
    return table


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM held back (delivered on leaving) while a file that must be whole is written."""
    main = threading.current_thread() is threading.main_thread()
    held = {signal.SIGINT, signal.SIGTERM}
    if main:
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        if main:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _execute(
    spec: NotebookSpec,
    out: Path,
    folders: dict[str, dict],
    workers: int | None,
    scheduler: str | None,
    progress: bool,
) -> None:
    """The runs of `folders` (run id -> parameters) that are not finished, on the worker pool, each run's
    status written as it ends."""
    todo = {
        n: p for n, p in folders.items() if not _finished(out / "runs" / n, spec, p)
    }
    for name in todo:  # an interrupted sweep must not leave a stale status behind
        (out / "runs" / name / STATUS).unlink(missing_ok=True)
    workers = workers or min(4, os.cpu_count() or 1)
    environment = {k: v for k, v in os.environ.items() if k.startswith("LOTLIB_")}
    threads = max(1, (os.cpu_count() or 1) // workers)
    pool_runs = [
        Run(
            name,
            str(spec.source),
            str(out / "runs" / name / f"{spec.name}.ipynb"),
            parameters,
            keep_partial=False,
            threads=threads,
            environment=environment,
            spec=spec,
        )
        for name, parameters in todo.items()
    ]
    bar = tqdm(
        total=len(folders),
        initial=len(folders) - len(todo),
        desc=f"sweep {spec.name}",
        unit="run",
        disable=not progress,
    )
    counts = {"ok": len(folders) - len(todo), "failed": 0}
    with bar:
        for event, run, status in run_pool(pool_runs, workers, scheduler):
            if event != DONE:
                continue
            folder = out / "runs" / run.label
            if status["status"] == "ok":
                _write_status(
                    folder,
                    {"run": run.label, "parameters": run.parameters, "status": "ok"},
                )
            else:
                error, details = status["error"], status.get("details", "")
                record_failure(folder, run.parameters, error, details)
            counts[status["status"]] += 1
            bar.update()
            bar.set_postfix(counts)
            bar.write(
                f"{status['status']:6s} {run.label}"
                + (f": {status['error']}" if "error" in status else "")
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


def sweep_summary(table: pd.DataFrame, x: str, y: str) -> tuple[dict, str]:
    """What a sweep's page records: the runs (all, ok, failed) and the mean of value `y` (numbers, see
    `lotlib.plots.sweep_values`) at each value of swept parameter `x` over the runs that are ok; and the same
    means with their standard deviations over the other swept parameters, as one line of text."""
    from ..plots import sweep_values

    counts = table["status"].value_counts()
    ok = table[table["status"] == "ok"].assign(**{y: sweep_values(table[y])})
    means, spread = ok.groupby(x)[y].mean(), ok.groupby(x)[y].std()
    values = {
        "runs": len(table),
        "runs_ok": int(counts.get("ok", 0)),
        "runs_failed": int(counts.get("failed", 0)),
        **{f"{y}_at_{x}_{k}": float(v) for k, v in means.items()},
    }
    text = ", ".join(
        f"{k}: {m:.4g} ± {s:.2g}" for k, m, s in zip(means.index, means, spread)
    )
    return values, text


def results_table(out: Path, folders: dict[str, dict], notebook: str) -> pd.DataFrame:
    """One row per run: its parameters, status (and error), and, for a run that is ok, every value its
    executed notebook recorded, read from the notebook itself (an Estimate gives three columns: the value,
    `<key>_lo` and `<key>_hi`)."""
    rows = []
    for name, parameters in folders.items():
        folder = out / "runs" / name
        status = _read_status(folder) or {"status": "not run"}
        row = {"run": name, **parameters, "status": status["status"]}
        row["error"] = status.get("error", "")
        if status["status"] == "ok":
            row.update(_flat(recorded_values(folder / f"{notebook}.ipynb") or {}))
        rows.append(row)
    return pd.DataFrame(rows)
