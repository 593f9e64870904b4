"""One crash-tolerant pool that runs notebooks for both the book (its chapters) and sweeps (their runs)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .pipeline import executed_metadata, run_notebook
from .spec import NotebookSpec, read_spec

STARTED, DONE, WAITING = "started", "done", "waiting"
# Seconds the pool's loop waits at most between looks at pending signals. Python runs signal handlers in the
# main thread only; a SIGINT the kernel hands to a worker-driving thread would otherwise wait for the
# heartbeat (60 s in the book) before it stops the build.
SIGNAL_LATENCY = 0.5
WORKER_GRACE = 10.0  # seconds a worker has to end by itself before it is signalled
# What running a notebook imports. Importing them parses Python (attrs and `inspect.signature` build ASTs),
# and building Python AST objects in two threads of one process at once is not safe in CPython 3.11 and 3.12
# (SystemError "AST constructor recursion depth mismatch"): a Dask worker imports them once, in one thread,
# before its threads run anything of ours (`_imports_first`).
RUN_MODULES = (
    "lotlib.book.pipeline",
    "lotlib.book.kernel",
    "lotlib.summary",
    "jupytext",
    "nbformat",
    "papermill",
    "nbclient.exceptions",
    "lotlib.models.sources",
    "lotlib.models.view",
    "lotlib.models.bounds",
    "lotlib.models.corpus",
    "lotlib.models.loading",
)


@dataclass(frozen=True)
class Run:
    """One notebook execution: `label` names it in progress lines and statuses; `spec`, when given, is the
    resolved spec of `source` (`NotebookSpec.resolved`), used instead of reading `source` again."""

    label: str
    source: str
    output: str
    parameters: dict
    book: bool = False
    depends_on: tuple[str, ...] = ()
    keep_partial: bool = True
    threads: int | None = None
    environment: dict = field(default_factory=dict)
    spec: NotebookSpec | None = field(default=None, repr=False, compare=False)


def execute(run: Run) -> dict:
    """Execute `run`; never raises. Returns its status: `{"label", "status": "ok" | "failed", "seconds",
    "reused"}`, with `"error"` and `"details"` (the traceback) when it failed and `"profile"` (seconds in
    all and in forward passes, from the kernel) when it ran."""

    output = Path(run.output)
    before = output.stat().st_mtime_ns if output.exists() else None
    start = time.perf_counter()
    status = {"label": run.label, "status": "ok"}
    try:
        run_notebook(
            run.spec or run.source,
            output,
            run.parameters,
            book=run.book,
            progress=False,
            depends_on=[Path(p) for p in run.depends_on],
            keep_partial=run.keep_partial,
            threads=run.threads,
            environment=run.environment,
        )
    except Exception as err:  # noqa: BLE001 - a failed run is reported, the others go on
        details = getattr(err, "details", "") or traceback.format_exc(limit=3)
        status.update(
            status="failed", error=f"{type(err).__name__}: {err}", details=details
        )
    reused = (
        before is not None and output.exists() and output.stat().st_mtime_ns == before
    )
    if status["status"] == "ok" and not reused:
        status["profile"] = _profile(output)
    return {**status, "seconds": time.perf_counter() - start, "reused": reused}


def _profile(output: Path) -> dict:
    """The executed notebook's profile: its seconds (`{"total", "forward"}`) and its kernel's peak memory
    (`"peak_memory_gb"`, when recorded), as the pipeline kept them; {} when unreadable."""

    metadata = executed_metadata(output)
    peak = metadata.get("peak_memory_gb")
    return {**metadata.get("seconds", {}), **({"peak_memory_gb": peak} if peak else {})}


def died(run: Run, how: str) -> dict:
    """The status of a run whose worker died: failed, with how."""
    error = f"WorkerDied: the worker process running this run {how}"
    return {"label": run.label, "status": "failed", "error": error, "seconds": 0.0}


def run_pool(
    runs: list[Run],
    workers: int,
    scheduler: str | None = None,
    heartbeat: float | None = None,
) -> Iterator[tuple[str, Run | None, dict | None]]:
    """Execute `runs` on `workers` local processes (or the Dask cluster at `scheduler`); yield
    `(STARTED, run, None)`, `(DONE, run, status)` and, when nothing finished for `heartbeat` seconds,
    `(WAITING, None, None)`.

    A `Run` is one notebook execution (`lotlib.book.pipeline.run_notebook`). `run_pool` hands runs to `workers`
    local worker processes, one run at a time each, or to the Dask cluster at `scheduler`, and yields what happens
    as it happens: a run started, a run done (its status: ok, or failed with the error), or nothing finished for
    `heartbeat` seconds. A worker process that dies (killed, out of memory) fails only the run it was executing; a
    fresh worker takes the next. Stopping the pool (the caller's loop ends, raises, or is interrupted) terminates
    its worker processes: none is left behind. A run's kernel gets its thread limits and folders through its own
    environment (`Run.threads`, `Run.environment`), so runs may share a process (a Dask worker's threads). A run
    sent to a Dask cluster carries its notebook's resolved spec (`Run.spec`): its parameters, dependencies and
    what its execution key hashes are read in the planning process, and a worker's threads parse no Python.
    """
    if not runs:
        return
    if scheduler:
        yield from _on_dask(runs, scheduler)
    else:
        yield from _locally(runs, workers, heartbeat)


def _locally(runs: list[Run], workers: int, heartbeat: float | None):
    tasks, events = queue.SimpleQueue(), queue.SimpleQueue()
    for run in runs:
        tasks.put(run)
    processes: list[subprocess.Popen] = []
    stop = threading.Event()
    drivers = [
        threading.Thread(
            target=_drive, args=(tasks, events, processes, stop), daemon=True
        )
        for _ in range(min(workers, len(runs)))
    ]
    for driver in drivers:
        driver.start()
    finished, quiet_since = 0, time.monotonic()
    try:
        while finished < len(runs):
            try:  # a short wait: a signal that another thread received is handled within it
                event = events.get(timeout=SIGNAL_LATENCY)
            except queue.Empty:
                if (
                    heartbeat is not None
                    and time.monotonic() - quiet_since >= heartbeat
                ):
                    quiet_since = time.monotonic()
                    yield WAITING, None, None
                continue
            quiet_since = time.monotonic()
            finished += event[0] == DONE
            yield event
    finally:
        stop.set()
        # every run finished: each worker reads the end of its input and exits, no SIGTERM while it shuts down
        if finished == len(runs):
            _join(drivers, WORKER_GRACE)
        _terminate(list(processes))


def _join(threads: list[threading.Thread], seconds: float) -> None:
    """Wait for `threads` to end, `seconds` at most for all of them."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def _drive(tasks, events, processes: list, stop: threading.Event) -> None:
    """Feed runs to one worker process; when it dies, its run fails and a fresh worker takes the next."""
    worker = None
    while not stop.is_set():
        try:
            run = tasks.get_nowait()
        except queue.Empty:
            break
        if worker is None or worker.poll() is not None:
            worker = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,  # a Ctrl-C reaches the parent, which stops the pool
            )
            processes.append(worker)
        events.put((STARTED, run, None))
        events.put((DONE, run, _ask(worker, run)))
    if worker is not None:
        worker.stdin.close()
        worker.wait()


def _ask(worker: subprocess.Popen, run: Run) -> dict:
    """Send `run` to `worker` and read its status; a worker that dies meanwhile fails the run."""
    try:
        worker.stdin.write(json.dumps(_wire(run)) + "\n")
        worker.stdin.flush()
        reply = worker.stdout.readline()
    except (BrokenPipeError, ValueError):  # ValueError: the pool closed its pipes
        reply = ""
    if reply:
        return json.loads(reply)
    code = worker.wait()
    how = (
        f"was killed by {signal.Signals(-code).name}"
        if code < 0
        else f"exited with code {code}"
    )
    return died(run, how)


def _wire(run: Run) -> dict:
    """`run` as a local worker reads it (JSON): its fields less its spec, which the worker, one run at a time
    in its main thread, reads from `source` itself."""
    return {f.name: getattr(run, f.name) for f in fields(run) if f.name != "spec"}


def with_spec(runs: list[Run]) -> list[Run]:
    """`runs`, each carrying the resolved spec of its notebook (read once per notebook, here)."""
    specs = {r.source: r.spec for r in runs if r.spec is not None}
    for run in runs:
        if run.source not in specs:
            specs[run.source] = read_spec(run.source)
    return [replace(run, spec=specs[run.source].resolved()) for run in runs]


def _terminate(processes: list[subprocess.Popen], grace: float = WORKER_GRACE) -> None:
    """Stop worker processes and everything they started: SIGTERM to every worker's session at once (the worker
    shuts its kernel down), SIGKILL to the sessions still running `grace` seconds later (one grace for all, not
    one each), then SIGKILL to any of their descendants still alive. A kernel leads a session of its own, so
    the workers' signals do not reach it; it ends by itself when its parent does, but one orphaned before its
    parent poller started, or under a subreaper (systemd's user manager) instead of init, would live on."""
    running = [p for p in processes if p.poll() is None]
    started = {}
    for process in running:
        started |= descendants(process.pid)
    for process in running:
        _signal_session(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in running:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_session(process, signal.SIGKILL)
            process.wait()
    for pid, start in started.items():
        # only the same process, not another that took its pid since
        if _parent_and_start(pid)[1] == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                pass


def descendants(pid: int) -> dict[int, str]:
    """The processes below `pid` (its children, theirs, ...), each pid with its start time (to tell a pid taken
    by another process later apart), from Linux's /proc; none elsewhere."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        parent, start = _parent_and_start(int(entry.name))
        if parent is not None:
            children.setdefault(parent, []).append((int(entry.name), start))
    found, stack = {}, [pid]
    while stack:
        for child, start in children.get(stack.pop(), []):
            found[child] = start
            stack.append(child)
    return found


def _parent_and_start(pid: int) -> tuple[int | None, str | None]:
    """A process's parent pid and start time (clock ticks after boot) from /proc/PID/stat; (None, None) when it
    is gone or there is no /proc."""
    try:  # "pid (name) state ppid ... starttime ...": the name may hold spaces and parentheses
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), fields[19]
    except (OSError, IndexError, ValueError):
        return None, None


def _signal_session(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:  # it ended meanwhile
        pass


def _end_with_parent(parent: int, every: float = 0.5) -> None:
    """End this worker's session (the worker and its kernel) once the process that started it is gone. A
    parent killed by SIGKILL, or a test runner ended by SIGTERM, runs no cleanup, and the worker would go on
    with its run for nobody (seen: a pool worker of a killed pytest went on executing its chapter)."""
    while os.getppid() == parent:
        time.sleep(every)
    os.killpg(os.getpgrp(), signal.SIGTERM)


def _serve() -> None:
    """A local worker process: each line of stdin is one `Run` (JSON); each status goes back as one line on
    the original stdout (anything else printed goes to stderr). SIGTERM ends it, and its kernel with it, and
    so does its parent's end (`_end_with_parent`)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()
    for line in sys.stdin:
        run = json.loads(line)
        run["depends_on"] = tuple(run["depends_on"])
        replies.write(json.dumps(execute(Run(**run)), default=str) + "\n")
        replies.flush()


def import_run_modules() -> None:
    """Import `RUN_MODULES` in this thread (a Dask worker's, before its threads run any of ours)."""
    import importlib

    for name in RUN_MODULES:
        importlib.import_module(name)


def _imports_first():
    """A Dask worker plugin that imports `RUN_MODULES` as each worker starts (or at once, on those running)."""
    from distributed import WorkerPlugin

    class ImportsFirst(WorkerPlugin):
        def setup(self, worker) -> None:
            import_run_modules()

    return ImportsFirst()


def _on_dask(runs: list[Run], scheduler: str):
    """Each run as a task of the Dask cluster at `scheduler`, its workers having imported what a run imports
    (`_imports_first`); a task that errs (KilledWorker: its workers kept dying) is its run's failure."""
    from distributed import Client
    from distributed import as_completed as dask_completed

    with Client(scheduler) as client:
        client.register_plugin(_imports_first(), name="lotlib-run-modules")
        futures = {}
        for run in with_spec(runs):
            futures[client.submit(execute, run, pure=False)] = run
            yield STARTED, run, None
        for future in dask_completed(futures):
            run = futures[future]
            try:
                yield DONE, run, future.result()
            except Exception as err:  # noqa: BLE001 - the run failed, the others go on
                status = {"label": run.label, "status": "failed", "seconds": 0.0}
                yield DONE, run, {**status, "error": f"{type(err).__name__}: {err}"}


if __name__ == "__main__":  # a local worker process (see _drive)
    _serve()
