"""Seconds spent in forward passes, for the book's profile (forward passes against analysis)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

FORWARD_LOG = "LOTLIB_FORWARD_LOG"


@contextmanager
def forward_pass():
    """Time the enclosed forward pass into the file named by `FORWARD_LOG` (a no-op when it is unset).

    Every forward pass goes through `ModelView.run`, which times itself with this. When the variable
    `LOTLIB_FORWARD_LOG` names a file (the pipeline sets it in each chapter's kernel), each pass appends its
    wall time there as one line; `forward_seconds` adds them up. Without the variable nothing is written."""
    log = os.environ.get(FORWARD_LOG)
    start = time.perf_counter()
    try:
        yield
    finally:
        if log:
            # one short line per pass: appends do not interleave
            with open(log, "a") as out:
                out.write(f"{time.perf_counter() - start:.6f}\n")


def forward_seconds(log: str | Path) -> float:
    """The seconds of forward passes written to `log` (0 when it does not exist)."""
    try:
        return sum(float(line) for line in Path(log).read_text().split())
    except FileNotFoundError:
        return 0.0
