"""The reproduction report: each claim of the papers, the paper's value, ours, and a verdict.

Claims live in `book/claims/<notebook>.yml`, a list of entries:

    - id: B2-K0                       # unique, short
      paper: B                        # A = Traveling Words, B = Lines of Thought
      claim: "K0 = D/4 singular directions recover the next-token distribution"
      paper_value: 0.25               # what the authors report (number or text), typed from PAPERS.md
      key: k_over_d_below_baseline    # the notebook's summary value that answers it
      test: {kind: abs, tol: 0.1}     # how the verdict is computed (below)

Verdict kinds: `abs` (abs(ours - paper) <= tol), `rel` (abs(ours - paper) <= tol * abs(paper)), `max`
(ours <= bound), `min` (ours >= bound), `range` (lo <= ours <= hi), `true` (ours is true),
`none` (shown, no verdict: "not applicable"). Nothing else in the report is typed by hand.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from .summary import load_summaries

KINDS = {"abs", "rel", "max", "min", "range", "true", "none"}


def load_claims(folder: str | Path) -> list[dict]:
    """All claims of `book/claims/*.yml`, each tagged with its notebook; checked for well-formedness."""
    claims = []
    for path in sorted(Path(folder).glob("*.yml")):
        for entry in yaml.safe_load(path.read_text()) or []:
            entry = {**entry, "notebook": path.stem}
            missing = {"id", "paper", "claim", "paper_value", "key", "test"} - set(entry)
            if missing or entry["test"].get("kind") not in KINDS:
                raise ValueError(f"{path}: claim {entry.get('id')!r} is malformed (missing {sorted(missing)} "
                                 f"or test kind not in {sorted(KINDS)})")
            claims.append(entry)
    return claims


def verdict(ours, paper_value, test: dict) -> str:
    """'holds', 'differs', 'not applicable' (kind none), or 'missing' (no value measured)."""
    kind = test["kind"]
    if kind == "none":
        return "not applicable"
    if ours is None:
        return "missing"
    if kind == "true":
        ok = bool(ours)
    elif kind == "abs":
        ok = abs(ours - paper_value) <= test["tol"]
    elif kind == "rel":
        ok = abs(ours - paper_value) <= test["tol"] * abs(paper_value)
    elif kind == "max":
        ok = ours <= test["bound"]
    elif kind == "min":
        ok = ours >= test["bound"]
    else:  # range
        ok = test["lo"] <= ours <= test["hi"]
    return "holds" if ok else "differs"


def _tolerance(test: dict) -> str:
    kind = test["kind"]
    return {"abs": lambda: f"|ours − paper| ≤ {test['tol']}", "rel": lambda: f"within {test['tol']:.0%} of paper",
            "max": lambda: f"ours ≤ {test['bound']}", "min": lambda: f"ours ≥ {test['bound']}",
            "range": lambda: f"{test['lo']} ≤ ours ≤ {test['hi']}", "true": lambda: "ours is true",
            "none": lambda: "no verdict"}[kind]()


def report_table(claims_folder: str | Path, summaries_folder: str | Path) -> pd.DataFrame:
    """One row per claim: paper value, ours (with model and parameters), tolerance, verdict, chapter."""
    summaries = load_summaries(summaries_folder)
    rows = []
    for c in load_claims(claims_folder):
        summary = summaries.get(c["notebook"], {})
        ours = summary.get("values", {}).get(c["key"])
        params = summary.get("parameters", {})
        rows.append({
            "id": c["id"], "paper": c["paper"], "claim": c["claim"], "paper value": c["paper_value"],
            "ours": ours, "model": params.get("model") or ", ".join(params.get("models") or []),
            "run with": ", ".join(f"{k}={v}" for k, v in params.items() if k not in ("model", "models")),
            "tolerance": _tolerance(c["test"]), "verdict": verdict(ours, c["paper_value"], c["test"]),
            "chapter": c["notebook"],
        })
    return pd.DataFrame(rows)
