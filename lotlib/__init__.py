"""lotlib, the executable companion to "Traveling Words" and "Lines of Thought in LLMs", shaped as the book.

Top to bottom: `lotlib.cli` (the command line) over `lotlib.book` (execution, the book build, sweeps);
`lotlib.chapters` (one module per chapter: its study, its claim values, its figures); `lotlib.verdicts` (claims,
the tolerance rule, the report) over `lotlib.summary` (what a chapter records); the papers' building blocks,
`lotlib.traveling_words` (paper A) and `lotlib.lines_of_thought` (paper B); and under them `lotlib.models`
(loading, the model-agnostic view, capture, trajectories, corpora), `lotlib.stats`, `lotlib.plots` and
`lotlib.storage`. `lotlib.project` carries the notebooks and the book inside the wheel. docs/architecture.md
draws the rooms.
"""

from importlib import import_module

__version__ = "0.2.0"

_EXPORTS = {
    "capture": "models.capture",
    "Corpus": "models.corpus",
    "common_nouns": "models.corpus",
    "gibberish": "models.corpus",
    "pseudo_sentences": "models.corpus",
    "walden": "models.corpus",
    "DataError": "models.data",
    "data_path": "models.data",
    "DEFAULT_MODEL": "models.sources",
    "EMBEDDED": "models.sources",
    "PACKAGED": "models.sources",
    "ModelNotFoundError": "models.sources",
    "Model": "models.loading",
    "load_model": "models.loading",
    "trajectories": "models.trajectories",
    "walden_trajectories": "models.trajectories",
    "Heads": "models.view",
    "ModelView": "models.view",
    "NoReadout": "models.view",
    "Norm": "models.view",
    "Estimate": "stats",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """The public names of `_EXPORTS`, loaded on first use, so that `import lotlib.summary` (a sweep run, the
    report) does not pay for importing torch and transformers."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lotlib' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
