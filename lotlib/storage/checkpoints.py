"""Resumable loops: a long loop of a chapter (the resamples of an interval) keeps each finished step on disk
while the chapter runs, so that a run stopped before its end (a signal, a dead worker, a machine taken back)
resumes at the step it reached instead of the first."""

from __future__ import annotations

import itertools
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .atomic import write_atomic

CHECKPOINT_VARIABLE = "LOTLIB_CHECKPOINTS"
T = TypeVar("T")
# the rank of each resumable loop in this process, in the order they start
_loops = itertools.count()


class Steps:
    """The steps of one resumable loop: `steps(i, compute)` returns step i's value, from `folder` when an
    earlier run of the same execution finished it, else `compute()` (then kept there). `folder` None: no
    checkpoints."""

    def __init__(self, folder: Path | None):
        self.folder = folder

    def __call__(self, i: int, compute: Callable[[], T]) -> T:
        if self.folder is None:
            return compute()
        path = self.folder / f"step-{i}.pkl"
        try:
            return pickle.loads(path.read_bytes())
        except FileNotFoundError:
            pass
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            path.unlink(missing_ok=True)  # unreadable: computed again
        value = compute()
        write_atomic(path, lambda tmp: tmp.write_bytes(pickle.dumps(value)))
        return value


def resumable(name: str) -> Steps:
    """The steps of this process's next resumable loop, kept under `$LOTLIB_CHECKPOINTS` in a folder named by
    the loop's rank among the process's resumable loops and `name` (a description: it only makes the folder
    readable); without the variable, a loop that keeps nothing.

    The book's and sweeps' runs set `$LOTLIB_CHECKPOINTS` in the kernel to a folder named by the run's execution
    key (`lotlib.book.pipeline`): the notebook, its parameters, the model's revision and the lotlib files it
    imports. The same key means the same code and data, so the n-th resumable loop of the run is the same loop
    again, and its seeded steps give the same values; the pipeline removes the folder when the run succeeds and
    when the key changes. Outside such a run (a library call, the tests) nothing is kept."""
    rank = next(_loops)
    root = os.environ.get(CHECKPOINT_VARIABLE)
    if not root:
        return Steps(None)
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60]
    return Steps(Path(root) / f"{rank:03d}-{readable}")
