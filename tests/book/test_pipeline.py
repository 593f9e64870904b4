"""Notebook pipeline and CLI: parameters, papermill execution, reuse, loud failures, values read from the
executed notebook, each run's own kernel environment."""
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from lotlib.book.build import book_notebooks, book_parameters, parameter_section
from lotlib.book.pipeline import NotebookFailed, project_root, run_notebook
from lotlib.book.spec import read_spec
from lotlib.cli import main
from lotlib.models.bounds import ParameterError

from ..conftest import ROOT

NOTEBOOK = '''# %% [markdown]
# A tiny chapter.

# %% tags=["parameters"]
n = 2
label = "x"

# %%
result = n * 21
print(label, result)
'''


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "tiny.py"
    path.write_text(NOTEBOOK)
    return path


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


def test_parameters_cell_is_read(notebook):
    assert read_spec(notebook).defaults == {"n": 2, "label": "x"}


def test_a_wrapped_parameter_keeps_its_help_comment(tmp_path):
    path = tmp_path / "wrapped.py"
    path.write_text('# %% tags=["parameters"]\ndevice: str = (\n    "auto"  # where the model runs\n)\n')
    assert read_spec(path).parameters["device"].help == "where the model runs"


@pytest.mark.slow
def test_run_with_overrides_then_reuse(notebook, tmp_path):
    out = run_notebook(notebook, tmp_path / "out" / "tiny.ipynb", {"n": 3}, progress=False)
    nb = nbformat.read(out, 4)
    assert "x 63" in _printed(nb)
    assert nb.metadata["lotlib"]["parameters"] == {"n": 3, "label": "x"}
    stamp = out.stat().st_mtime_ns
    run_notebook(notebook, out, {"n": 3}, progress=False)
    assert out.stat().st_mtime_ns == stamp  # same source and parameters: reused
    run_notebook(notebook, out, {"n": 4}, progress=False)
    assert "x 84" in _printed(nbformat.read(out, 4))


@pytest.mark.slow
def test_unknown_parameter_is_refused_before_running(notebook, tmp_path):
    with pytest.raises(ParameterError, match="unknown parameter.*nn.*takes: n, label"):
        run_notebook(notebook, tmp_path / "o.ipynb", {"nn": 1}, progress=False)
    assert not (tmp_path / "o.ipynb").exists()


@pytest.mark.slow
def test_raising_cell_fails_loudly_and_keeps_partial(notebook, tmp_path):
    notebook.write_text(NOTEBOOK + "\n# %%\nraise ValueError('broken chapter')\n")
    with pytest.raises(NotebookFailed, match=r"tiny.py: cell \d+ raised ValueError: broken chapter"):
        run_notebook(notebook, tmp_path / "o.ipynb", progress=False)
    assert not (tmp_path / "o.ipynb").exists() and (tmp_path / "o.partial.ipynb").exists()


@pytest.mark.slow
def test_cli_run(notebook, tmp_path, capsys):
    out = tmp_path / "cli.ipynb"
    assert main(["run", str(notebook), "-p", "n", "5", "-p", "label", "y", "--out", str(out)]) == 0
    assert "y 105" in _printed(nbformat.read(out, 4))
    assert main(["run", str(notebook), "-p", "bogus", "1", "--out", str(out)]) == 2
    assert "unknown parameter" in capsys.readouterr().err


def test_cli_extract_and_errors(tiny_gpt2_dir, capsys):
    assert main(["extract", "--model", str(tiny_gpt2_dir), "--corpus", "gibberish", "--n-s", "3", "--n-k", "5"]) == 0
    assert "trajectories (3, 4, 64)" in capsys.readouterr().out
    assert main(["extract", "--model", "not-a-model"]) == 2
    assert "smollm2-135m" in capsys.readouterr().err
    assert main(["extract", "--model", str(tiny_gpt2_dir), "--n-k", "1"]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert main(["extract", "--model", str(tiny_gpt2_dir), "--n-k", "200"]) == 2  # 128 positions
    assert "context holds 128 positions; use --n-k <= 127" in capsys.readouterr().err  # a BOS counted: not known yet
    assert main(["extract", "--model", str(tiny_gpt2_dir), "--n-k", "200", "--no-bos"]) == 2
    assert "context holds 128 positions; use --n-k <= 128" in capsys.readouterr().err
    assert main(["extract", "--model", "smollm2-135m", "--n-k", "9000"]) == 2  # checked from the GGUF header
    assert "smollm2-135m's context holds 8192 positions" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # refused before the model loads
        main(["extract", "--model", str(tiny_gpt2_dir), "--batch-size", "0"])
    assert "--batch-size: must be a positive integer, got 0" in capsys.readouterr().err
    for untrained in (["--untrained"], []):  # the flag, or the name's prefix: refused by flag, before any load
        name = str(tiny_gpt2_dir) if untrained else "untrained:not-a-model"
        assert main(["extract", "--model", name, *untrained, "--reinit-from", "1"]) == 2
        assert "--reinit-from 1 re-initialises blocks of trained weights" in capsys.readouterr().err


def test_cli_help(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert all(word in text for word in ("extract", "run", "book", "LOTLIB_DATA_DIR"))


def test_book_lists_real_notebooks_with_valid_parameters():
    root = project_root(ROOT)
    names = book_notebooks(root)
    assert "b1_lines_of_thought" in names
    for name in names:
        source = root / "notebooks" / f"{name}.py"
        known = read_spec(source).defaults
        for quick in (False, True):
            assert set(book_parameters(root, name, quick)) <= set(known)
        assert set(parameter_section(root, "tests").get(name, {})) <= set(known), name


def test_execution_key_follows_only_imported_lotlib_modules():
    import lotlib
    from lotlib.book.spec import lotlib_dependencies

    def files(code):
        return {p.relative_to(Path(lotlib.__file__).parent).as_posix() for p in lotlib_dependencies(code)}

    summary_only = files("from lotlib.summary import record")
    assert "summary.py" in summary_only and not any(f.startswith("models/") for f in summary_only)
    assert {"models/loading.py", "models/view.py", "models/capture.py", "models/corpus.py"} <= files("import lotlib")
    probes = files("from lotlib.traveling_words import probes")
    assert {"traveling_words/probes.py", "traveling_words/__init__.py", "models/view.py"} <= probes
    assert not any(f.startswith("lines_of_thought/") for f in probes)


def test_a_checkout_moved_elsewhere_keeps_its_execution_keys(tmp_path):
    from lotlib.book.pipeline import execution_key

    def key(project: Path, code: str = NOTEBOOK + "import lotlib.stats\n", summary: str = "{}") -> str:
        (project / "notebooks").mkdir(parents=True, exist_ok=True)
        (project / "notebooks" / "tiny.py").write_text(code)
        (project / "build").mkdir(exist_ok=True)
        (project / "build" / "other.summary.json").write_text(summary)
        spec = read_spec(project / "notebooks" / "tiny.py")
        return execution_key(spec, {"n": 3}, None, [project / "build" / "other.summary.json"])

    here = key(tmp_path / "here")
    assert key(tmp_path / "moved" / "there") == here  # same notebook, modules and inputs elsewhere
    assert key(tmp_path / "edited", code=NOTEBOOK + "import lotlib.stats\nx = 1\n") != here
    assert key(tmp_path / "new-input", summary='{"values": {}}') != here


@pytest.mark.slow
def test_relative_output_path_keeps_summary_beside_the_notebook(tmp_path, monkeypatch):
    source = tmp_path / "chapter.py"
    source.write_text(NOTEBOOK + "\n# %%\nfrom lotlib.summary import record\nrecord({'result': result})\n")
    monkeypatch.chdir(tmp_path)
    run_notebook(source, "runs/chapter.ipynb", {"n": 1}, progress=False)
    summary = json.loads((tmp_path / "runs" / "chapter.summary.json").read_text())
    key = nbformat.read(tmp_path / "runs" / "chapter.ipynb", 4).metadata["lotlib"]["key"]
    seconds, peak = summary.pop("seconds"), summary.pop("peak_memory_gb")
    assert summary == {"notebook": "chapter", "parameters": {"n": 1, "label": "x"}, "values": {"result": 21},
                       "key": key, "model_revision": None}  # no `model` parameter: no model revision
    assert seconds["total"] > 0 and seconds["forward"] == 0.0
    assert 0 < peak < 2  # a fresh kernel that imported lotlib's summary alone


RECORDING = '''# %% tags=["parameters"]
skip: bool = False  # never call record
value: int = 1  # the value recorded

# %%
import os
from lotlib.summary import record

print("in book:", os.environ.get("LOTLIB_BOOK"), "threads:", os.environ.get("OMP_NUM_THREADS"))
if not skip:
    record({"value": value})
    record({"second": value + 1})
'''


@pytest.mark.slow
def test_values_are_read_from_the_executed_notebook(tmp_path, caplog, monkeypatch):
    source = tmp_path / "recording.py"
    source.write_text(RECORDING)
    out = tmp_path / "recording.ipynb"
    monkeypatch.delenv("LOTLIB_BOOK", raising=False)
    with caplog.at_level(logging.INFO):
        run_notebook(source, out, {"value": 5}, book=True, progress=False, threads=1)
    assert "in book: 1 threads: 1" in _printed(nbformat.read(out, 4))  # through the kernel's environment
    assert "LOTLIB_BOOK" not in os.environ  # never this process's
    assert json.loads(out.with_suffix(".summary.json").read_text())["values"] == {"value": 5, "second": 6}
    # papermill cannot parse annotated parameters lines, and warns about them; both warnings are silenced
    assert "Unable to parse line" not in caplog.text and "Passed unknown parameter" not in caplog.text
    with pytest.raises(NotebookFailed, match="recorded no values"):
        run_notebook(source, out, {"skip": True}, progress=False, keep_partial=False)
    assert not out.with_suffix(".summary.json").exists() and not out.with_suffix(".partial.ipynb").exists()


GLUING = '''# %% tags=["parameters"]
twice: bool = False  # glue one key twice

# %%
from lotlib.summary import glue

glue("value", 1.5)
if twice:
    glue("value", 2.5)

# %% [markdown]
# The value is {glue:text}`value:.1f`, the other {glue:text}`other`.
'''


@pytest.mark.slow
def test_a_quoted_value_glued_twice_or_never_fails_the_run(tmp_path):
    source = tmp_path / "gluing.py"
    source.write_text(GLUING)
    with pytest.raises(NotebookFailed, match="quoted but never glued: other"):
        run_notebook(source, tmp_path / "g.ipynb", progress=False)
    source.write_text(GLUING.replace(", the other {glue:text}`other`", ""))
    run_notebook(source, tmp_path / "g.ipynb", progress=False)
    with pytest.raises(NotebookFailed, match="glued twice: value"):
        run_notebook(source, tmp_path / "g.ipynb", {"twice": True}, progress=False)


@pytest.mark.slow
def test_a_summary_written_by_hand_is_not_taken_for_the_run(tmp_path):
    source = tmp_path / "recording.py"
    source.write_text(RECORDING)
    out = tmp_path / "recording.ipynb"
    run_notebook(source, out, {"value": 2}, progress=False)
    summary = out.with_suffix(".summary.json")
    summary.write_text(json.dumps({"values": {"value": 99}, "key": "another execution"}))
    stamp = out.stat().st_mtime_ns
    run_notebook(source, out, {"value": 2}, progress=False)  # not current: the summary is not its own
    assert out.stat().st_mtime_ns != stamp
    assert json.loads(summary.read_text())["values"]["value"] == 2


@pytest.mark.slow
def test_two_chapters_in_threads_of_one_process_get_their_own_summaries(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    source = tmp_path / "recording.py"
    source.write_text(RECORDING)
    outs = [tmp_path / f"run{i}" / "recording.ipynb" for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda i: run_notebook(source, outs[i], {"value": 10 * i}, progress=False), range(2)))
    assert [json.loads(o.with_suffix(".summary.json").read_text())["values"]["value"] for o in outs] == [0, 10]


@pytest.mark.slow
def test_a_bad_value_fails_fast_naming_the_parameter_without_heavy_imports():
    code = ("import sys; from lotlib.cli import main; code = main(['run', 'b1_lines_of_thought', '-p', 'n_s', 'abc']); "
            "print(code, sorted({'torch', 'transformers', 'papermill'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.split()[0] == "2" and done.stdout.strip().endswith("[]")  # no torch, no papermill
    error = done.stderr.strip()
    assert len(error.splitlines()) == 1 and "parameter n_s expects Pilots" in error and "'abc'" in error


@pytest.mark.slow
def test_cli_errors_are_one_line_and_debug_shows_the_traceback(notebook, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = ["run", str(notebook), "--out", str(blocker / "x.ipynb")]  # its folder cannot be created
    assert main(args) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and str(blocker) in error
    with pytest.raises(OSError):
        main([*args, "--debug"])


def test_model_flags_set_the_notebooks_parameters_and_are_checked_before_any_model_work(capsys):
    assert main(["run", "a4_a5_noun_probes", "--model", "gemma3-270m", "-p", "blocks", "[0, 29]"]) == 2
    error = capsys.readouterr().err.strip()
    assert "parameter blocks = 29 is out of range: gemma3-270m has 18 blocks" in error and "0..17" in error
    assert main(["run", "report", "--model", "gemma3-270m"]) == 2
    assert "report.py has no parameter model" in capsys.readouterr().err
    assert main(["run", "b4_residuals", "--quick", "--dtype", "float16", "-p", "n_s", "abc"]) == 2
    assert "parameter n_s expects" in capsys.readouterr().err  # --quick's n_s: D is overridden by -p


@pytest.mark.slow
def test_a_finished_kernel_is_shut_down_without_an_interrupt():
    import asyncio
    import signal

    from lotlib.book.kernel import LocalKernelManager

    async def lifetime() -> list:
        manager = LocalKernelManager(kernel_name="python3")
        sent = []
        send = manager._async_signal_kernel

        async def record(signum):
            sent.append(signum)
            await send(signum)

        manager._async_signal_kernel = record
        await manager.start_kernel()
        await manager.interrupt_kernel()  # a running cell can still be interrupted
        await manager.shutdown_kernel()
        return sent

    assert asyncio.run(lifetime()) == [signal.SIGINT]  # one interrupt: the one asked for, none at shutdown


FORWARDS = '''# %% tags=["parameters"]
model: str = ""

# %%
import lotlib
from lotlib.models.capture import capture

lm = lotlib.load_model(model, device="cpu")
X = capture(lm, [list(range(1, 97))] * 128, batch_size=32, progress=False)  # passes of tens of ms: seconds are rounded to 0.01
'''


@pytest.mark.slow
def test_an_execution_keeps_its_seconds_in_all_and_in_forward_passes(tmp_path, tiny_gpt2_dir):
    """...and its kernel's peak resident memory, read from /proc while the kernel shuts down (Linux)."""
    from benchmarks.profile_book import book_profile
    from lotlib.book.build import _profile_words
    from lotlib.book.pipeline import executed_metadata, summary_path
    from lotlib.book.profile import profile_totals
    from lotlib.book.workers import Run, execute
    from lotlib.summary import read_summary

    source = tmp_path / "forwards.py"
    source.write_text(FORWARDS + "\nfrom lotlib.summary import record\nrecord({'n': len(X)})\n")
    output = tmp_path / "book" / "notebooks" / "forwards.ipynb"
    status = execute(Run("forwards", str(source), str(output), {"model": str(tiny_gpt2_dir)}))
    metadata = executed_metadata(output)
    seconds, peak = metadata["seconds"], metadata["peak_memory_gb"]
    assert status["status"] == "ok" and status["profile"] == {**seconds, "peak_memory_gb": peak}
    assert 0 < seconds["forward"] < seconds["total"]  # four batches through view.run, inside a kernel's run
    # a kernel that imported torch and ran a model holds more than 0.1 GB and, for a tiny model, less than 8
    assert 0.1 < peak < 8 and read_summary(summary_path(output))["peak_memory_gb"] == peak
    assert not output.with_suffix(".forward.log").exists() and not output.with_suffix(".memory.log").exists()
    table = book_profile({"tiny": tmp_path / "book"})
    assert table[["chapter", "total", "forward", "peak GB"]].values.tolist() == [
        ["forwards", seconds["total"], seconds["forward"], peak]]
    totals = profile_totals(table)
    assert totals["total_over_forward"] == pytest.approx(seconds["total"] / seconds["forward"])
    assert totals["peak_memory_gb"] == peak and totals["peak_chapter"] == "tiny / forwards"
    assert _profile_words({"total": 100.0, "forward": 28.0}) == ", forward passes 28 s (28%)" and _profile_words({}) == ""
    assert _profile_words({"total": 10.0, "forward": 1.0, "peak_memory_gb": 1.23}).endswith(", peak memory 1.2 GB")
    again = execute(Run("forwards", str(source), str(output), {"model": str(tiny_gpt2_dir)}))
    assert again["reused"] and "profile" not in again


def test_no_chapter_glues_a_key_that_it_also_records():
    """`record` glues every value it records, so a literal key both passed to `glue(...)` and recorded would be
    glued twice and fail the run (as the report's `model_revision` once did, caught only by the slow book
    build). Checked statically on every notebook: literal `glue("key", ...)` against literal `record({...})` keys."""
    import ast

    for source in sorted((ROOT / "notebooks").glob("*.py")):
        glued, recorded = set(), set()
        for node in ast.walk(ast.parse(source.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                continue
            first = node.args[0]
            if node.func.id == "glue" and isinstance(first, ast.Constant):
                glued.add(first.value)
            elif node.func.id == "record" and isinstance(first, ast.Dict):
                recorded |= {k.value for k in first.keys if isinstance(k, ast.Constant)}
        assert not glued & recorded, f"{source.name}: glued and recorded: {sorted(glued & recorded)}"


NEEDING = '''# ---
# jupyter:
#   needs: [causal]
# ---

# %% [markdown]
# # A chapter of the last token
#
# **What you will see.** Where the last token goes.
#
# On this run the value is {glue:text}`value`.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id

# %%
raise RuntimeError("a chapter that does not apply ran")
'''

NEEDING_CLAIMS = """
- id: N-line
  paper: B
  nature: finding
  claim: "The last token draws a line"
  paper_value: "about 0.5"
  key: line
  test: {kind: paper}
  null:
    - {key: line_cloud, name: "a cloud"}
  as_paper: {key: line_paper, printed: "0.5", scale: "share", protocol: "the paper's"}
"""


SHORT = """# %% [markdown]
# # A chapter of many pilots
#
# **What you will see.** A basis of the whole width.

# %% tags=["parameters"]
model: str = "smollm2-135m"  # embedded name, local folder or hub id
n_k: "Tokens" = 50  # tokens per pseudo-sentence
n_s: "HeldOutBasis | None" = None  # pseudo-sentences of Walden read (None: all)
n_s_paper: "PaperPilots" = "60D"  # a subset drawn whole

# %%
print("ran")
"""


@pytest.mark.slow
def test_a_chapter_that_needs_more_of_walden_than_there_is_is_a_page_saying_so(tmp_path, tiny_gpt2_dir, monkeypatch):
    """A held-out basis needs 2 D pseudo-sentences (128 at the tiny model's width 64); Walden, counted as a
    tokenizer that cuts it into 100 pseudo-sentences of 50 tokens would (GPT-2's gives about 2,900): the page
    says how many it gives and how many the parameter needs, and nothing runs; the same chapter at 10 tokens
    (five times the pseudo-sentences) runs, and so does the first once Walden is long enough (the page is part of
    the execution's key). A paper-sized count asks for no more than D: where Walden is shorter it takes all of
    it (`authors_pilots`)."""
    from lotlib.book import pipeline
    from lotlib.book.parameters import walden_demand
    from lotlib.models.corpus import walden
    from lotlib.models.sources import gpt2_tokenizer

    source = _one_chapter_project(tmp_path, "short", SHORT)
    declared = read_spec(source).parameters
    caps = {"model": "m", "n_k": 50, "n_s": None, "n_s_paper": None}
    assert walden_demand(declared, caps, 64) == ("n_s", None, 128)  # a held-out basis: 2 D
    assert walden_demand(declared, {**caps, "n_s_paper": "60D"}, 64) == ("n_s", None, 128)
    assert pipeline.walden_tokens(str(tiny_gpt2_dir)) // 50 == len(walden(gpt2_tokenizer(), n_k=50).ids) > 128
    monkeypatch.setattr(pipeline, "walden_tokens", lambda model: 100 * 50)
    out = tmp_path / "out" / "short.ipynb"
    run_notebook(source, out, {"model": str(tiny_gpt2_dir)}, progress=False)
    page = nbformat.read(out, 4)
    text = "\n".join(c.source for c in page.cells)
    assert "Not applicable to this model" in text and "ran" not in _printed(page)
    assert "Walden cuts into 100 pseudo-sentences of 50 tokens" in text and "needs at least 128" in text
    values = json.loads(out.with_suffix(".summary.json").read_text())["values"]
    assert all("Walden cuts into" in v["not_applicable"] for v in values.values())
    ran = run_notebook(source, tmp_path / "at-10-tokens" / "short.ipynb", {"model": str(tiny_gpt2_dir), "n_k": 10},
                       progress=False)
    assert "ran" in _printed(nbformat.read(ran, 4))
    # the page is kept only while the corpus is short: once it is not (a longer corpus, code that asks for
    # fewer), the same run with the same parameters executes instead of resuming the page
    reused = run_notebook(source, out, {"model": str(tiny_gpt2_dir)}, progress=False)
    assert "ran" not in _printed(nbformat.read(reused, 4))
    monkeypatch.setattr(pipeline, "walden_tokens", lambda model: 200 * 50)
    rerun = run_notebook(source, out, {"model": str(tiny_gpt2_dir)}, progress=False)
    assert "ran" in _printed(nbformat.read(rerun, 4))


def _one_chapter_project(root: Path, name: str, code: str) -> Path:
    """A project at `root` with one chapter `name` (`code`) and the claims `NEEDING_CLAIMS`: the chapter's path."""
    for folder in ("book/claims", "notebooks"):
        (root / folder).mkdir(parents=True)
    (root / "book" / "_config.yml").write_text("title: t\n")
    (root / "book" / "claims" / f"{name}.yml").write_text(NEEDING_CLAIMS)
    source = root / "notebooks" / f"{name}.py"
    source.write_text(code)
    return source


def test_the_header_says_what_a_chapter_needs_of_a_model():
    from lotlib.book.spec import header_needs

    assert header_needs(NEEDING.splitlines()) == ("causal",)
    assert header_needs(NOTEBOOK.splitlines()) == ()
    assert read_spec(ROOT / "notebooks" / "b4_residuals.py").needs == ("causal",)
    assert read_spec(ROOT / "notebooks" / "a1_geometry.py").needs == ()


@pytest.mark.slow
def test_a_chapter_that_needs_what_the_model_lacks_is_a_page_saying_so(tmp_path, tiny_bert_dir, tiny_gpt2_dir):
    """On an encoder, a chapter that needs a causal LM runs none of its cells: its page keeps its opening
    (less the paragraph quoting run values), says why in one line, and records every key its claims read
    (value, null, the paper protocol's) as not applicable. On a causal LM the same chapter runs (and here
    raises)."""
    source = _one_chapter_project(tmp_path, "needing", NEEDING)
    out = tmp_path / "out" / "needing.ipynb"
    run_notebook(source, out, {"model": str(tiny_bert_dir)}, progress=False)
    values = json.loads(out.with_suffix(".summary.json").read_text())["values"]
    assert set(values) == {"line", "line_cloud", "line_paper"}
    assert all("bert is an encoder" in v["not_applicable"] for v in values.values())
    page = nbformat.read(out, 4)
    text = "\n".join(c.source for c in page.cells)
    assert "Where the last token goes" in text and "{glue" not in text
    assert "Not applicable to this model" in text and "ran" not in _printed(page)
    from lotlib.verdicts import judge, load_claims

    (claim,) = load_claims(tmp_path / "book" / "claims")
    row = judge(claim, values, {})
    assert row["against paper"] == "not applicable" and row["outcome"] == "not applicable"
    assert row["verdict"] == "not applicable"
    with pytest.raises(NotebookFailed, match="a chapter that does not apply ran"):
        run_notebook(source, tmp_path / "gpt2.ipynb", {"model": str(tiny_gpt2_dir)}, progress=False,
                     keep_partial=False)


RESUMING = '''# %% tags=["parameters"]
log: str = "calls.txt"  # one line per step the statistic computes

# %%
import os
from pathlib import Path

import numpy as np

from lotlib.summary import record
from lotlib.lines_of_thought.resampling import resample_rows

stop_at = int(os.environ.get("LOTLIB_TEST_STOP_AT", "-1"))


def statistic(pilots, rng):
    done = Path(log).read_text().count("\\n") if Path(log).exists() else 0
    if done == stop_at:
        raise RuntimeError("stopped")
    with open(log, "a") as f:
        f.write(f"{pilots.sum()}\\n")
    return float(np.mean(pilots) + rng.normal())


record({"rows": resample_rows(statistic, 10, n_rep=5, seed=0)})
'''


@pytest.mark.slow
def test_a_stopped_run_resumes_its_resamples_where_it_stopped(tmp_path, monkeypatch):
    """A run stopped in the middle of a resampling loop keeps the steps it finished (`<output>.checkpoints/<key>`);
    the next run with the same key computes only the others, gives the values an unstopped run gives, and
    removes the checkpoints when it succeeds."""
    from lotlib.lines_of_thought.resampling import resample_rows

    source, out, log = tmp_path / "resuming.py", tmp_path / "resuming.ipynb", tmp_path / "calls.txt"
    source.write_text(RESUMING)
    monkeypatch.setenv("LOTLIB_TEST_STOP_AT", "3")
    with pytest.raises(NotebookFailed, match="stopped"):
        run_notebook(source, out, {"log": str(log)}, progress=False, keep_partial=False)
    assert log.read_text().count("\n") == 3
    kept = list(out.with_suffix(".checkpoints").glob("*/*/step-*.pkl"))
    assert sorted(p.name for p in kept) == ["step-0.pkl", "step-1.pkl", "step-2.pkl"]
    monkeypatch.delenv("LOTLIB_TEST_STOP_AT")
    run_notebook(source, out, {"log": str(log)}, progress=False)
    assert log.read_text().count("\n") == 6  # steps 3, 4 and 5 only
    expected = resample_rows(lambda p, rng: float(np.mean(p) + rng.normal()), 10, n_rep=5, seed=0)
    assert json.loads(out.with_suffix(".summary.json").read_text())["values"]["rows"] == pytest.approx(expected)
    assert not out.with_suffix(".checkpoints").exists()
