"""Token-id corpora: Walden cut into pseudo-sentences, and uniformly random gibberish."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .data import read_text


@dataclass(frozen=True)
class Corpus:
    """`ids` `(N_s, N_k)` int64 token ids; `identity` hashes the ids, so it changes with any input."""

    name: str
    ids: np.ndarray

    @property
    def n_s(self) -> int:
        return self.ids.shape[0]

    @property
    def n_k(self) -> int:
        return self.ids.shape[1]

    @property
    def identity(self) -> str:
        return hashlib.sha256(np.ascontiguousarray(self.ids, dtype=np.int64).tobytes()).hexdigest()[:20]

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, N_s={self.n_s}, N_k={self.n_k})"


def pseudo_sentences(text: str, tokenizer, n_k: int = 50, n_s: int | None = None,
                     bos: bool = False, name: str = "text") -> Corpus:
    """Collapse whitespace, tokenize the whole text once, cut into non-overlapping chunks of `n_k`.

    The tail shorter than `n_k` is dropped. `n_s` caps the number of chunks (the first `n_s`).
    `bos=True` prepends the tokenizer's BOS token to every chunk (then ids are `(N_s, n_k + 1)`).
    """
    if n_k < 2:
        raise ValueError(f"n_k must be at least 2 tokens (a pilot and one token of context), got {n_k}")
    ids = np.asarray(tokenizer(" ".join(text.split()), add_special_tokens=False)["input_ids"], dtype=np.int64)
    if len(ids) < 2:
        raise ValueError(f"the text {name!r} has {len(ids)} token(s): there is nothing to cut into pseudo-sentences "
                         f"of at least 2 tokens; give a longer text (is the data file empty?)")
    if n_k > len(ids):
        raise ValueError(f"n_k = {n_k} is larger than the whole text ({len(ids)} tokens); choose n_k <= {len(ids)}")
    chunks = ids[: len(ids) // n_k * n_k].reshape(-1, n_k)
    if n_s is not None:
        if n_s < 1:
            raise ValueError(f"n_s must be a positive number of pseudo-sentences, got {n_s}")
        chunks = chunks[:n_s]
    if bos:
        if tokenizer.bos_token_id is None:
            raise ValueError("bos=True but this tokenizer has no BOS token")
        chunks = np.concatenate([np.full((len(chunks), 1), tokenizer.bos_token_id, np.int64), chunks], axis=1)
    return Corpus(name, chunks)


def walden(tokenizer, n_k: int = 50, n_s: int | None = None, bos: bool = False) -> Corpus:
    """Walden (and Civil Disobedience) as `(N_s, N_k)` pseudo-sentences, as in Lines of Thought."""
    return pseudo_sentences(read_text("walden.txt"), tokenizer, n_k, n_s, bos, name="walden")


def gibberish(vocab_size: int, n_s: int, n_k: int = 10, seed: int = 0) -> Corpus:
    """`(n_s, n_k)` token ids drawn uniformly from `[0, vocab_size)` with a seeded generator."""
    if n_k < 2 or n_s < 1:
        raise ValueError(f"gibberish needs n_k >= 2 and n_s >= 1, got n_k={n_k}, n_s={n_s}")
    rng = np.random.default_rng(seed)
    return Corpus(f"gibberish(seed={seed})", rng.integers(0, vocab_size, size=(n_s, n_k), dtype=np.int64))


def common_nouns() -> list[str]:
    """The 100 common English nouns of Traveling Words, most frequent first."""
    return [w.strip() for w in read_text("common_nouns.txt").splitlines() if w.strip()]
