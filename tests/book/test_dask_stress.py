"""Sweeps and a small book on fresh Dask clusters of multi-thread workers: every run ok while the workers'
threads are still importing, and no worker thread builds a Python AST for lotlib's sake."""
import ast
import json

import pandas as pd
import pytest

from lotlib.book.build import BookOptions, build_book
from lotlib.book.sweep import run_sweep

NOTEBOOK = '''# %% tags=["parameters"]
n = 1
scale = 0.5

# %%
from lotlib.summary import record

record({"value": n * scale, "ran_n": n, "ran_scale": scale})
'''
GRID = {"n": [1, 2, 3, 4, 5, 6], "scale": [0.5, 1.0]}  # 12 runs


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "light.py"
    path.write_text(NOTEBOOK)
    return path


def _fresh_cluster():
    """Two worker processes of four threads each, started now (nothing imported or parsed in them yet)."""
    import distributed

    return distributed.LocalCluster(n_workers=2, threads_per_worker=4, processes=True, host="127.0.0.1",
                                    dashboard_address=None)


@pytest.mark.slow
def test_sweeps_on_fresh_clusters_of_four_thread_workers_run_every_run(notebook, tmp_path):
    pytest.importorskip("distributed")
    statuses = []
    for attempt in range(3):
        with _fresh_cluster() as cluster:
            table = run_sweep(notebook, GRID, tmp_path / f"sweep{attempt}", scheduler=cluster.scheduler_address,
                              progress=False)
        failed = table[table["status"] != "ok"]
        assert failed.empty, failed["error"].tolist()
        assert all((table["ran_n"] == table["n"]) & (table["ran_scale"] == table["scale"]))
        statuses += list(table["status"])
    assert statuses == ["ok"] * 36


CHAPTERS = 8
BOOK_CONFIG = """title: Stress
author: lotlib
only_build_toc_files: true
execute:
  execute_notebooks: "off"
sphinx:
  config:
    suppress_warnings: ["mystnb.unknown_mime_type"]
"""


def _chapter(number: int) -> str:
    """A light chapter: a title, a parameters cell and one recorded value, `number * scale`."""
    return f"# %% [markdown]\n# # Chapter {number}\n\n" + NOTEBOOK.replace("n = 1", f"n = {number}")


@pytest.fixture
def small_book(tmp_path):
    """A project of `CHAPTERS` light chapters: book/ (config, toc, intro, no parameters, no claims) and
    notebooks/."""
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "book" / "claims").mkdir(parents=True)
    names = [f"ch{number:02d}" for number in range(1, CHAPTERS + 1)]
    for number, name in enumerate(names, 1):
        (root / "notebooks" / f"{name}.py").write_text(_chapter(number))
    toc = "format: jb-book\nroot: intro\nchapters:\n" + "".join(f"  - file: notebooks/{n}\n" for n in names)
    (root / "book" / "_toc.yml").write_text(toc)
    (root / "book" / "_config.yml").write_text(BOOK_CONFIG)
    (root / "book" / "intro.md").write_text("# Stress\n\nLight chapters on a fresh Dask cluster.\n")
    (root / "book" / "parameters.yml").write_text("")
    return root


@pytest.mark.slow
def test_small_books_on_fresh_clusters_of_four_thread_workers_run_every_chapter(small_book, tmp_path):
    """The whole `build_book` path, strict HTML build included, three times, each on a fresh cluster into a
    fresh build folder; its chapters need no model, so none is loaded (no null book)."""
    pytest.importorskip("distributed")
    for attempt in range(3):
        with _fresh_cluster() as cluster:  # a failed chapter raises, naming it
            html = build_book(small_book, BookOptions(quick=True, null=False, build=tmp_path / f"build{attempt}"),
                              scheduler=cluster.scheduler_address)
        for number in range(1, CHAPTERS + 1):
            summary = json.loads((html.parents[1] / "notebooks" / f"ch{number:02d}.summary.json").read_text())
            assert summary["values"] == {"value": number * 0.5, "ran_n": number, "ran_scale": 0.5}
            assert (html / "notebooks" / f"ch{number:02d}.html").exists()


def _record_parses():
    """In a Dask worker: wrap `ast.parse` and `compile(..., PyCF_ONLY_AST)` so that each call made in one of
    the worker's task threads is kept with the stack that made it (`_parses_seen` reads them)."""
    import builtins
    import threading
    import traceback

    seen, lock = [], threading.Lock()
    parse, compile_ = ast.parse, builtins.compile

    def keep():
        if "Dask-Default-Threads" in threading.current_thread().name:
            with lock:
                seen.append("".join(traceback.format_stack()[:-2]))  # less the recorder's frames

    def recorded_parse(*args, **kwargs):
        keep()
        return parse(*args, **kwargs)

    def recorded_compile(source, filename, mode, flags=0, *args, **kwargs):
        if flags & ast.PyCF_ONLY_AST:
            keep()
        return compile_(source, filename, mode, flags, *args, **kwargs)

    ast.parse, builtins.compile = recorded_parse, recorded_compile
    builtins._lotlib_parses_seen = seen


def _parses_seen() -> list[str]:
    import builtins

    return list(builtins._lotlib_parses_seen)


@pytest.mark.slow
def test_no_worker_thread_parses_python_during_a_sweep(notebook, tmp_path):
    distributed = pytest.importorskip("distributed")
    with _fresh_cluster() as cluster, distributed.Client(cluster.scheduler_address) as client:
        client.run(_record_parses)
        table = run_sweep(notebook, GRID, tmp_path / "sweep", scheduler=cluster.scheduler_address, progress=False)
        seen = [stack for stacks in client.run(_parses_seen).values() for stack in stacks]
    assert list(table["status"]) == ["ok"] * 12 and pd.notna(table["value"]).all()
    ours = [stack for stack in seen if "/lotlib/" in stack]
    assert ours == [], f"{len(ours)} parses, e.g.\n" + "\n".join(sorted(set(ours))[:2])
    assert seen == [], f"{len(seen)} parses, e.g.\n" + "\n".join(sorted(set(seen))[:2])
