"""The worker pool shared by the book and sweeps: a run's status, and no process left behind when the pool
stops early (the caller's loop ends, raises or is interrupted)."""
import json
import os
import time

import pytest

from lotlib.book.workers import STARTED, Run, execute, run_pool

SLEEPER = '''# %% tags=["parameters"]
seconds: float = 60.0

# %%
import time
time.sleep(seconds)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is not alive
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:  # it ended meanwhile
        return False


def test_a_failed_run_is_a_status_not_an_exception(tmp_path):
    source = tmp_path / "broken.py"
    source.write_text('# %% tags=["parameters"]\nn: int = 1\n\n# %%\nraise ValueError("broken")\n')
    status = execute(Run("broken", str(source), str(tmp_path / "broken.ipynb"), {}))
    assert status["status"] == "failed" and "ValueError: broken" in status["error"]
    assert execute(Run("typo", str(source), str(tmp_path / "t.ipynb"), {"m": 1}))["status"] == "failed"


@pytest.mark.slow
def test_stopping_the_pool_leaves_no_worker_or_kernel_behind(tmp_path):
    import psutil

    source = tmp_path / "sleeper.py"
    source.write_text(SLEEPER)
    runs = [Run(f"run{i}", str(source), str(tmp_path / f"run{i}.ipynb"), {}) for i in range(3)]
    before = {p.pid for p in _descendants(psutil)}  # what earlier tests left running is not the pool's
    pool = run_pool(runs, workers=2, heartbeat=1.0)
    started = []
    for event, run, _ in pool:  # wait until two runs are under way, with their kernels
        if event == STARTED:
            started.append(run.label)
        if len(started) == 2 and len(_pool_processes(psutil, before)) >= 4:
            break
    processes = _pool_processes(psutil, before)
    assert len(processes) >= 4  # two workers, two kernels
    pool.close()  # the caller stops (as an interrupted `lotlib book` does)
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(p.pid) for p in processes):
        time.sleep(0.2)
    assert not [_described(p) for p in processes if _alive(p.pid)]


def _pool_processes(psutil, before: set[int]) -> list:
    """The pool's worker processes started since `before` (this process's descendants then) and everything
    below them: not what another test left that starts a process meanwhile (a Dask nanny, a resource tracker)."""
    new = [p for p in psutil.Process().children() if p.pid not in before]
    workers = [p for p in new if "lotlib.book.workers" in _cmdline(psutil, p)]
    return [*workers, *(c for w in workers for c in _children(psutil, w.pid))]


def _cmdline(psutil, process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.NoSuchProcess:
        return ""


def _described(process) -> str:
    """A surviving process as the failure shows it: pid, parent and command line."""
    try:
        return f"pid {process.pid} (parent {process.ppid()}): {' '.join(process.cmdline())}"
    except Exception as gone:  # noqa: BLE001 - it ended while being described
        return f"pid {process.pid}: {gone!r}"


ORPHANING_WORKER = """
import subprocess, sys, time
# a kernel-like child in a session of its own, with no parent poller: it outlives its parent unless killed
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


def test_terminating_workers_also_ends_what_they_started_in_other_sessions():
    """A kernel leads a session of its own: the SIGTERM and SIGKILL sent to its worker's session miss it, and one
    orphaned before its parent poller started (or under a subreaper rather than init) would live on."""
    import subprocess
    import sys

    from lotlib.book.workers import _terminate, descendants

    worker = subprocess.Popen([sys.executable, "-c", ORPHANING_WORKER], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child = int(worker.stdout.readline())
    assert child in descendants(worker.pid) and worker.pid not in descendants(child)
    _terminate([worker], grace=1.0)
    deadline = time.time() + 10
    while time.time() < deadline and _alive(child):
        time.sleep(0.1)
    assert worker.poll() is not None and not _alive(child)


POOL_PARENT = """
import sys, time
from lotlib.book.workers import STARTED, Run, run_pool

run = Run("sleeper", sys.argv[1], sys.argv[2], {})
for event, _, _ in run_pool([run], workers=1, heartbeat=1.0):
    if event == STARTED:
        print("started", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_a_pool_that_finished_lets_its_workers_exit_by_themselves(tmp_path, monkeypatch):
    """No SIGTERM reaches a worker that is already shutting down (its handler then printed a SystemExit
    traceback from inside the interpreter's exit): every worker has exited, with code 0, before the pool's
    final stop looks for processes to signal."""
    from lotlib.book import workers

    seen = []
    monkeypatch.setattr(workers, "_terminate", lambda processes: seen.extend(p.poll() for p in processes))
    source = tmp_path / "sleeper.py"
    source.write_text(SLEEPER)
    runs = [Run(f"run{i}", str(source), str(tmp_path / f"run{i}.ipynb"), {"seconds": 0.0}) for i in range(3)]
    statuses = [status for event, _, status in run_pool(runs, workers=2) if event == workers.DONE]
    assert [s["status"] for s in statuses] == ["ok"] * 3
    assert seen == [0, 0]


@pytest.mark.slow
def test_a_parent_killed_outright_leaves_no_worker_or_kernel_behind(tmp_path):
    """SIGKILL runs no cleanup in the pool's parent (a test runner ended by SIGTERM neither): the worker sees
    its parent gone and ends its session, its kernel with it, well before the run would have ended (60 s)."""
    import signal
    import subprocess
    import sys

    import psutil

    source = tmp_path / "sleeper.py"
    source.write_text(SLEEPER)
    parent = subprocess.Popen([sys.executable, "-c", POOL_PARENT, str(source), str(tmp_path / "s.ipynb")],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().strip() == "started"
    deadline = time.time() + 60
    found = []
    while time.time() < deadline and len(found) < 2:  # the worker and its kernel
        found = psutil.Process(parent.pid).children(recursive=True)
        time.sleep(0.2)
    assert len(found) >= 2
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 20
    while time.time() < deadline and any(_alive(p.pid) for p in found):
        time.sleep(0.2)
    assert not [p.pid for p in found if _alive(p.pid)]


@pytest.mark.slow
def test_a_sigint_that_another_thread_receives_stops_the_pool_before_its_run_ends(tmp_path):
    """Python runs signal handlers in the main thread only. A SIGINT the kernel hands to another thread (here a
    timer's, as it may hand one to a worker-driving thread) must still interrupt the pool's loop, which waits
    for events with no heartbeat: the interrupt comes while the 60 s run is under way, not after it."""
    import signal
    import threading

    source = tmp_path / "sleeper.py"
    source.write_text(SLEEPER)
    pool = run_pool([Run("sleeper", str(source), str(tmp_path / "sleeper.ipynb"), {})], workers=1)
    events = []
    # Python's own Ctrl-C handler, whatever this process inherited (a job started in the background by a
    # non-interactive shell starts with SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            for event, _, _ in pool:
                events.append(event)
                if event == STARTED:
                    threading.Timer(3.0, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT)).start()
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert events == [STARTED]  # interrupted before the run was done
    assert not (tmp_path / "sleeper.ipynb").exists()


def _descendants(psutil) -> list:
    return _children(psutil, os.getpid())


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signalled_book_stops_its_workers_and_says_so(tmp_path, signum):
    import signal
    import subprocess
    import sys

    import psutil

    (tmp_path / "book" / "claims").mkdir(parents=True)
    (tmp_path / "book" / "_config.yml").write_text("title: test\n")
    (tmp_path / "book" / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/sleeper\n")
    (tmp_path / "book" / "parameters.yml").write_text("quick: {}\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "sleeper.py").write_text(SLEEPER)
    book = subprocess.Popen([sys.executable, "-m", "lotlib.cli", "book", "--no-null"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            # as a terminal starts it: a background job of a script inherits SIGINT ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in book.stdout:  # progress reaches a pipe as it happens
        lines.append(line)
        if "sleeper: started" in line:
            break
    deadline = time.time() + 60
    while time.time() < deadline and not any("ipykernel" in " ".join(p.cmdline()) for p in _children(psutil, book.pid)):
        time.sleep(0.2)
    family = _children(psutil, book.pid)
    assert family, lines
    book.send_signal(getattr(signal, signum))
    rest = book.communicate(timeout=60)[0]
    assert book.returncode == 130 and "interrupted" in rest
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(p.pid) for p in family):
        time.sleep(0.2)
    assert not [p.pid for p in family if _alive(p.pid)]
    assert not (tmp_path / "build" / "book" / "smollm2-135m" / "notebooks" / "sleeper.ipynb").exists()


def _children(psutil, pid: int) -> list:
    """Every live process below `pid` (none when `pid` itself has ended)."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in found if _alive(p.pid)]


RECORDER = '''# %% [markdown]
# # {name}

# %% tags=["parameters"]
seed: int = 0

# %%
import psutil
from lotlib.summary import record

record({{"ancestors": [p.pid for p in psutil.Process().parents()], "seed": seed}})
'''


@pytest.mark.slow
def test_a_book_builds_on_a_local_dask_cluster_with_two_workers(tmp_path):
    """`build_book(..., scheduler=...)`: the chapters run as tasks of a two-worker LocalCluster (kernels started
    there, not here), their summaries are read back into the right files, and the strict HTML build passes."""
    import shutil

    import distributed

    from lotlib.book.build import BookOptions, build_book
    from lotlib.book.pipeline import project_root

    root = project_root()
    shutil.copytree(root / "book", tmp_path / "book", ignore=shutil.ignore_patterns("claims", "_toc.yml", "*.md"))
    (tmp_path / "book" / "claims").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# A book on a cluster\n")
    (tmp_path / "book" / "parameters.yml").write_text("quick:\n  second: {seed: 2}\n")
    (tmp_path / "book" / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/first\n  - file: notebooks/second\n")
    (tmp_path / "notebooks").mkdir()
    for name in ("first", "second"):
        (tmp_path / "notebooks" / f"{name}.py").write_text(RECORDER.format(name=name.title()))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        html = build_book(tmp_path, BookOptions(quick=True, null=False, build=tmp_path / "build"),
                          scheduler=cluster.scheduler_address, say=lambda line: None)
        with distributed.Client(cluster.scheduler_address) as client:
            workers = set(client.run(os.getpid).values())
    summaries = {name: json.loads((html.parents[1] / "notebooks" / f"{name}.summary.json").read_text())
                 for name in ("first", "second")}
    assert {s["values"]["seed"] for s in summaries.values()} == {0, 2}  # each summary in its own chapter's file
    # each kernel started by a Dask worker (forked by that worker's kernel zygote)
    assert all(workers & set(s["values"]["ancestors"]) for s in summaries.values())
    assert all((html / "notebooks" / f"{name}.html").stat().st_size > 1000 for name in summaries)
