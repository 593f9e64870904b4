"""The `lotlib` command: extract trajectories, run one notebook, build the book."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

EPILOG = """examples:
  lotlib extract --model smollm2-135m --n-k 50          # all of Walden into the trajectory cache
  lotlib run lines_of_thought -p n_pilots 300 -p model gemma3-270m
  lotlib book --quick                                   # small parameters, as CI builds it
environment: LOTLIB_DATA_DIR (walden.txt, common_nouns.txt), LOTLIB_CACHE_DIR (models, trajectories)"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lotlib", description=__doc__, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    ex = commands.add_parser("extract", help="capture trajectories into the disk cache")
    ex.add_argument("--model", default="smollm2-135m", help="embedded name, local folder or hub id")
    ex.add_argument("--corpus", choices=["walden", "gibberish"], default="walden")
    ex.add_argument("--n-k", type=int, default=50, help="tokens per pseudo-sentence (default 50)")
    ex.add_argument("--n-s", type=int, default=None, help="cap on pseudo-sentences (walden: all; gibberish: required)")
    ex.add_argument("--bos", action="store_true", help="prepend the BOS token to every pseudo-sentence")
    ex.add_argument("--seed", type=int, default=0, help="seed of gibberish and of re-initialised weights")
    ex.add_argument("--untrained", action="store_true", help="fresh random weights (null test)")
    ex.add_argument("--reinit-from", type=int, default=None, metavar="K", help="re-initialise blocks K.. (null test)")
    ex.add_argument("--all-positions", action="store_true", help="keep every position, not only the last")
    ex.add_argument("--dtype", default="float32", choices=["float32", "float16"], help="storage dtype")
    ex.add_argument("--batch-size", type=int, default=32)

    run = commands.add_parser("run", help="execute one notebook with papermill")
    run.add_argument("notebook", help="a path to a Jupytext .py notebook, or a name in notebooks/")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="override a parameter (value parsed as YAML: 3, 0.5, true, null, [1, 2], text)")
    run.add_argument("--out", type=Path, default=None, help="executed notebook (default build/runs/NAME.ipynb)")

    book = commands.add_parser("book", help="execute every chapter and build the HTML book")
    book.add_argument("--quick", action="store_true", help="small parameters (book/parameters.yml: quick)")

    args = parser.parse_args(argv)
    try:
        return {"extract": _extract, "run": _run, "book": _book}[args.command](args)
    except (ValueError, LookupError, RuntimeError, FileNotFoundError) as err:
        print(f"lotlib {args.command}: error: {err}", file=sys.stderr)
        return 2


def _extract(args) -> int:
    from . import corpus, load_model, trajectories

    model = load_model(args.model, untrained=args.untrained, reinit_from=args.reinit_from, seed=args.seed)
    if args.corpus == "walden":
        text = corpus.walden(model.tokenizer, n_k=args.n_k, n_s=args.n_s, bos=args.bos)
    else:
        if args.n_s is None:
            raise ValueError("--corpus gibberish needs --n-s (how many random pseudo-sentences)")
        text = corpus.gibberish(len(model.tokenizer), n_s=args.n_s, n_k=args.n_k, seed=args.seed)
    X = trajectories(model, text, all_positions=args.all_positions, dtype=args.dtype, batch_size=args.batch_size)
    print(f"{model!r}\n{text!r}: N_s = {text.n_s}\ntrajectories {X.shape} {X.dtype}")
    return 0


def _run(args) -> int:
    from .pipeline import project_root, run_notebook

    source = Path(args.notebook)
    if not source.exists():
        source = project_root() / "notebooks" / f"{Path(args.notebook).stem}.py"
        if not source.exists():
            raise FileNotFoundError(f"no notebook {args.notebook!r} (not a file, not in {source.parent})")
    parameters = {name: yaml.safe_load(value) for name, value in args.parameter}
    out = args.out or Path("build") / "runs" / f"{source.stem}.ipynb"
    print(run_notebook(source, out, parameters))
    return 0


def _book(args) -> int:
    from .book import build_book
    from .pipeline import project_root

    html = build_book(project_root(), quick=args.quick)
    print(f"book built: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
