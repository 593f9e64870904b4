"""Build the book: execute every chapter notebook (cached), then Jupyter Book 1 with warnings as errors.

`book/_toc.yml` decides which notebooks are chapters; `book/parameters.yml` gives each one's book and
quick parameters and which notebooks run last (the report reads the others' summaries).
"""
from __future__ import annotations

import filecmp
import hashlib
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import yaml
from tqdm.auto import tqdm

from ..storage.atomic import write_text_atomic
from ..storage.paths import package_file
from .pipeline import NotebookFailed, run_notebook


def book_notebooks(root: Path) -> list[str]:
    """Names of the notebooks the book's table of contents lists (`notebooks/<name>` entries)."""
    names: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            entry = node.get("file", "")
            if entry.startswith("notebooks/"):
                names.append(entry.split("/", 1)[1])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load((root / "book" / "_toc.yml").read_text()))
    return names


def _parameters_table(root: Path) -> dict:
    return yaml.safe_load((root / "book" / "parameters.yml").read_text()) or {}


def book_parameters(root: Path, name: str, quick: bool) -> dict:
    """Parameters of notebook `name` in the book (`book/parameters.yml`: `book:` and `quick:`)."""
    table = _parameters_table(root)
    params = dict((table.get("book") or {}).get(name) or {})
    if quick:
        params.update((table.get("quick") or {}).get(name) or {})
    return params


def execution_order(root: Path) -> list[str]:
    """Chapters in table-of-contents order, those listed under `run_last:` moved to the end."""
    last = _parameters_table(root).get("run_last") or []
    names = book_notebooks(root)
    return [n for n in names if n not in last] + [n for n in names if n in last]


def copy_if_changed(source: Path, dest: Path) -> None:
    """Copy a file unless `dest` already has the same content (keeps Sphinx's incremental cache warm)."""
    if not dest.exists() or not filecmp.cmp(source, dest, shallow=False):
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


def sync_tree(source: Path, target: Path) -> None:
    """Copy every file of `source` into `target` with `copy_if_changed`."""
    for path in source.rglob("*"):
        if path.is_file():
            copy_if_changed(path, target / path.relative_to(source))


def _execute_chapter(source: Path, output: Path, parameters: dict, depends_on: list[Path], threads: int) -> float:
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)  # the kernel inherits them: parallel chapters share the cores
    start = time.perf_counter()
    run_notebook(source, output, parameters, book=True, progress=False, depends_on=depends_on)
    return time.perf_counter() - start


def execute_chapters(root: Path, stage: Path, quick: bool, jobs: int) -> None:
    """Execute (or reuse) every chapter into `stage/notebooks`, `jobs` at a time; `run_last` ones after."""
    executed = stage / "notebooks"
    last = _parameters_table(root).get("run_last") or []
    order = execution_order(root)
    waves = [[n for n in order if n not in last], [n for n in order if n in last]]
    threads = max(1, (os.cpu_count() or 1) // jobs)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        for wave in waves:
            futures = {}
            for name in wave:
                inputs = [p for p in sorted(executed.glob("*.summary.json")) if name in last
                          and not p.name.startswith(f"{name}.")]
                futures[pool.submit(_execute_chapter, root / "notebooks" / f"{name}.py", executed / f"{name}.ipynb",
                                    book_parameters(root, name, quick), inputs, threads)] = name
            bar = tqdm(as_completed(futures), total=len(futures), desc="chapters", unit="notebook")
            for future in bar:
                bar.write(f"[lotlib book] {futures[future]}: {future.result():.0f} s")


def build_book(root: Path, quick: bool = False, jobs: int = 2) -> Path:
    """Execute every chapter notebook (cached, `jobs` in parallel), then build the HTML book strictly.
    Returns the HTML folder."""
    stage = root / "build" / ("book-quick" if quick else "book")
    sync_tree(root / "book", stage)
    # the site works offline: plotly.js and MathJax are bundled with it, not loaded from a CDN
    copy_if_changed(package_file("plotly", "package_data/plotly.min.js"), stage / "_static" / "plotly.min.js")
    sync_tree(package_file("jupyter_server_mathjax", "static"), stage / "_extra" / "mathjax")  # not in _static:
    # jupyter-book adds every script under _static to every page
    execute_chapters(root, stage, quick, jobs)
    jb = Path(sys.executable).parent / "jupyter-book"
    stamp, config = stage / "_build" / "lotlib-config.sha256", _config_fingerprint(root / "book")
    everything = ["--all"] if not stamp.exists() or stamp.read_text() != config else []
    result = subprocess.run([str(jb), "build", str(stage), "--warningiserror", "--nitpick", "--keep-going",
                             *everything])
    if result.returncode != 0:
        raise NotebookFailed(f"jupyter-book build of {stage} failed (exit {result.returncode}); "
                             f"the Sphinx warnings above say which page")
    write_text_atomic(stamp, config)
    return stage / "_build" / "html"


def _config_fingerprint(book: Path) -> str:
    """Hash of what shapes every page (configuration, toc, extensions): when it changes, rebuild all pages."""
    files = [book / "_config.yml", book / "_toc.yml", *sorted((book / "_ext").glob("*.py"))]
    return hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in files)).hexdigest()
