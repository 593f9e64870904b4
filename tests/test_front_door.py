"""What a newcomer meets first: a short README whose links resolve, a licence, a valid citation file, a book
that archives and publishes itself, and chapters whose prose paragraphs stay short."""

import hashlib
import json
import re
import subprocess
import tarfile
import tomllib
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAX_PARAGRAPH_WORDS = 120
REPOSITORY = "https://github.com/lotlib/lotlib"
BOOK_URL = "https://lotlib.github.io/lotlib/"
PAPERS = {"arXiv:2309.07315": "10.48550/arXiv.2309.07315", "arXiv:2410.01545": "10.48550/arXiv.2410.01545"}
VERSION_HEADING = re.compile(r"^## \[([^\]]+)\](.*)$", re.M)


def test_the_readme_is_short_names_no_commit_and_its_links_resolve():
    assert README.count("\n") <= 150, f"README.md has {README.count(chr(10))} lines; at most 150"
    hashes = re.findall(r"\b[0-9a-f]{7,40}\b", README)
    assert not hashes, f"README.md names commits {hashes}: move them to docs/ or CHANGELOG.md"
    links = re.findall(r"\]\(([^)#:]+)\)", README)
    for page in ["docs/performance.md", "docs/models.md", "docs/building.md", "docs/claims.md",
                 "docs/scale-out.md", "CHANGELOG.md", "LICENSE", "CITATION.cff"]:
        assert page in links, f"README.md does not link {page}"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links files that do not exist: {missing}"


def test_the_licence_is_mit_as_pyproject_says():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def _project() -> dict:
    """pyproject.toml's [project] table."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _changelog_dates() -> dict[str, str]:
    """Each released version of CHANGELOG.md and the date of its heading."""
    headings = VERSION_HEADING.findall((ROOT / "CHANGELOG.md").read_text())
    return {version: rest.removeprefix(" - ") for version, rest in headings if version != "Unreleased"}


def test_the_citation_file_is_valid_cff_and_cites_both_papers():
    """Validated with jsonschema against CFF 1.2.0's schema as cffconvert 2.0.0 ships it (tests/data)."""
    schema = json.loads((ROOT / "tests/data/cff-1.2.0.schema.json").read_text())
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    jsonschema.validate(citation, schema)
    cited = {(i["type"], i["value"]) for r in citation["references"] for i in r["identifiers"]}
    assert cited == {("other", arxiv) for arxiv in PAPERS} | {("doi", doi) for doi in PAPERS.values()}
    assert {r["doi"] for r in citation["references"]} == set(PAPERS.values())
    assert citation["repository-code"] == REPOSITORY and citation["url"] == BOOK_URL
    project = _project()
    assert citation["version"] == project["version"] and citation["license"] == project["license"]
    assert citation["date-released"] == _changelog_dates()[project["version"]]


def test_the_zenodo_metadata_agrees_with_pyproject_and_names_both_papers():
    zenodo = json.loads((ROOT / ".zenodo.json").read_text())
    project = _project()
    assert zenodo["upload_type"] == "software"
    assert zenodo["version"] == project["version"] and zenodo["license"] == project["license"]
    assert zenodo["title"] == yaml.safe_load((ROOT / "CITATION.cff").read_text())["title"]
    related = {r["identifier"] for r in zenodo["related_identifiers"] if r["scheme"] == "doi"}
    assert related == set(PAPERS.values())


def test_every_changelog_version_has_a_date_and_a_link():
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = VERSION_HEADING.findall(text)
    assert headings[0] == ("Unreleased", "") and len(headings) > 1
    undated = [v for v, date in _changelog_dates().items() if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date)]
    assert not undated, f"version headings without ' - YYYY-MM-DD': {undated}"
    links = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", text, re.M))
    for version, _ in headings:
        assert links.get(version, "").startswith(f"{REPOSITORY}/"), f"no link definition for [{version}]"
    assert _project()["version"] in _changelog_dates()


def test_the_intro_and_the_readme_say_how_to_cite():
    assert "CITATION.cff" in README
    assert "Cite" in (ROOT / "book/intro.md").read_text()


def test_book_archive_packs_the_html_with_a_checksum_that_agrees(tmp_path):
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "index.html").write_text("<html>index</html>")
    (html / "notebooks/report.html").write_text("<html>report</html>")
    archive = tmp_path / "out/book.tar.gz"
    subprocess.run(["make", "-s", "-C", str(ROOT), "book-archive", f"HTML={html}", f"ARCHIVE={archive}"],
                   check=True, capture_output=True)
    digest, name = (archive.parent / "book.tar.gz.sha256").read_text().split()
    assert name == "book.tar.gz" and digest == hashlib.sha256(archive.read_bytes()).hexdigest()
    with tarfile.open(archive) as tar:
        packed = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar if m.isfile()}
    assert packed == {"index.html": b"<html>index</html>", "notebooks/report.html": b"<html>report</html>"}


def test_book_archive_without_a_built_book_says_what_to_run(tmp_path):
    run = subprocess.run(["make", "-s", "-C", str(ROOT), "book-archive", f"HTML={tmp_path / 'none'}"],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "run make book" in run.stdout


def test_the_pages_workflow_deploys_on_a_tag_with_the_readmes_make_targets():
    workflow = yaml.safe_load((ROOT / ".github/workflows/pages.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["tags"]
    book = workflow["jobs"]["build"]["steps"]
    targets = [m for s in book for m in re.findall(r"\bmake ([a-z-]+)", s.get("run", ""))]
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    assert targets == ["book-quick", "book-archive"]
    makefile = (ROOT / "Makefile").read_text()
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M) and f"make {target}" in README
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in steps)


def _paragraphs(path: Path) -> list[str]:
    """The prose paragraphs of a chapter's markdown cells: runs of `# ` lines, tables, fences, directives,
    list items, formulas and headings left out (as /work/shared/hooks/house_stats.py counts them)."""
    skip = ("|", "```", ":::", "-", "*", "$$", "{", "#")
    kind, run, paragraphs = None, [], []
    for line in path.read_text().splitlines() + ["# %%"]:
        if line.startswith("# %%"):
            kind = "md" if "[markdown]" in line else "code"
        prose = line.startswith("# ") and not line.startswith("# %%") and not line.strip("# ").startswith(skip)
        if kind == "md" and prose:
            run.append(line[2:])
        elif run:
            paragraphs.append(" ".join(run))
            run = []
    return paragraphs


def test_the_paragraph_counter_agrees_with_a_hand_count(tmp_path):
    chapter = tmp_path / "x.py"
    chapter.write_text("# %% [markdown]\n# One two three.\n# Four five.\n#\n# - a list item\n# Six.\n"
                       "# %%\n# a code comment of words\nx = 1\n")
    assert [len(p.split()) for p in _paragraphs(chapter)] == [5, 1]


def test_no_chapter_paragraph_is_longer_than_120_words():
    long = [(p.name, len(t.split()), t[:60]) for p in sorted((ROOT / "notebooks").glob("*.py"))
            for t in _paragraphs(p) if len(t.split()) > MAX_PARAGRAPH_WORDS]
    assert not long, f"paragraphs over {MAX_PARAGRAPH_WORDS} words (split them): {long}"


def test_profile_book_writes_the_performance_pages_row():
    """benchmarks/profile_book.py --row prints a row with docs/performance.md's columns."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("profile_book", ROOT / "benchmarks/profile_book.py")
    profile_book = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile_book)
    totals = {"total": 2261.0, "forward": 797.0, "peak_memory_gb": 3.456, "peak_chapter": "smollm2-135m / c5"}
    row = profile_book.performance_row("smollm2-135m", True, totals, 1183.0, "abc1234")
    assert row == "| smollm2-135m, quick | 19 min 43 s | 2,261 | 35% (797 s) | 3.46 GB (smollm2-135m / c5) | abc1234 |"
    header = next(line for line in (ROOT / "docs/performance.md").read_text().splitlines() if line.startswith("| book"))
    assert row.count("|") == header.count("|")


def test_the_report_opens_with_the_papers_numbers_and_collapses_its_rules():
    """The first thing the report shows is the table of the papers' numbers against ours; the rules come later,
    a short section whose full text is in a dropdown."""
    text = (ROOT / "notebooks/report.py").read_text()
    table, glance, rules = (text.index(s) for s in ("paper_numbers_view(table)", "## The verdicts at a glance",
                                                    "## How to read a verdict"))
    assert table < glance < rules, "the papers' numbers come first and the rules last"
    before_table = text[: table]
    assert "claims_view(" not in before_table and "verdict_bars(" not in before_table
    full_rules = text[rules:]
    assert full_rules.index(":::{dropdown}") < full_rules.index("**Question 1")
