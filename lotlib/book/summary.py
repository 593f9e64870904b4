"""Machine-readable summaries of what a chapter measured: the input of the report and of sweeps.

A notebook calls `record({...})` with its measured values: numbers, text, booleans, and for every
verdict-bearing value an `lotlib.intervals.Estimate` (stored as `{"value", "lo", "hi", "n", "unit",
"method", "level"}`), or `not_applicable(reason)` when a claim does not apply to the model (a LayerNorm
property of an RMSNorm model). When the pipeline runs the notebook (book, run, sweep), the summary file is
written beside the executed notebook, named by the run's context (`lotlib.run_context`), which also names
the execution (`run`) so the pipeline can tell a run's own summary from another's; the pipeline adds the
notebook's name and the parameters it ran with. Run by hand, `record` only returns the table.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..intervals import Estimate
from .. import run_context
from ..storage.atomic import write_text_atomic

NOT_APPLICABLE = "not_applicable"


def not_applicable(reason: str) -> dict:
    """The value of a claim that does not apply to this model, with the reason the report shows."""
    return {NOT_APPLICABLE: reason}


def _plain(value):
    """Numbers and strings as JSON understands them (numpy scalars converted, NaN/inf as None, an
    Estimate as its JSON form)."""
    if isinstance(value, Estimate):
        return value.to_json()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def record(values: dict) -> pd.DataFrame:
    """Record the chapter's measured `values` (name -> number or text); return them as a table."""
    values = _plain(values)
    context = run_context.current()  # set by the pipeline in this run's own kernel
    if context is not None:
        write_text_atomic(context.summary, json.dumps({"run": context.run, "values": values}, indent=1, sort_keys=True))
    shown = {k: format(Estimate.from_json(v)) if isinstance(v, dict) and "lo" in v else v for k, v in values.items()}
    return pd.DataFrame({"measured": pd.Series(shown, dtype=object)})


def read_summary(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def load_summaries(folder: str | Path) -> dict[str, dict]:
    """Every `*.summary.json` in `folder`, by notebook name."""
    return {p.name.removesuffix(".summary.json"): read_summary(p) for p in sorted(Path(folder).glob("*.summary.json"))}
