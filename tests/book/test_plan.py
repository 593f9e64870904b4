"""What `lotlib book` runs: every chapter on the book's model with its device and dtype, the chapters with
findings on the null model, the report and atlas last with the summaries they read in their keys; a chapter
that runs another notebook re-executes when that notebook changes."""
import json
from pathlib import Path

import pytest

from lotlib.book.build import (
    BookOptions,
    Chapter,
    book_folder,
    build_words,
    chapters_with_findings,
    execute_chapters,
    longest_first,
    model_slug,
    null_model,
    parameter_section,
    plan_book,
    sphinx_problems,
)
from lotlib.book.pipeline import project_root
from lotlib.book.spec import read_spec

from ..conftest import ROOT


def test_a_book_per_model_with_its_null(tmp_path):
    root = project_root(ROOT)
    first, later = plan_book(root, BookOptions(quick=True, model="gemma3-270m", device="cpu", dtype="bfloat16"))
    books = {c.model for c in first}
    assert books == {"gemma3-270m", "untrained:gemma3-270m", "untrained:gpt2"}  # and Traveling Words' architecture
    on_gpt2 = {c.name for c in first if c.model == "untrained:gpt2"}
    assert on_gpt2 == chapters_with_findings(root, paper_null=True) and on_gpt2 <= chapters_with_findings(root)
    assert "a1_geometry" in on_gpt2 and "b4_residuals" not in on_gpt2  # chapters with Traveling Words' findings
    mine = {c.name: c for c in first if c.model == "gemma3-270m"}
    assert mine["a4_a5_noun_probes"].parameters["model"] == "gemma3-270m"
    assert mine["a4_a5_noun_probes"].parameters["dtype"] == "bfloat16"
    assert mine["a4_a5_noun_probes"].output.parent == book_folder(root, "gemma3-270m", True) / "notebooks"
    nulls = {c.name for c in first if c.model == "untrained:gemma3-270m"}
    assert nulls == chapters_with_findings(root) - {c.name for c in later}
    report = next(c for c in later if c.name == "report")
    assert report.parameters["null_summaries_dir"] == "../../untrained-gemma3-270m/notebooks"
    assert report.parameters["paper_null_summaries_dir"] == "../../untrained-gpt2/notebooks"
    on_gpt2 = plan_book(root, BookOptions(quick=True, model="gpt2"))[0]  # GPT-2's own null is the paper's: one book of both
    assert {c.model for c in on_gpt2} == {"gpt2", "untrained:gpt2"}
    assert {c.name for c in on_gpt2 if c.model == "untrained:gpt2"} == nulls
    assert null_model("untrained:gpt2") is None and null_model("gpt2") == "untrained:gpt2"
    assert model_slug("meta-llama/Llama-3.2-1B") == "meta-llama--Llama-3.2-1B"
    assert model_slug(str(tmp_path)).startswith(tmp_path.name + "-")
    without = plan_book(root, BookOptions(quick=True, model="gemma3-270m", null=False))[0]
    assert {c.model for c in without} == {"gemma3-270m"}


def test_the_last_chapters_key_the_summaries_they_read_and_not_each_others(tmp_path):
    root = project_root(ROOT)
    first, later = plan_book(root, BookOptions(quick=True, model="smollm2-135m", null=False, build=tmp_path))
    assert all(tmp_path in c.output.parents for c in first + later)  # planned once, before any summary exists
    for chapter in later:  # the report and the atlas run at once: neither reads the other's summary
        names = {p.name for p in chapter.depends_on}
        assert "b4_residuals.summary.json" in names, chapter.name
        assert not names & {"report.summary.json", "atlas.summary.json"}, chapter.name
        assert {"b4_residuals.yml", "a1_geometry.yml"} <= names, chapter.name  # every claim they judge


def test_a_chapter_re_executes_when_its_claims_change():
    first = {c.name: c for c in plan_book(project_root(ROOT), BookOptions(quick=True, model="smollm2-135m", null=False))[0]}
    assert [p.name for p in first["b4_residuals"].depends_on] == ["b4_residuals.yml"]  # its closing table's tests
    assert not any(p.suffix == ".yml" for p in first["c6_sweeps"].depends_on)  # no claims of its own


def test_the_test_suites_books_take_their_smaller_parameters_and_pass_preflight():
    from lotlib.book.parameters import check_parameters

    root = project_root(ROOT)
    smaller = parameter_section(root, "tests")
    first, later = plan_book(root, BookOptions(quick=True, model="smollm2-135m", overrides=smaller))
    for chapter in first + later:
        check_parameters(chapter.spec.parameters, chapter.parameters, chapter.label)
    chapters = {c.name: c for c in first if c.model == "smollm2-135m"}
    b4 = chapters["b4_residuals"]
    assert chapters["b4_authors_protocol"].parameters["n_boot"] == smaller["b4_authors_protocol"]["n_boot"]
    quick = parameter_section(root, "quick")["b4_residuals"]
    assert "raw_coordinates" not in smaller["b4_residuals"]
    assert b4.parameters["raw_coordinates"] == quick["raw_coordinates"]  # quick's, kept


SWEEPER = '''# %% [markdown]
# A page that runs another notebook.

# %% tags=["parameters"]
chapter: str = "swept"  # the notebook it runs

# %%
print("runs", chapter)
'''
SWEPT = '''# %% tags=["parameters"]
n: int = 1

# %%
print(n)
'''


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "book" / "claims").mkdir(parents=True)
    (tmp_path / "book" / "_config.yml").write_text("title: test\n")
    (tmp_path / "book" / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: notebooks/sweeper\n")
    (tmp_path / "book" / "parameters.yml").write_text("quick:\n  sweeper: {}\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "sweeper.py").write_text(SWEEPER)
    (tmp_path / "notebooks" / "swept.py").write_text(SWEPT)
    return tmp_path


@pytest.mark.slow
def test_the_sweeps_page_re_executes_when_the_swept_notebook_changes(project):
    said = []

    def run() -> str:
        said.clear()
        first, _ = plan_book(project, BookOptions(quick=False, model="smollm2-135m", null=False))
        execute_chapters(first, jobs=1, say=said.append)
        return next(line for line in said if "done in" in line)

    assert "(cached)" not in run()
    assert "(cached)" in run()  # nothing changed
    (project / "notebooks" / "swept.py").write_text(SWEPT.replace("n: int = 1", "n: int = 2"))
    assert "(cached)" not in run()  # the swept notebook changed: the page runs again


def test_a_failed_build_names_the_sphinx_problems_not_the_log_tail():
    log = "\n".join(["reading sources... [ 10%] intro",
                     "\x1b[31m/p/lotlib/x.py:docstring of lotlib.x.f:1: ERROR: Undefined substitution referenced: \"g\".\x1b[39;49;00m",
                     "notebooks/b4.ipynb:12: WARNING: image file not readable",
                     *[f"copying images... [{i}%]" for i in range(40)], "build finished with problems, 2 warnings."])
    assert sphinx_problems(log).splitlines() == [
        '/p/lotlib/x.py:docstring of lotlib.x.f:1: ERROR: Undefined substitution referenced: "g".',
        "notebooks/b4.ipynb:12: WARNING: image file not readable"]
    assert sphinx_problems("a\nb\nc", limit=2) == "b\nc"  # no warning lines: the end of the log


@pytest.mark.slow
def test_progress_says_which_chapters_really_run(tmp_path):
    chapters = []
    for name in ("one", "two", "three"):
        source = tmp_path / f"{name}.py"
        source.write_text('# %% tags=["parameters"]\nseconds: float = 1.5\n\n# %%\nimport time\ntime.sleep(seconds)\n')
        chapters.append(Chapter(read_spec(source), "m", tmp_path / "out" / f"{name}.ipynb", {}))
    said = []
    profiles = execute_chapters(chapters, jobs=1, say=said.append, heartbeat=1.0)
    assert list(profiles) == ["m / one", "m / two", "m / three"] and all(p["total"] >= 1.5 for p in profiles.values())
    words = build_words(profiles)
    assert words.startswith("3 chapter run(s) executed: ") and "0 of them in forward passes" in words
    assert "largest kernel peak memory" in words  # each kernel's peak, read from /proc
    events = [line.removeprefix("[lotlib book] m / ") for line in said if "started" in line or "done in" in line]
    assert [e.split(" in ")[0] for e in events] == [f"{n}: {e}" for n in ("one", "two", "three")
                                                    for e in ("started", "done")]  # never two at once with jobs=1
    beats = [line for line in said if "still running" in line]
    assert beats and all(line.count(" / ") == 1 for line in beats)  # one chapter at a time, named with its book
    assert execute_chapters(chapters, jobs=1, say=said.append) == {}  # all reused: nothing executed


def test_a_missing_data_file_stops_the_book_before_any_chapter_runs(tmp_path, monkeypatch):
    import urllib.error
    import urllib.request

    from lotlib.book.build import build_book
    from lotlib.models.data import DataError

    def offline(*args, **kwargs):
        raise urllib.error.URLError("offline")

    monkeypatch.setenv("LOTLIB_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    said = []
    with pytest.raises(DataError, match="LOTLIB_DATA_DIR"):
        build_book(project_root(ROOT), BookOptions(quick=True, model="gemma3-270m"), say=said.append)
    assert said == []  # nothing started


def test_the_longest_chapters_start_first_and_those_never_timed_before_them(tmp_path):
    """The pool's order: chapters without a recorded time in plan order, then by the seconds their last summary
    recorded, longest first (B2 and C4 take hours at full size; they no longer wait for the short chapters)."""
    root = project_root(ROOT)
    first, _ = plan_book(root, BookOptions(quick=True, model="smollm2-135m", null=False, build=tmp_path))
    recorded = {"a1_geometry": 30.0, "b2_ensemble_svd": 7200.0, "c4_null_tests": 900.5, "a3_reachable_tokens": 2}
    for chapter in first:
        if chapter.name in recorded:
            summary = chapter.output.with_suffix(".summary.json")
            summary.parent.mkdir(parents=True, exist_ok=True)
            summary.write_text(json.dumps({"seconds": {"total": recorded[chapter.name], "forward": 1.0}}))
    ordered = [c.name for c in longest_first(first)]
    never = [c.name for c in first if c.name not in recorded]
    assert ordered == never + ["b2_ensemble_svd", "c4_null_tests", "a1_geometry", "a3_reachable_tokens"]


def test_the_heartbeat_names_the_cell_and_the_resample_steps_kept(tmp_path):
    import nbformat

    from lotlib.book.build import _cells_done

    chapter = plan_book(project_root(ROOT), BookOptions(quick=True, model="smollm2-135m", null=False, build=tmp_path))[0][0]
    assert _cells_done(chapter) == ""
    kept = chapter.output.with_suffix(".checkpoints") / "key" / "000-truncation_resamples"
    kept.mkdir(parents=True)
    for i in range(3):
        (kept / f"step-{i}.pkl").write_bytes(b"")
    assert _cells_done(chapter) == " (3 resample steps kept)"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", execution_count=1),
                                         nbformat.v4.new_code_cell("2")])
    nbformat.write(nb, chapter.output.with_suffix(".partial.ipynb"))
    assert _cells_done(chapter) == " (cell 1 of 2, 3 resample steps kept)"
