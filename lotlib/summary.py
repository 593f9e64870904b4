"""Machine-readable summaries of what a chapter measured: the input of the report and of sweeps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

# not_applicable is re-exported: the chapters record it from here, the analysis modules from stats
from .stats import NOT_APPLICABLE, Estimate, not_applicable  # noqa: F401

SUMMARY_MIME = "application/vnd.lotlib.summary+json"


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


class _Shown(float):
    """A float that reads with four significant digits in a sentence (its repr, which `{glue:text}` shows
    when the prose gives no format) and formats as a float when it does (`{glue:text}`name:.2f``)."""

    def __repr__(self) -> str:
        return format(float(self), ".4g")


def glue(name: str, value) -> None:
    """Glue `value` under `name` for the chapter's prose (myst-nb; not shown where it is computed): an
    Estimate as `value [lo, hi]`, a float with four significant digits unless the prose formats it
    (`{glue:text}`name:.3f``), an int as itself, a not-applicable value as its reason, anything else as its
    text."""
    from myst_nb import glue as myst_glue

    if isinstance(value, (float, np.floating)) and not isinstance(value, bool):
        value = _Shown(value)
    elif isinstance(value, Estimate):
        value = format(value)
    elif isinstance(value, dict) and NOT_APPLICABLE in value:
        value = f"not applicable ({value[NOT_APPLICABLE]})"
    elif isinstance(value, np.generic):
        value = value.item()
    elif not isinstance(value, (int, float, str)):
        value = str(value)
    myst_glue(name, value, display=False)


def record(values: dict) -> None:
    """Record the chapter's measured `values` (name -> number, text or Estimate) as an output of this cell
    (read back by the pipeline), and glue each under its name for the prose.

    The values are numbers, text, booleans, and for every verdict-bearing value an `lotlib.stats.Estimate`
    (stored as `{"value", "lo", "hi", "n", "unit", "method", "level"}`), or `not_applicable(reason)` when a
    claim does not apply to the model (a LayerNorm property of an RMSNorm model). The output is a display of
    lotlib's own MIME type (the way scrapbook and myst-nb's `glue` keep values in a notebook), and each value is
    glued for `{glue:text}` in a markdown cell. The pipeline reads them back from the executed notebook
    (`summary_of`) and writes the summary file beside it: a summary belongs to its notebook because it was
    read out of it."""
    from IPython.display import display

    # no text/plain: the page shows nothing
    display({SUMMARY_MIME: _plain(values)}, raw=True)
    for name, value in values.items():
        glue(name, value)


def summary_of(nb) -> dict | None:
    """The values a notebook recorded (every `record` output, in order; later names win), or None when it
    recorded none. `nb` is a notebook read by nbformat."""
    found = [
        out["data"][SUMMARY_MIME]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if SUMMARY_MIME in out.get("data", {})
    ]
    return {k: v for values in found for k, v in values.items()} if found else None


def read_summary(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def load_summaries(folder: str | Path) -> dict[str, dict]:
    """Every `*.summary.json` in `folder`, by notebook name."""
    return {
        p.name.removesuffix(".summary.json"): read_summary(p)
        for p in sorted(Path(folder).glob("*.summary.json"))
    }
