"""lotlib: the executable companion to "Traveling Words" and "Lines of Thought in LLMs".

The public names below load on first use, so `import lotlib.summary` (a sweep run, the report)
does not pay for importing torch and transformers.
"""
from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "head_outputs": "attention",
    "capture": "capture_hooks",
    "Corpus": "corpus", "common_nouns": "corpus", "gibberish": "corpus", "pseudo_sentences": "corpus",
    "walden": "corpus",
    "DataError": "data", "data_path": "data",
    "DEFAULT_MODEL": "models", "EMBEDDED": "models", "Model": "models", "ModelNotFoundError": "models",
    "load_model": "models",
    "trajectories": "trajectory_cache", "walden_trajectories": "trajectory_cache",
    "Heads": "view", "ModelView": "view", "Norm": "view",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lotlib' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
