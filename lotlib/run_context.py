"""What a notebook run knows about itself: which execution it is, where its summary goes, whether it runs
inside the book.

The pipeline (`lotlib.book.pipeline.run_notebook`) opens each run's notebook with a hidden cell that calls
`enter` in the kernel executing that run, and only that run: the context belongs to the run and to no
process-wide state (such as an environment variable) that a concurrent run could change. Read by
`lotlib.book.summary.record` and `lotlib.plots.show`. A notebook run by hand has no context: `current()` is
None, `record` only returns its table and `show` uses the notebook's own renderer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunContext:
    """One execution's context: `run` names it (and is written into its summary), `summary` is the file
    `record` writes, `book` is true while the book is built (plotly.js is bundled with the site), `project`
    is the project folder of the notebook (where `book/claims` are), wherever the run's output goes."""

    run: str
    summary: str
    book: bool = False
    project: str | None = None


_current: RunContext | None = None


def enter(
    run: str, summary: str, book: bool = False, project: str | None = None
) -> None:
    """Set this kernel's run context (the pipeline's hidden first cell calls it)."""
    global _current
    _current = RunContext(run, summary, book, project)


def current() -> RunContext | None:
    """The context of the run this kernel executes; None for a notebook run by hand."""
    return _current
