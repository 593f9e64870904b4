"""Machine-readable summaries of what a chapter measured: the input of the report and of sweeps.

A notebook calls `record({...})` with its measured values. When the pipeline runs it (book, run,
sweep), `$LOTLIB_SUMMARY` names the file to write, beside the executed notebook; the pipeline then
adds the notebook's name and the parameters it ran with. Run by hand, `record` only returns the table.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .atomic import write_text_atomic

SUMMARY_ENV = "LOTLIB_SUMMARY"


def _plain(value):
    """Numbers and strings as JSON understands them (numpy scalars converted, NaN/inf as None)."""
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
    path = os.environ.get(SUMMARY_ENV)
    if path:
        write_text_atomic(path, json.dumps({"values": values}, indent=1, sort_keys=True))
    return pd.DataFrame({"measured": pd.Series(values, dtype=object)})


def read_summary(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def load_summaries(folder: str | Path) -> dict[str, dict]:
    """Every `*.summary.json` in `folder`, by notebook name."""
    return {p.name.removesuffix(".summary.json"): read_summary(p) for p in sorted(Path(folder).glob("*.summary.json"))}
