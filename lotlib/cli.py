"""The `lotlib` command: extract trajectories, run one notebook, sweep it over a grid, build the book, copy the
chapters out."""

from __future__ import annotations

import argparse
import signal
import sys
import typing
from pathlib import Path

import yaml

from . import arguments
from .book.build import BookOptions, book_parameters, build_book
from .book.export import export_notebooks
from .book.parameters import Dtype
from .book.pipeline import project_root, run_notebook
from .book.spec import read_spec
from .book.sweep import load_grid, run_sweep
from .models import corpus
from .models.bounds import check_context, check_reinit, model_shape
from .models.sources import split_name
from .project import bundled_project

EPILOG = """examples:
  lotlib extract --model smollm2-135m --n-k 50          # all of Walden into the trajectory cache
  lotlib run b1_lines_of_thought --model gemma3-270m -p n_pilots 300
  lotlib run b4_residuals --quick --device cuda --dtype bfloat16
  lotlib sweep b1_lines_of_thought -p n_k 10,25,50 -p seed 0,1 --quick --plot held_out_share_quarter_d_last_layer
  lotlib book --quick                                   # small parameters, as CI builds it
  lotlib notebooks my-chapters --quick                  # the chapters as .py and .ipynb, to edit
environment: LOTLIB_DATA_DIR (walden.txt, common_nouns.txt), LOTLIB_CACHE_DIR (models, trajectories)
errors end in one line; --debug shows the traceback"""


DTYPES = list(typing.get_args(Dtype))


def _model_parameters(args, source: Path) -> dict:
    """The --model/--device/--dtype given, as parameters of notebook `source`; one it does not declare fails."""

    given = {
        name: getattr(args, name)
        for name in ("model", "device", "dtype")
        if getattr(args, name) is not None
    }
    arguments.checked_device(given.get("device"))
    if args.revision is not None:
        default = read_spec(source).defaults.get("model")
        given["model"] = arguments.pinned(args.model or default, args.revision)
    missing = sorted(set(given) - set(read_spec(source).parameters))
    if missing:
        raise ValueError(
            f"{source.name} has no parameter {', '.join(missing)}: drop --{' --'.join(missing)} "
            f"(it does not load a model)"
        )
    return given


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _device_options(device: str | None, dtype: str | None) -> argparse.ArgumentParser:
    """--device and --dtype, shared by every command that loads a model (None: the notebook's own)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--device",
        default=device,
        help="where the model runs: auto, cpu, cuda, mps (default auto)",
    )
    options.add_argument(
        "--dtype",
        default=dtype,
        choices=DTYPES,
        help="the model's weights (default float32)",
    )
    return options


def _model_options(default_model: str) -> argparse.ArgumentParser:
    """--model, --revision, --device and --dtype: the notebook parameters `model`, `device` and `dtype`."""
    options = argparse.ArgumentParser(
        add_help=False, parents=[_device_options(None, None)]
    )
    options.add_argument(
        "--model",
        default=None,
        help="run on this model: an embedded name, a local folder or a "
        f"hub id (default: {default_model})",
    )
    options.add_argument(
        "--revision",
        default=None,
        help="a hub model's revision: a commit hash, branch or tag (the same as "
        "--model ID@REVISION; default: main)",
    )
    return options


def _notebook_options(values: str, values_help: str) -> argparse.ArgumentParser:
    """The notebook, its -p overrides and --quick, shared by `run` and `sweep`."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "notebook", help="a path to a Jupytext .py notebook, or a name in notebooks/"
    )
    options.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", values),
        help=values_help,
    )
    options.add_argument(
        "--quick",
        action="store_true",
        help="start from the book's quick parameters of this notebook",
    )
    return options


def _debug_option() -> argparse.ArgumentParser:
    """--debug after the command too (lotlib run NAME --debug), hidden from its help."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    return options


def _extract_command(commands) -> None:
    """`lotlib extract`: capture trajectories into the disk cache."""
    ex = commands.add_parser(
        "extract",
        help="capture trajectories into the disk cache",
        parents=[_device_options("auto", "float32"), _debug_option()],
    )
    ex.add_argument(
        "--model", default="smollm2-135m", help="embedded name, local folder or hub id"
    )
    ex.add_argument("--corpus", choices=["walden", "gibberish"], default="walden")
    ex.add_argument(
        "--n-k", type=int, default=50, help="tokens per pseudo-sentence (default 50)"
    )
    ex.add_argument(
        "--n-s",
        type=int,
        default=None,
        help="cap on pseudo-sentences (walden: all; gibberish: required)",
    )
    ex.add_argument(
        "--bos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="start every pseudo-sentence with BOS, or not (default: as the model's tokenizer does)",
    )
    ex.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of gibberish and of re-initialised weights",
    )
    ex.add_argument(
        "--untrained", action="store_true", help="fresh random weights (null test)"
    )
    ex.add_argument(
        "--reinit-from",
        type=int,
        default=None,
        metavar="K",
        help="re-initialise blocks K.. (null test)",
    )
    ex.add_argument(
        "--all-positions",
        action="store_true",
        help="keep every position, not only the last",
    )
    ex.add_argument(
        "--storage-dtype",
        default="float32",
        choices=["float32", "float16"],
        help="dtype the trajectories are stored in",
    )
    ex.add_argument(
        "--batch-size",
        type=_positive,
        default=32,
        help="pseudo-sentences per forward pass (default 32)",
    )
    ex.set_defaults(handler=_extract)


def _run_command(commands) -> None:
    """`lotlib run`: execute one notebook with papermill."""
    run = commands.add_parser(
        "run",
        help="execute one notebook with papermill",
        parents=[
            _notebook_options(
                "VALUE",
                "override a parameter (value parsed as YAML: 3, 0.5, true, null, [1, 2], text)",
            ),
            _model_options("the notebook's own default"),
            _debug_option(),
        ],
    )
    run.add_argument(
        "--out",
        type=Path,
        default=None,
        help="executed notebook (default build/runs/NAME.ipynb)",
    )
    run.set_defaults(handler=_run)


def _sweep_command(commands) -> None:
    """`lotlib sweep`: run one notebook over a grid of parameters."""
    sw = commands.add_parser(
        "sweep",
        help="run one notebook over a grid of parameters",
        description="Runs the cartesian product of the grid through papermill, in parallel "
        "worker processes (or on a Dask cluster). Finished runs are skipped when "
        "the sweep is started again; failed runs are recorded and the others go on.",
        parents=[
            _notebook_options(
                "VALUES",
                "a swept parameter and its comma-separated values (each parsed as YAML): -p n_k 10,25,50",
            ),
            _model_options("the notebook's own default"),
            _debug_option(),
        ],
    )
    sw.add_argument(
        "--grid",
        type=Path,
        default=None,
        help="a YAML file mapping parameter names to lists of values",
    )
    sw.add_argument(
        "--out",
        type=Path,
        default=None,
        help="sweep folder (default build/sweeps/NOTEBOOK)",
    )
    sw.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel local worker processes (default min(4, cores))",
    )
    sw.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="send the runs to a Dask distributed scheduler (tcp://host:8786) instead",
    )
    sw.add_argument(
        "--plot",
        default=None,
        metavar="VALUE",
        help="plot this summary value into OUT/summary.png",
    )
    sw.add_argument(
        "--x",
        default=None,
        help="the swept parameter on the plot's x axis (default: the first)",
    )
    sw.add_argument(
        "--hue", default=None, help="a swept parameter drawn as separate lines"
    )
    sw.set_defaults(handler=_sweep)


def _book_command(commands) -> None:
    """`lotlib book`: execute every chapter and build the HTML book."""
    book = commands.add_parser(
        "book",
        help="execute every chapter and build the HTML book",
        parents=[
            _model_options("each chapter's own, the embedded SmolLM2-135M"),
            _debug_option(),
        ],
    )
    book.add_argument(
        "--quick",
        action="store_true",
        help="small parameters (book/parameters.yml: quick)",
    )
    book.add_argument(
        "--jobs", type=int, default=2, help="chapters executed in parallel (default 2)"
    )
    book.add_argument(
        "--no-null",
        dest="null",
        action="store_false",
        help="skip the null books (the same chapters on untrained:MODEL, and Traveling Words' findings on "
        "untrained:gpt2) that the verdicts compare with",
    )
    book.add_argument(
        "--scheduler",
        default=None,
        help="run the chapters on a Dask distributed scheduler (tcp://host:8786)",
    )
    book.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder of the built books (default: the project's build/, or ./build outside a clone)",
    )
    book.set_defaults(handler=_book)


def _notebooks_command(commands) -> None:
    """`lotlib notebooks`: copy the chapters out to edit and run."""
    nbs = commands.add_parser(
        "notebooks",
        help="copy the chapters (.py and .ipynb) and the book's configuration into a folder",
        parents=[_debug_option()],
    )
    nbs.add_argument("folder", type=Path, help="where to write them (created)")
    nbs.add_argument(
        "--quick",
        action="store_true",
        help="inject the book's quick parameters into each .ipynb (small enough for a free Colab CPU)",
    )
    nbs.add_argument(
        "--install",
        default=None,
        metavar="REQUIREMENT",
        help="what each notebook's first cell pip-installs where lotlib is missing "
        "(default: lotlib from its repository's main branch)",
    )
    nbs.add_argument(
        "--force", action="store_true", help="overwrite chapters already in the folder"
    )
    nbs.set_defaults(handler=_notebooks)


def parser() -> argparse.ArgumentParser:
    """The `lotlib` command line: one sub-command per function above."""
    top = argparse.ArgumentParser(
        prog="lotlib",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument(
        "--debug", action="store_true", help="show the full traceback of an error"
    )
    commands = top.add_subparsers(dest="command", required=True)
    for add in (
        _extract_command,
        _run_command,
        _sweep_command,
        _book_command,
        _notebooks_command,
    ):
        add(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one `lotlib` command; an error ends in one line and exit code 2 (130 when interrupted)."""
    args = parser().parse_args(argv)
    # a SIGTERM stops as a Ctrl-C does: workers ended
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        return args.handler(args)
    except (Exception, KeyboardInterrupt) as err:
        if args.debug:
            raise
        print(f"lotlib {args.command}: error: {one_line(err)}", file=sys.stderr)
        return 130 if isinstance(err, KeyboardInterrupt) else 2


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def one_line(err: BaseException) -> str:
    """An error as one line: its message with line breaks folded, and its type when the message does not
    say what happened (an OSError's text and file, an interruption)."""
    if isinstance(err, KeyboardInterrupt):
        return "interrupted"
    if isinstance(err, OSError) and err.strerror and err.filename:
        text = f"{err.strerror}: {err.filename}"
    else:
        text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    named = isinstance(err, (ValueError, LookupError, RuntimeError, OSError)) and text
    return text if named else f"{type(err).__name__}: {text}".rstrip(": ")


def _extract(args) -> int:

    name, prefixed = split_name(args.model)
    check_reinit(name, args.untrained or prefixed, args.reinit_from, "--reinit-from")
    # the context is checked before the load
    check_context(
        args.n_k,
        model_shape(args.model).max_positions,
        args.bos,
        param="--n-k",
        model=args.model,
    )
    from . import load_model, trajectories  # torch: after the checks

    model = load_model(
        args.model,
        untrained=args.untrained,
        reinit_from=args.reinit_from,
        seed=args.seed,
        device=args.device,
        dtype=args.dtype,
    )
    if args.corpus == "walden":
        text = corpus.walden(model.tokenizer, n_k=args.n_k, n_s=args.n_s, bos=args.bos)
    else:
        if args.n_s is None:
            raise ValueError(
                "--corpus gibberish needs --n-s (how many random pseudo-sentences)"
            )
        text = corpus.gibberish(
            len(model.tokenizer),
            n_s=args.n_s,
            n_k=args.n_k,
            seed=args.seed,
            prefix=corpus.bos_prefix(model.tokenizer, args.bos),
        )
    X = trajectories(
        model,
        text,
        all_positions=args.all_positions,
        dtype=args.storage_dtype,
        batch_size=args.batch_size,
    )
    print(f"{model!r}\n{text!r}: N_s = {text.n_s}\ntrajectories {X.shape} {X.dtype}")
    return 0


def _notebook(name: str) -> Path:

    source = Path(name)
    if not source.exists():
        source = project_root() / "notebooks" / f"{Path(name).stem}.py"
        if not source.exists():
            raise FileNotFoundError(
                f"no notebook {name!r} (not a file, not in {source.parent})"
            )
    return source


def _run(args) -> int:

    source = _notebook(args.notebook)
    parameters = (
        book_parameters(project_root(source.parent), source.stem, quick=True)
        if args.quick
        else {}
    )
    parameters |= _model_parameters(args, source)
    parameters |= {name: yaml.safe_load(value) for name, value in args.parameter}
    out = arguments.notebook_out(
        args.out or Path("build") / "runs" / f"{source.stem}.ipynb"
    )
    print(run_notebook(source, out, parameters))
    return 0


def _sweep(args) -> int:

    source = _notebook(args.notebook)
    grid = load_grid(args.parameter, args.grid)
    base = (
        book_parameters(project_root(source.parent), source.stem, quick=True)
        if args.quick
        else {}
    )
    base = {
        k: v
        for k, v in {**base, **_model_parameters(args, source)}.items()
        if k not in grid
    }
    out = arguments.folder_out(args.out) or Path("build") / "sweeps" / source.stem
    table = run_sweep(
        source, grid, out, base=base, workers=args.workers, scheduler=args.scheduler
    )
    counts = table["status"].value_counts().to_dict()
    print(f"{len(table)} runs: {counts}\nresults: {out / 'results.csv'}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from .plots import sweep_plot

        ax = sweep_plot(table, args.plot, args.x or next(iter(grid)), args.hue)
        ax.figure.savefig(out / "summary.png", dpi=120, bbox_inches="tight")
        print(f"figure: {out / 'summary.png'}")
    return 0 if counts.get("failed", 0) == 0 else 1


def _book(args) -> int:
    # ends with the line naming the page to open
    root = project_root()
    options = BookOptions(
        model=arguments.pinned(args.model, args.revision),
        quick=args.quick,
        device=arguments.checked_device(args.device) or "auto",
        dtype=args.dtype or "float32",
        null=args.null,
        build=arguments.folder_out(args.out)
        or (Path("build") if root == bundled_project() else None),
    )
    build_book(root, options, jobs=args.jobs, scheduler=args.scheduler)
    return 0


def _notebooks(args) -> int:
    written = export_notebooks(
        project_root(),
        args.folder,
        quick=args.quick,
        requirement=args.install,
        force=args.force,
    )
    print(
        f"{len(written)} chapters in {args.folder / 'notebooks'} (.py and .ipynb); "
        f"`lotlib run NAME` there runs the copies, `jupyter lab` opens them"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
