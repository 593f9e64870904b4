"""A kernel zygote: one process that imports the chapters' heavy libraries once and forks a kernel per run."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import sys
import time
import traceback

PRELOADED = (  # what a chapter's first cell imports, heaviest first; a module that is missing is skipped
    "torch",
    "transformers.modeling_utils",  # `import transformers` alone is lazy: what load_model resolves
    "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto",
    "scipy.stats",
    "sklearn.linear_model",
    "sklearn.svm",
    "pandas",
    "seaborn",
    "plotly.graph_objects",
    "umap",  # A7 (numba and pynndescent)
    "IPython",  # not ipykernel.kernelapp: its class attributes read the kernel's own variables (JPY_PARENT_PID)
    "zmq",
)
# read when a chapter runs, never when a library is imported
RUN_VARIABLE_PREFIXES = ("LOTLIB_", "JPY_")
ZYGOTE_VARIABLE = "LOTLIB_KERNEL_ZYGOTE"  # "0": every kernel is a fresh process, as Jupyter starts them
# A notebook that imports neither (itself or through the lotlib modules it imports) gets a fresh kernel: a
# zygote's imports would cost it more than a kernel of its own (ipykernel alone starts quickly).
FORKED_FOR = frozenset({"torch", "transformers"})


def serving_key(env: dict[str, str]) -> tuple:
    """What a zygote and a kernel must share for the kernel to be forked from it: every variable of `env`
    but the per-run ones."""
    shared = (k for k in env if not k.startswith(RUN_VARIABLE_PREFIXES))
    return tuple(sorted((k, env[k]) for k in shared))


def _preload() -> list[str]:
    """Import `PRELOADED`; the names that could not be imported (not installed), which kernels import themselves."""
    # the backend ipykernel sets before a kernel imports anything: matplotlib reads it once, when imported
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    missing = []
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _keep_niceness(attempts: int = 5) -> None:
    """Give this process's new session the process's niceness. Linux schedules each session as a group of
    its own at nice 0 (autogroups), so a kernel that leads a session would otherwise compete at full weight
    with everything else: `nice lotlib book` would yield nothing. The kernel allows an unprivileged write
    about ten times a second across the machine (EAGAIN otherwise), hence a few attempts; a system without
    autogroups has nothing to set."""
    niceness = os.nice(0)
    if niceness <= 0:
        return
    for _ in range(attempts):
        try:
            with open("/proc/self/autogroup", "w") as group:
                group.write(str(niceness))
            return
        except BlockingIOError:
            time.sleep(0.1)
        except OSError:
            return


def _become_kernel(request: dict, replies) -> None:
    """In the forked child: take the run's session, environment and folder, then run ipykernel as
    `python -m ipykernel_launcher ARGUMENTS` would. Never returns."""
    code = 1
    try:
        replies.close()
        os.setsid()
        _keep_niceness()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.environ.clear()
        os.environ.update(request["env"])
        # ipykernel ends a kernel whose parent changes: its parent is the zygote, which ends with its requester
        os.environ["JPY_PARENT_PID"] = str(os.getppid())
        os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # IPython adds the kernel's own folder to sys.path, as ipykernel_launcher does
        launcher = importlib.util.find_spec("ipykernel_launcher").origin
        sys.argv = [launcher, *request["arguments"]]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance(argv=request["arguments"])
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 0
    except BaseException:  # noqa: BLE001 - the kernel's end, reported on stderr like a spawned kernel's
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """The zygote's loop (`python lotlib/book/zygote.py`: run as a script, so that no module of lotlib is
    loaded): preload, then fork one kernel per request.

    The zygote imports torch, transformers, scipy, pandas, matplotlib, seaborn and umap once (`PRELOADED`);
    each kernel is a fork of it, so the chapter's first cell finds them loaded. Nothing else is shared: the
    zygote runs no code of the project (lotlib is imported by the kernel, from the files as they are when the
    run starts) and no computation, so a forked kernel starts in the state a fresh one has after the same
    imports.

    It reads one request per line on stdin (JSON: the kernel's arguments, working folder and complete
    environment) and answers with the forked kernel's pid. Each kernel gets its own session, as Jupyter starts
    kernels, so that an interrupt reaches it alone, and that session keeps the zygote's niceness. The zygote
    reaps its kernels as they end, ignores SIGINT (the process that asked for a kernel stops it), and ends when
    its stdin closes: when the process that started it ends, however it ends. A kernel whose zygote is gone
    ends within a second (ipykernel's parent poller). Libraries read some variables when imported (Hugging
    Face's offline flags and folders, the BLAS and OpenMP thread counts), so a zygote serves only kernels whose
    environment equals its own but for the per-run variables `RUN_VARIABLE_PREFIXES`; `lotlib.book.kernel`
    keeps one zygote per environment."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything printed goes to stderr; stdout carries the answers only
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    missing = _preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps ended kernels
    replies.write(json.dumps({"ready": os.getpid(), "not_preloaded": missing}) + "\n")
    replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _become_kernel(request, replies)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()


if __name__ == "__main__":
    # the script's folder (lotlib/book) leaves sys.path before any import: its profile.py would shadow the
    # standard library's, which torch imports through cProfile
    del sys.path[0]
    serve()
