"""lotlib: the executable companion to "Traveling Words" and "Lines of Thought in LLMs"."""
__version__ = "0.1.0"

from .attention import head_outputs
from .capture import capture
from .corpus import Corpus, common_nouns, gibberish, pseudo_sentences, walden
from .data import DataError, data_path
from .models import DEFAULT_MODEL, EMBEDDED, Model, ModelNotFoundError, load_model
from .trajectory_cache import trajectories
from .view import Heads, ModelView, Norm

__all__ = [
    "Corpus", "DEFAULT_MODEL", "DataError", "EMBEDDED", "Heads", "Model", "ModelNotFoundError",
    "ModelView", "Norm", "capture", "common_nouns", "data_path", "gibberish", "head_outputs",
    "load_model", "pseudo_sentences", "trajectories", "walden",
]
