"""The claims files: loading and checking `book/claims/*.yml`, and the summary keys a claim reads."""

from __future__ import annotations

from pathlib import Path

import yaml

from ..storage.paths import project_root
from .tolerance import band

KINDS = {"abs", "rel", "max", "min", "range", "paper", "true", "none"}
NATURES = ("identity", "finding", "null-control")
ORIGINS = ("paper", "reviewers", "extension")
SCALES = ("rate", "share")
PAPERS = {"A": "Traveling Words", "B": "Lines of Thought"}
REQUIRED = {"id", "paper", "nature", "claim", "paper_value", "key", "test"}
SOURCED = {"abs", "rel", "max", "min", "range"}


def load_claims(folder: str | Path, notebook: str | None = None) -> list[dict]:
    """All claims of `folder/*.yml` (only `<notebook>.yml` when given), each tagged with its notebook;
    checked for well-formedness (a malformed claim raises, naming the file, the claim and the problem)."""
    claims, seen = [], set()
    for path in sorted(Path(folder).glob(f"{notebook or '*'}.yml")):
        for entry in yaml.safe_load(path.read_text()) or []:
            # YAML reads a bare `null:` key as None
            spec = (
                entry.pop("nulls", None)
                or entry.pop(None, None)
                or entry.pop("null", None)
            )
            entry = {
                "origin": "paper",
                **entry,
                "notebook": path.stem,
                "nulls": _nulls(spec),
            }
            problems = _problems(entry) + (
                ["duplicate id"] if entry.get("id") in seen else []
            )
            if problems:
                raise ValueError(
                    f"{path}: claim {entry.get('id')!r} is malformed: {'; '.join(problems)}"
                )
            seen.add(entry["id"])
            claims.append(entry)
    return claims


def _problems(entry: dict) -> list[str]:
    problems = (
        [f"missing {sorted(REQUIRED - set(entry))}"] if REQUIRED - set(entry) else []
    )
    test, nature = entry.get("test", {}), entry.get("nature")
    if test.get("kind") not in KINDS:
        problems.append(f"test kind not in {sorted(KINDS)}")
    elif test["kind"] in SOURCED and not test.get("source"):
        problems.append(
            "the test's bound does not say where it comes from (test.source)"
        )
    if nature not in NATURES:
        problems.append(f"nature not in {NATURES}")
    if entry.get("origin") not in ORIGINS:
        problems.append(f"origin not in {ORIGINS}")
    if entry["nulls"] and nature != "finding":
        problems.append("only a finding names nulls")
    if test.get("kind") == "true" and nature != "identity":
        problems.append(
            "a true/false test is for identities; a finding needs a measured value with an interval"
        )
    as_paper = entry.get("as_paper")
    if as_paper is not None:
        if entry.get("origin") != "paper":
            problems.append("as_paper is for a number the paper prints (origin: paper)")
        if not {"key", "printed", "scale", "protocol"} <= set(as_paper):
            problems.append("as_paper needs key, printed, scale and protocol")
        elif as_paper["scale"] not in SCALES:
            problems.append(f"as_paper.scale not in {SCALES}")
        else:
            try:
                band(as_paper["printed"], as_paper["scale"], (0.0, 0.0))
            except ValueError as error:
                problems.append(str(error))
        if as_paper.get("chapter") is not None and test.get("kind") == "paper":
            problems.append(
                "a test of kind paper judges the as_paper value of its own chapter (drop as_paper.chapter)"
            )
        second = as_paper.get("second_reading")
        if second is not None and not {"key", "reading"} <= set(second):
            problems.append(
                "as_paper.second_reading needs key and reading (what it reads otherwise)"
            )
    if test.get("kind") == "paper" and as_paper is None:
        problems.append(
            "a test of kind paper needs as_paper (the band it is judged by)"
        )
    return problems


def _nulls(spec) -> list[dict]:
    specs = [] if spec is None else spec if isinstance(spec, list) else [spec]
    for s in specs:
        if not isinstance(s, dict) or not {"key", "name"} <= set(s):
            raise ValueError(f"a null is {{key: ..., name: ...}}, got {s!r}")
    return specs


def paper_chapter(claim: dict) -> str:
    """The chapter that records `claim`'s value by the paper's protocol (`as_paper.chapter`, else its own)."""
    return (claim.get("as_paper") or {}).get("chapter") or claim["notebook"]


def chapter_claims(
    notebook: str, claims_folder: str | Path | None = None
) -> list[dict]:
    """The claims of one chapter, from `claims_folder`; by default `book/claims` of the project running it
    (`project_root`)."""
    if claims_folder is None:
        claims_folder = project_root() / "book" / "claims"
    return load_claims(claims_folder, notebook)


def claim_keys(claim: dict) -> set[str]:
    """Every summary key a claim reads from its own chapter: its value, its nulls' and, unless another chapter
    measures it (`as_paper.chapter`), the paper protocol's value, floor and second reading (`paper_keys`)."""
    keys = {claim["key"], *(n["key"] for n in claim["nulls"])}
    return (
        keys if paper_chapter(claim) != claim["notebook"] else keys | paper_keys(claim)
    )


def paper_keys(claim: dict) -> set[str]:
    """The summary keys of a claim's value by the paper's protocol: value, floor and second reading."""
    paper = claim.get("as_paper") or {}
    keys = {paper[k] for k in ("key", "floor") if paper.get(k)}
    if paper.get("second_reading"):
        keys.add(paper["second_reading"]["key"])
    return keys


def recorded_keys(notebook: str, claims_folder: str | Path | None = None) -> set[str]:
    """Every key the report reads from `notebook`'s summary: its claims' (`claim_keys`) and the paper
    protocol's keys of other chapters' claims that it measures (`as_paper.chapter`)."""
    folder = claims_folder or project_root() / "book" / "claims"
    keys = set()
    for claim in load_claims(folder):
        if claim["notebook"] == notebook:
            keys |= claim_keys(claim)
        if paper_chapter(claim) == notebook and claim["notebook"] != notebook:
            keys |= paper_keys(claim)
    return keys
