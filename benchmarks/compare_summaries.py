"""Compare the recorded values of two builds' chapter summaries: a refactor moves no number.

    python benchmarks/compare_summaries.py BEFORE AFTER [--rtol 1e-9]

BEFORE and AFTER are build folders (or any folders above them): every `*.summary.json` below each is
matched by its path relative to the folder. Each summary's `values` are flattened to leaves (an Estimate's
value, lo and hi are leaves like any number) and compared: numbers within `rtol` relative (or `atol` near
zero), everything else equal. It prints the count compared and every leaf that moved, was added or was
removed, and exits 1 when anything did.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def summaries(folder: Path) -> dict[str, dict]:
    """Every summary's recorded values below `folder`, by path relative to it."""
    return {
        str(p.relative_to(folder)): json.loads(p.read_text()).get("values", {})
        for p in sorted(folder.rglob("*.summary.json"))
    }


def leaves(value, prefix: str = "") -> dict[str, object]:
    """A nested JSON value as a flat {path: scalar}."""
    if isinstance(value, dict):
        return {k: v for key in value for k, v in leaves(value[key], f"{prefix}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in leaves(item, f"{prefix}[{i}]").items()}
    return {prefix: value}


def same(a, b, rtol: float, atol: float) -> bool:
    """Whether two leaves agree: numbers within tolerance, anything else equal."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    return a == b


def compare(before: Path, after: Path, rtol: float, atol: float) -> tuple[int, list[str]]:
    """The number of leaves compared and a line for each difference."""
    old, new = summaries(before), summaries(after)
    problems = [f"{name}: only in {before}" for name in sorted(old.keys() - new.keys())]
    problems += [f"{name}: only in {after}" for name in sorted(new.keys() - old.keys())]
    compared = 0
    for name in sorted(old.keys() & new.keys()):
        a, b = leaves(old[name]), leaves(new[name])
        problems += [f"{name}{k}: removed" for k in sorted(a.keys() - b.keys())]
        problems += [f"{name}{k}: added" for k in sorted(b.keys() - a.keys())]
        for k in sorted(a.keys() & b.keys()):
            compared += 1
            if not same(a[k], b[k], rtol, atol):
                problems.append(f"{name}{k}: {a[k]!r} -> {b[k]!r}")
    return compared, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rtol", type=float, default=1e-9, help="relative tolerance (default 1e-9)")
    parser.add_argument("--atol", type=float, default=1e-12, help="absolute tolerance near zero")
    args = parser.parse_args()
    compared, problems = compare(args.before, args.after, args.rtol, args.atol)
    files = len(summaries(args.before))
    print(f"{compared} recorded values compared in {files} summaries; {len(problems)} differ")
    for line in problems:
        print("  " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
