"""Token-id corpora: Walden cut into pseudo-sentences, and uniformly random gibberish."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .data import read_text


@dataclass(frozen=True)
class Corpus:
    """`ids` `(N_s, N_k)` int64 token ids, the first `prefix` columns a BOS (context, not text); `identity`
    hashes the ids, so it changes with any input."""

    name: str
    ids: np.ndarray
    prefix: int = 0

    @property
    def prefix_ids(self) -> np.ndarray:
        """The ids every pseudo-sentence starts with (its BOS, or none): `(prefix,)`."""
        return self.ids[0, : self.prefix]

    @property
    def n_s(self) -> int:
        return self.ids.shape[0]

    @property
    def n_k(self) -> int:
        return self.ids.shape[1]

    @property
    def identity(self) -> str:
        return hashlib.sha256(
            np.ascontiguousarray(self.ids, dtype=np.int64).tobytes()
        ).hexdigest()[:20]

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, N_s={self.n_s}, N_k={self.n_k - self.prefix}{' after BOS' if self.prefix else ''})"


def bos_prefix(tokenizer, bos: bool | None = None) -> list[int]:
    """The ids a pseudo-sentence starts with: [BOS] when `bos` is True, or when it is None and the tokenizer
    starts every text it encodes with BOS; [] otherwise. Gemma, Llama and Mistral tokenizers start every text
    with BOS because their models were trained on sequences that do (without it they read text badly);
    GPT-2's and SmolLM2's do not, which is the paper's setting. The BOS column is context only: `Corpus.prefix`
    counts it."""
    if bos is None:
        bos = tokenizer.bos_token_id is not None and tokenizer("a")["input_ids"][
            :1
        ] == [tokenizer.bos_token_id]
    if bos and tokenizer.bos_token_id is None:
        raise ValueError("bos=True but this tokenizer has no BOS token")
    return [tokenizer.bos_token_id] if bos else []


def token_ids(text: str, tokenizer) -> np.ndarray:
    """`text` with its whitespace collapsed, tokenized once without special tokens: `(n_tokens,)` int64. The
    whole text is longer than a model reads at once (an encoder's 512 positions), but only its pseudo-sentences
    reach the model, so the tokenizer's warning about that length is not asked for (`verbose=False`)."""
    return np.asarray(
        tokenizer(" ".join(text.split()), add_special_tokens=False, verbose=False)[
            "input_ids"
        ],
        dtype=np.int64,
    )


def pseudo_sentences(
    text: str,
    tokenizer,
    n_k: int = 50,
    n_s: int | None = None,
    bos: bool | None = None,
    name: str = "text",
) -> Corpus:
    """Collapse whitespace, tokenize the whole text once, cut into non-overlapping chunks of `n_k`.

    The tail shorter than `n_k` is dropped. `n_s` caps the number of chunks (the first `n_s`). With BOS
    (`bos_prefix`: as the tokenizer does, unless `bos` says) every chunk starts with it: ids `(N_s, n_k + 1)`.
    """
    if n_k < 2:
        raise ValueError(
            f"n_k must be at least 2 tokens (a pilot and one token of context), got {n_k}"
        )
    ids = token_ids(text, tokenizer)
    if len(ids) < 2:
        raise ValueError(
            f"the text {name!r} has {len(ids)} token(s): there is nothing to cut into pseudo-sentences "
            f"of at least 2 tokens; give a longer text (is the data file empty?)"
        )
    if n_k > len(ids):
        raise ValueError(
            f"n_k = {n_k} is larger than the whole text ({len(ids)} tokens); choose n_k <= {len(ids)}"
        )
    chunks = ids[: len(ids) // n_k * n_k].reshape(-1, n_k)
    if n_s is not None:
        if n_s < 1:
            raise ValueError(
                f"n_s must be a positive number of pseudo-sentences, got {n_s}"
            )
        chunks = chunks[:n_s]
    return _with_prefix(name, chunks, bos_prefix(tokenizer, bos))


def _with_prefix(name: str, chunks: np.ndarray, prefix) -> Corpus:
    start = np.broadcast_to(
        np.asarray(prefix, dtype=np.int64), (len(chunks), len(prefix))
    )
    return Corpus(name, np.concatenate([start, chunks], axis=1), len(prefix))


def walden(
    tokenizer, n_k: int = 50, n_s: int | None = None, bos: bool | None = None
) -> Corpus:
    """Walden (and Civil Disobedience) as `(N_s, N_k)` pseudo-sentences, as in Lines of Thought."""
    return pseudo_sentences(
        read_text("walden.txt"), tokenizer, n_k, n_s, bos, name="walden"
    )


def walden_length(tokenizer) -> int:
    """Walden's length in tokens of `tokenizer`: `walden(tokenizer, n_k)` cuts it into length // n_k."""
    return len(token_ids(read_text("walden.txt"), tokenizer))


def gibberish(
    vocab_size: int, n_s: int, n_k: int = 10, seed: int = 0, prefix=()
) -> Corpus:
    """`(n_s, n_k)` token ids drawn uniformly from `[0, vocab_size)` with a seeded generator, after the ids
    `prefix` (e.g. the `prefix_ids` of the language corpus it is compared with)."""
    if n_k < 2 or n_s < 1:
        raise ValueError(
            f"gibberish needs n_k >= 2 and n_s >= 1, got n_k={n_k}, n_s={n_s}"
        )
    rng = np.random.default_rng(seed)
    return _with_prefix(
        f"gibberish(seed={seed})",
        rng.integers(0, vocab_size, size=(n_s, n_k), dtype=np.int64),
        prefix,
    )


def common_nouns() -> list[str]:
    """The 100 common English nouns of Traveling Words, most frequent first."""
    return [w.strip() for w in read_text("common_nouns.txt").splitlines() if w.strip()]
