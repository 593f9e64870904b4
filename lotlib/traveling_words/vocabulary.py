"""The vocabulary the probes read: token texts, single-token queries, plurals and variants, noun queries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ..models.corpus import common_nouns

IRREGULAR_PLURALS = {
    "man": "men",
    "woman": "women",
    "child": "children",
    "person": "people",
    "life": "lives",
    "foot": "feet",
    "tooth": "teeth",
    "mouse": "mice",
    "wife": "wives",
    "knife": "knives",
}
WORD = re.compile(r"[a-z]{3,}")


# ----------------------------------------------------------------------------------------------
# tokens


class Vocabulary(list):
    """Each token id's text, a list, with `ids_by_text` built once (every variant count and mask needs the
    index)."""

    @cached_property
    def ids_by_text(self) -> dict[str, list[int]]:
        """Token ids by text (several ids can share a text)."""
        index: dict[str, list[int]] = {}
        for v, text in enumerate(self):
            index.setdefault(text, []).append(v)
        return index

    @cached_property
    def spaced(self) -> bool:
        """Whether tokens carry their leading space (byte-level BPE, SentencePiece). A WordPiece vocabulary
        (BERT, MPNet) has none: its tokenizer splits at spaces first, so "word" and " word" are one token,
        and a word piece is marked "##" instead."""
        return any(text.startswith(" ") for text in self)


def vocab_strings(tokenizer, size: int) -> Vocabulary:
    """Each token id's text, `size` entries (ids the tokenizer does not know decode to "")."""
    known = min(size, len(tokenizer))
    return Vocabulary(
        tokenizer.batch_decode([[i] for i in range(known)]) + [""] * (size - known)
    )


def token_label(text: str) -> str:
    """A token's text for tables: a leading space shown as '␣', line breaks escaped."""
    return text.replace(" ", "␣").replace("\n", "\\n").replace("\t", "\\t")


@dataclass(frozen=True)
class Queries:
    """Words that are single tokens in the chosen form: `ids` `(n,)`, `words` kept, `dropped` the rest."""

    words: list[str]
    ids: Tensor
    dropped: list[str]
    leading_space: bool


def single_tokens(tokenizer, words: list[str], leading_space: bool) -> Queries:
    """The words that encode to exactly one token, as `word` or as `" " + word`."""
    encoded = [
        tokenizer((" " if leading_space else "") + w, add_special_tokens=False)[
            "input_ids"
        ]
        for w in words
    ]
    kept = [(w, ids[0]) for w, ids in zip(words, encoded) if len(ids) == 1]
    dropped = [w for w, ids in zip(words, encoded) if len(ids) != 1]
    return Queries(
        [w for w, _ in kept],
        torch.tensor([i for _, i in kept], dtype=torch.long),
        dropped,
        leading_space,
    )


def plural(word: str) -> str:
    """English plural: irregular nouns, -y -> -ies after a consonant, -es after s/x/z/ch/sh, else -s."""
    if word in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[word]
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def variants(word: str) -> set[str]:
    """The word's variant set: {word, plural} x {lower case, Capitalised} x {no space, leading space}."""
    forms = {word.lower(), plural(word.lower())}
    forms |= {f.capitalize() for f in forms}
    return forms | {" " + f for f in forms}


def _text_index(vocab: list[str]) -> dict[str, list[int]]:
    """Token ids by text, from `vocab`'s own index when it is a `Vocabulary`."""
    return (vocab if isinstance(vocab, Vocabulary) else Vocabulary(vocab)).ids_by_text


def variant_mask(vocab: list[str], words: list[str]) -> Tensor:
    """`(n, V)` bool: token v's text is in the variant set of word i."""
    index = _text_index(vocab)
    mask = torch.zeros(len(words), len(vocab), dtype=torch.bool)
    for i, word in enumerate(words):
        hits = [v for form in variants(word) for v in index.get(form, [])]
        mask[i, hits] = True
    return mask


def variant_counts(vocab: list[str], words: list[str]) -> np.ndarray:
    """How many vocabulary tokens are in each word's variant set, `(n,)`: the most matches a probe can find."""
    index = _text_index(vocab)
    return np.array(
        [sum(len(index.get(form, [])) for form in variants(word)) for word in words],
        dtype=int,
    )


def random_words(
    vocab: list[str],
    n: int,
    leading_space: bool,
    exclude: list[str],
    seed: int,
    like: np.ndarray | None = None,
) -> Queries:
    """`n` seeded random "words": lower-case alphabetic texts of 3+ letters that are single tokens both
    with and without a leading space (this rules out most word pieces; in a vocabulary without spaced
    tokens, `Vocabulary.spaced`, every such token starts a word), none in `exclude`'s variants.

    With `like` (variant-token counts, e.g. the nouns' `variant_counts`), the words are drawn to have those
    counts one for one (n counts drawn from `like` when n differs from its length), so that the random words
    can match as many tokens as the words they stand in for; where a count runs out, the nearest available.
    """
    vocab = vocab if isinstance(vocab, Vocabulary) else Vocabulary(vocab)
    ids, space = vocab.ids_by_text, " " if vocab.spaced else ""
    banned = set().union(*(variants(w) for w in exclude)) if exclude else set()
    pool = sorted(
        t for t in ids if WORD.fullmatch(t) and space + t in ids and t not in banned
    )
    if n > len(pool):
        raise ValueError(f"asked for {n} random words, the vocabulary has {len(pool)}")
    rng = np.random.default_rng(seed)
    if like is None:
        picks = rng.choice(len(pool), size=n, replace=False)
    else:
        targets = (
            np.asarray(like)
            if n == len(like)
            else rng.choice(like, size=n, replace=n > len(like))
        )
        picks = _matching(variant_counts(vocab, pool), targets, rng)
    words = [pool[i] for i in np.sort(picks)]
    chosen = [ids[(space if leading_space else "") + w][-1] for w in words]
    return Queries(words, torch.tensor(chosen, dtype=torch.long), [], leading_space)


def _matching(
    counts: np.ndarray, targets: np.ndarray, rng: np.random.Generator
) -> list[int]:
    """Distinct indices into `counts`, one per target, each drawn among the unused entries nearest its target
    (largest targets first: large counts are the rare ones)."""
    free, picks = np.ones(len(counts), dtype=bool), []
    for target in sorted(targets, reverse=True):
        gap = np.where(free, np.abs(counts - target), np.inf)
        pick = int(rng.choice(np.flatnonzero(gap == gap.min())))
        free[pick] = False
        picks.append(pick)
    return picks


@dataclass(frozen=True)
class NounQueries:
    """The queries of the noun probes: the common nouns that are one token in the chosen form (`nouns`),
    the same nouns in the other form (`other`, counted only), and random words with the nouns' variant
    counts (`randoms`, the null), beside an unmatched draw (`unmatched`, shown only)."""

    vocab: Vocabulary
    words: list[str]
    nouns: Queries
    other: Queries
    randoms: Queries
    unmatched: Queries
    leading_space: bool

    @property
    def n(self) -> int:
        """How many nouns are queries."""
        return len(self.nouns.words)

    @property
    def ids(self) -> Tensor:
        """The nouns' token ids, then the random words', `(n + m,)`."""
        return torch.cat([self.nouns.ids, self.randoms.ids])

    @property
    def groups(self) -> dict[str, slice]:
        """Where each group lies along the query axis of `ids`."""
        return {"nouns": slice(0, self.n), "random words": slice(self.n, None)}

    @cached_property
    def mask(self) -> Tensor:
        """`(n + m, V)` bool: each query's variant set (`variant_mask`)."""
        return variant_mask(self.vocab, self.nouns.words + self.randoms.words)

    @property
    def chance(self) -> float:
        """The chance of a variant in one top-k slot drawn uniformly from the vocabulary, mean over nouns."""
        return self.mask[: self.n].sum(1).float().mean().item() / len(self.vocab)

    def count_table(self) -> pd.DataFrame:
        """How many words of each group have each number of variant tokens (`count_table`)."""
        return count_table(
            self.vocab,
            {
                "nouns": self.nouns.words,
                "random words (matched)": self.randoms.words,
                "random words (unmatched draw)": self.unmatched.words,
            },
        )

    def describe(self) -> dict[str, str | int]:
        """What the chapters say of the query set, by glue name: the query form, the number of candidate words,
        the nouns dropped in each form (not one token), and the first random words."""
        return {
            "query_form": "' word' (leading space)"
            if self.leading_space
            else "'word' (no space)",
            "n_words": len(self.words),
            "dropped_list": ", ".join(self.nouns.dropped) or "none",
            "dropped_other_list": ", ".join(self.other.dropped) or "none",
            "random_examples": ", ".join(self.randoms.words[:8]),
        }

    def mean_variant_tokens(self) -> pd.Series:
        """The mean number of variant tokens per word of each group of `count_table`."""
        counts = self.count_table()
        return (counts * counts.index.to_numpy()[:, None]).sum() / counts.sum()


def noun_queries(
    tokenizer,
    vocab_size: int,
    leading_space: bool = False,
    n_random: int | None = None,
    seed: int = 0,
    words: list[str] | None = None,
) -> NounQueries:
    """The query set of both probe chapters: the common nouns (`words`, default `common_nouns()`) that
    are single tokens as "word" or, with `leading_space`, " word"; `n_random` seeded random words (None:
    as many as the nouns) drawn with the nouns' variant counts (`random_words(like=...)`), and an
    unmatched draw of as many."""
    vocab = vocab_strings(tokenizer, vocab_size)
    words = common_nouns() if words is None else words
    nouns = single_tokens(tokenizer, words, leading_space)
    like = variant_counts(vocab, nouns.words)
    randoms = random_words(
        vocab, n_random or len(nouns.words), leading_space, words, seed, like=like
    )
    return NounQueries(
        vocab,
        words,
        nouns,
        single_tokens(tokenizer, words, not leading_space),
        randoms,
        random_words(vocab, len(randoms.words), leading_space, words, seed),
        leading_space,
    )


def count_table(vocab: list[str], groups: dict[str, list[str]]) -> pd.DataFrame:
    """How many words of each group have each number of variant tokens in the vocabulary: one row per count,
    one column per group (the distributions a fair baseline must match)."""
    columns = {
        name: pd.Series(variant_counts(vocab, words)).value_counts()
        for name, words in groups.items()
    }
    return (
        pd.DataFrame(columns)
        .fillna(0)
        .astype(int)
        .sort_index()
        .rename_axis("variant tokens")
    )
