"""Build the book of a model: execute every chapter notebook (cached), then Jupyter Book 1 with warnings
as errors, into `build/book/<model>/`."""

from __future__ import annotations

import filecmp
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from ..models.data import DATA_FILES, data_path
from ..models.devices import DeviceRequest
from ..models.sources import DEFAULT_MODEL, UNTRAINED, split_name
from ..storage.atomic import write_text_atomic
from ..storage.paths import package_file
from ..verdicts import PAPER_NULL_MODEL, load_claims, paper_nulled
from .parameters import check_parameters
from .pipeline import NotebookFailed, read_json, summary_path
from .profile import profile_totals, runs_profile
from .spec import NotebookSpec, read_spec
from .workers import DONE, STARTED, Run, run_pool


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


def parameter_section(root: Path, section: str) -> dict[str, dict]:
    """One section of `book/parameters.yml` (`quick`, `tests`): chapter name -> its parameters."""
    return {
        name: dict(params or {})
        for name, params in (_parameters_table(root).get(section) or {}).items()
    }


def book_parameters(
    root: Path, name: str, quick: bool, overrides: dict[str, dict] | None = None
) -> dict:
    """Parameters of notebook `name` in the book: its own defaults in the full build, `book/parameters.yml`'s
    `quick:` entry with `quick`, then its entry of `overrides` (chapter name -> parameters, e.g. the
    `tests:` section the test suite's books use)."""
    params = parameter_section(root, "quick").get(name, {}) if quick else {}
    return params | (overrides or {}).get(name, {})


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


def model_slug(model: str) -> str:
    """A folder name for a model's book: `untrained:smollm2-135m` -> `untrained-smollm2-135m`, a hub id
    `org/name` -> `org--name`, a local folder -> its name and a short hash of its path."""
    if Path(model).expanduser().is_dir():
        folder = Path(model).expanduser().resolve()
        return f"{folder.name}-{hashlib.sha256(str(folder).encode()).hexdigest()[:8]}"
    return re.sub(
        r"[^A-Za-z0-9_.-]+", "-", model.replace("/", "--").replace(":", "-")
    ).strip("-")


def book_folder(root: Path, model: str, quick: bool, build: Path | None = None) -> Path:
    """Where one model's book is built: `<build>/book/<model>/` (quick: `<build>/book-quick/<model>/`);
    `build` defaults to the project's `build/`."""
    return (
        (build or root / "build")
        / ("book-quick" if quick else "book")
        / model_slug(model)
    )


def null_model(model: str) -> str | None:
    """The default null of a model's findings: the same architecture with random weights (None for a model
    that already is an untrained variant)."""
    return None if split_name(model)[1] else f"{UNTRAINED}{model}"


def chapters_with_findings(root: Path, paper_null: bool = False) -> set[str]:
    """The chapters that have at least one claim of nature `finding` (the ones the null book runs); with
    `paper_null`, at least one finding judged against the paper's architecture (`report.paper_nulled`)."""
    return {
        c["notebook"]
        for c in load_claims(root / "book" / "claims")
        if (paper_nulled(c) if paper_null else c["nature"] == "finding")
    }


PAPER_NULL_PARAMETER = "paper_null_summaries_dir"  # the report's parameter that reads the paper's null book


def null_books(model: str, null: bool) -> dict[str, str]:
    """The null books of `model`'s findings, by the report's parameter that reads them: its untrained variant
    (`null_summaries_dir`) and the paper's architecture (`paper_null_summaries_dir`); none for an untrained
    model or without `null`."""
    nulled = null_model(model) if null else None
    if nulled is None:
        return {}
    return {"null_summaries_dir": nulled, PAPER_NULL_PARAMETER: PAPER_NULL_MODEL}


@dataclass(frozen=True)
class Chapter:
    """One execution of a chapter: its notebook, the model whose book it belongs to, its parameters and the
    input files that join its execution key."""

    spec: NotebookSpec
    model: str
    output: Path
    parameters: dict
    depends_on: tuple[Path, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def label(self) -> str:
        return f"{self.model} / {self.name}"

    def run(self, threads: int | None) -> Run:
        """This chapter as a run of the worker pool."""
        return Run(
            self.label,
            str(self.spec.source),
            str(self.output),
            self.parameters,
            book=True,
            depends_on=tuple(map(str, self.depends_on)),
            threads=threads,
            spec=self.spec,
        )


@dataclass(frozen=True)
class BookOptions:
    """What one build of the book asks for: its model (None: the embedded default), small parameters (`quick`),
    where the model runs and in which dtype, whether the null books run, the build folder (None: the project's
    `build/`) and parameters per chapter on top of the book's (`overrides`, chapter name -> parameters)."""

    model: str | None = None
    quick: bool = False
    device: DeviceRequest = "auto"
    dtype: str = "float32"
    null: bool = True
    build: Path | None = None
    overrides: dict[str, dict] | None = None

    @property
    def book_model(self) -> str:
        """The model of the book itself (the null books run on its untrained variant)."""
        return self.model or DEFAULT_MODEL


def chapter_parameters(
    spec: NotebookSpec, root: Path, model: str, options: BookOptions
) -> dict:
    """The book's parameters of chapter `spec` in `model`'s book (`book_parameters`) with that model and the
    book's device and dtype for every chapter that declares them."""
    params = book_parameters(root, spec.name, options.quick, options.overrides)
    for key, value in (
        ("model", model),
        ("device", options.device),
        ("dtype", options.dtype),
    ):
        if key in spec.parameters and value != spec.parameters[key].default:
            params[key] = value
    return params


def plan_book(root: Path, options: BookOptions) -> tuple[list[Chapter], list[Chapter]]:
    """The executions of one book, planned once: its chapters and, with `options.null`, the chapters with
    findings on the null model and those with Traveling Words' judged findings on the paper's architecture
    (first wave), then the `run_last` chapters (the report and the atlas), which read the first wave's
    summaries (they join their keys when those are written). Each notebook is read once."""
    last = _parameters_table(root).get("run_last") or []
    order = execution_order(root)
    specs = {name: read_spec(chapter_source(root, name)) for name in order}
    model = options.book_model
    books, nulls = {model: order}, null_books(model, options.null)
    for parameter, null_book in nulls.items():
        findings = chapters_with_findings(root, parameter == PAPER_NULL_PARAMETER)
        chosen = [n for n in order if n in findings and n not in last]
        books[null_book] = sorted({*books.get(null_book, []), *chosen}, key=order.index)
    first, later = [], []
    for book, names in books.items():
        folder = book_folder(root, book, options.quick, options.build) / "notebooks"
        for name in names:
            spec = specs[name]
            params = chapter_parameters(spec, root, book, options)
            inputs = [
                *swept_dependencies(root, spec, params),
                *claims_files(root, name, last),
            ]
            chapter = Chapter(
                spec, book, folder / f"{name}.ipynb", params, tuple(inputs)
            )
            (later if name in last else first).append(chapter)
    return first, [_with_inputs(c, first, nulls, last) for c in later]


def claims_files(root: Path, name: str, last: list[str]) -> list[Path]:
    """The claims a chapter judges its values by (its closing table): `book/claims/<name>.yml`, and every
    claims file for a `last` chapter (the report and the atlas). They join its execution key: a changed test
    or bound re-executes the chapters that show it."""
    pattern = "*.yml" if name in last else f"{name}.yml"
    return sorted((root / "book" / "claims").glob(pattern))


def chapter_source(root: Path, name: str) -> Path:
    return root / "notebooks" / f"{name}.py"


def swept_dependencies(root: Path, spec: NotebookSpec, parameters: dict) -> list[Path]:
    """A chapter that runs another chapter (a `chapter` parameter: the sweeps page) depends on that chapter's
    source and the lotlib files it imports: they join the chapter's execution key."""
    if "chapter" not in spec.parameters:
        return []
    swept = parameters.get("chapter", spec.parameters["chapter"].default)
    return read_spec(chapter_source(root, swept)).dependencies


def _with_inputs(
    chapter: Chapter, first: list[Chapter], nulls: dict[str, str], last: list[str]
) -> Chapter:
    """A run_last chapter reads the summaries of the book's first wave (and the null books', `nulls`: the
    parameter that reads each -> its model, and every built book's for the atlas): their folders join its
    parameters (as paths relative to its own folder) and the summary files its execution key. The `last`
    chapters read none of each other's summaries."""
    declared, here = chapter.spec.parameters, chapter.output.parent
    params, inputs = dict(chapter.parameters), []

    def summaries(model: str) -> list[Path]:
        return [summary_path(c.output) for c in first if c.model == model]

    if "summaries_dir" in declared:
        params["summaries_dir"] = "."
        inputs += summaries(chapter.model)
    for parameter, null_book in nulls.items():
        if parameter in declared:
            null_folder = summary_path(
                next(c.output for c in first if c.model == null_book)
            ).parent
            params[parameter] = os.path.relpath(null_folder, here)
            inputs += summaries(null_book)
    if "books_dir" in declared:
        books = here.parents[1]
        params["books_dir"] = os.path.relpath(books, here)
        built = [
            p
            for p in sorted(books.glob("*/notebooks/*.summary.json"))
            if p.name.removesuffix(".summary.json") not in last
        ]
        inputs += sorted({*built, *(summary_path(c.output) for c in first)})
    return replace(
        chapter, parameters=params, depends_on=(*chapter.depends_on, *inputs)
    )


def _cells_done(chapter: Chapter) -> str:
    """ "cell i of n" from the partial notebook papermill saves as it goes ("" when there is none), and how
    many steps of its resumable loops the run has kept ("checkpoints": a chapter in a loop of hours shows
    them grow)."""
    import nbformat

    kept = sum(
        1 for _ in chapter.output.with_suffix(".checkpoints").glob("*/*/step-*.pkl")
    )
    steps = f", {kept} resample steps kept" if kept else ""
    try:
        nb = nbformat.read(chapter.output.with_suffix(".partial.ipynb"), 4)
    except (OSError, ValueError):
        return f" ({steps[2:]})" if steps else ""
    code = [c for c in nb.cells if c.cell_type == "code"]
    done = sum(1 for c in code if c.get("execution_count"))
    return f" (cell {done} of {len(code)}{steps})"


def _profile_words(profile: dict) -> str:
    """ ", forward passes 35 s (28%), peak memory 1.4 GB" from a run's profile (each part only when recorded);
    "" without one."""
    total, forward = profile.get("total"), profile.get("forward")
    words = ""
    if total and forward is not None:
        words += f", forward passes {_duration(forward)} ({forward / total:.0%})"
    if profile.get("peak_memory_gb"):
        words += f", peak memory {profile['peak_memory_gb']:.1f} GB"
    return words


def _duration(seconds: float) -> str:
    """ "45 s", or "2 min 05 s" from 90 s on (whole seconds first, so 119.7 s reads "2 min 00 s")."""
    whole = round(seconds)
    return f"{whole} s" if whole < 90 else f"{whole // 60} min {whole % 60:02d} s"


def say_now(line: str) -> None:
    """Print a progress line at once, also when stdout is a file or a pipe."""
    print(line, flush=True)


def longest_first(chapters: list[Chapter]) -> list[Chapter]:
    """The chapters in the order that lets a pool of workers finish soonest: those without a recorded time first
    (in the given order), then the others by the seconds their last execution took, longest first (the
    `seconds` its summary recorded, kept when the chapter's key has changed since). A chapter that takes hours
    then starts at once instead of after the short ones, and an interrupted build resumes it first."""

    def last_seconds(chapter: Chapter) -> float | None:
        recorded = read_json(summary_path(chapter.output)) or {}
        total = recorded.get("seconds", {}).get("total")
        return float(total) if isinstance(total, int | float) else None

    known = {c.label: last_seconds(c) for c in chapters}
    return sorted(
        chapters, key=lambda c: (known[c.label] is not None, -(known[c.label] or 0.0))
    )


def execute_chapters(
    chapters: list[Chapter],
    jobs: int,
    say=say_now,
    heartbeat: float = 60.0,
    scheduler: str | None = None,
) -> dict[str, dict]:
    """Execute (or reuse) the chapters on the worker pool, `jobs` at a time (or on the Dask cluster at
    `scheduler`), the longest first (`longest_first`). One line when a chapter starts and one when it ends,
    with its time; every `heartbeat` seconds a line naming the chapters still running, for how long, at which
    cell and with how many resample steps kept. A failed chapter does not stop the others; all failures are
    raised together. Returns the profile of each chapter executed (not reused), by label."""
    threads = max(1, (os.cpu_count() or 1) // jobs)
    chapters = longest_first(chapters)
    runs = {c.label: c for c in chapters}
    started, failures, profiles = {}, [], {}
    pool = run_pool([c.run(threads) for c in chapters], jobs, scheduler, heartbeat)
    for event, run, status in pool:
        if event == STARTED:
            started[run.label] = time.perf_counter()
            say(f"[lotlib book] {run.label}: started")
        elif event == DONE:
            started.pop(run.label, None)
            if status["status"] == "ok":
                cached = " (cached)" if status.get("reused") else ""
                if status.get("profile"):
                    profiles[run.label] = status["profile"]
                say(
                    f"[lotlib book] {run.label}: done in {_duration(status['seconds'])}"
                    f"{cached}{_profile_words(status.get('profile', {}))}"
                )
            else:
                failures.append(f"{run.label}: {status['error']}")
                say(f"[lotlib book] {run.label}: FAILED: {status['error']}")
        else:
            running = [
                f"{label} {_duration(time.perf_counter() - t)}{_cells_done(runs[label])}"
                for label, t in started.items()
            ]
            say("[lotlib book] still running: " + ", ".join(running))
    if failures:
        raise NotebookFailed(
            f"{len(failures)} chapter(s) failed:\n  " + "\n  ".join(failures)
        )
    return profiles


def build_words(profiles: dict[str, dict]) -> str:
    """What a build's executed chapters cost (label -> profile, `execute_chapters`): their chapter-seconds, how
    many of them in forward passes, and the largest peak memory of one chapter's kernel with its chapter."""
    totals = profile_totals(runs_profile(profiles))
    words = (
        f"{len(profiles)} chapter run(s) executed: {totals['total']:,.0f} chapter-seconds, "
        f"{totals['forward']:,.0f} of them in forward passes"
    )
    if totals["peak_chapter"]:
        words += (
            f"; largest kernel peak memory {totals['peak_memory_gb']:.2f} GB "
            f"({totals['peak_chapter']})"
        )
    return words


def stage_book(root: Path, stage: Path) -> Path:
    """Copy `root/book` into the book's folder `stage` with the site's assets and each chapter's .py (offered
    for download beside its page); returns `stage`."""
    sync_tree(root / "book", stage)
    for source in (root / "notebooks").glob("*.py"):
        copy_if_changed(source, stage / "_extra" / "notebooks" / source.name)
    # the site works offline: plotly.js and MathJax are bundled with it, not loaded from a CDN
    copy_if_changed(
        package_file("plotly", "package_data/plotly.min.js"),
        stage / "_static" / "plotly.min.js",
    )
    # MathJax not in _static: jupyter-book adds every script under _static to every page
    sync_tree(
        package_file("jupyter_server_mathjax", "static"), stage / "_extra" / "mathjax"
    )
    return stage


def run_jupyter_book(root: Path, stage: Path) -> None:
    """Build the HTML of `stage` strictly (every page again when the configuration changed); a failure raises
    with the Sphinx warnings and errors."""
    jb = Path(sys.executable).parent / "jupyter-book"
    stamp, config = (
        stage / "_build" / "lotlib-config.sha256",
        _config_fingerprint(root / "book"),
    )
    everything = ["--all"] if not stamp.exists() or stamp.read_text() != config else []
    log = stage / "_build" / "jupyter-book.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        result = subprocess.run(
            [
                str(jb),
                "build",
                str(stage),
                "--warningiserror",
                "--nitpick",
                "--keep-going",
                *everything,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if result.returncode != 0:
        raise NotebookFailed(
            f"jupyter-book build of {stage} failed (exit {result.returncode}) (whole log: {log}):\n"
            + sphinx_problems(log.read_text())
        )
    write_text_atomic(stamp, config)


def build_book(
    root: Path,
    options: BookOptions = BookOptions(),
    *,
    jobs: int = 2,
    say=say_now,
    scheduler: str | None = None,
) -> Path:
    """Execute every chapter on the book's model (`options`; default: the embedded default model) and, with
    `options.null`, the chapters with findings on its untrained variant (cached, `jobs` in parallel), then build
    that model's HTML book strictly into `build/book/<model>/` (quick: `build/book-quick/<model>/`;
    `options.build` replaces the project's `build/`). Chapters run on `jobs` local workers, or on the Dask
    cluster at `scheduler`. The test suite's books pass `parameter_section(root, "tests")` as `overrides`.
    Returns the HTML folder. Parameters that do not fit the model and data files that cannot be found fail before any chapter
    runs.

    `book/_toc.yml` decides which notebooks are chapters; `book/parameters.yml` gives each one's book and
    quick parameters and which notebooks run last (the report and the atlas read the others' summaries). The
    book's model, device and dtype reach every chapter that declares them. The chapters with findings also run
    on the model's untrained variant (the null book, `build/book/untrained-<model>/`): the report judges each
    finding against it. Traveling Words' judged findings also run on the paper's own architecture with random
    weights (`verdicts.PAPER_NULL_MODEL`, untrained GPT-2 small, `build/book/untrained-gpt2/`).
    """
    model = options.book_model
    first, later = plan_book(root, options)
    # every chapter's parameters fit the model before any run
    for chapter in first + later:
        check_parameters(chapter.spec.parameters, chapter.parameters, chapter.label)
    for name in DATA_FILES:  # the chapters read both texts: present, or downloaded and checked, before any runs
        data_path(name)
    stage = stage_book(root, book_folder(root, model, options.quick, options.build))
    say(
        f"[lotlib book] {model}: {len(first) + len(later)} chapter runs"
        + (
            f", {sum(c.model != model for c in first)} of them on the nulls "
            + " and ".join(dict.fromkeys(null_books(model, options.null).values()))
            if options.null
            else ""
        )
    )
    profiles = execute_chapters(first, jobs, say, scheduler=scheduler)
    # the report and the atlas read the first wave's summaries
    profiles |= execute_chapters(later, jobs, say, scheduler=scheduler)
    if profiles:
        say(f"[lotlib book] {model}: {build_words(profiles)}")
    say(f"[lotlib book] {model}: building the HTML pages")
    run_jupyter_book(root, stage)
    html = stage / "_build" / "html"
    say(f"[lotlib book] {model}: open {html / 'index.html'}")
    return html


def sphinx_problems(log: str, limit: int = 30) -> str:
    """The WARNING and ERROR lines of a Sphinx log, color codes removed (the last `limit` lines of the log when
    it has none): they name the page or docstring at fault."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in log.splitlines()]
    problems = [
        line for line in lines if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", line)
    ]
    return "\n".join(problems[:limit] or lines[-limit:])


def _config_fingerprint(book: Path) -> str:
    """Hash of what shapes every page (configuration, toc, extensions): when it changes, rebuild all pages."""
    files = [
        book / "_config.yml",
        book / "_toc.yml",
        *sorted((book / "_ext").glob("*.py")),
    ]
    return hashlib.sha256(
        b"".join(p.name.encode() + p.read_bytes() for p in files)
    ).hexdigest()
