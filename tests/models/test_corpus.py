"""Pseudo-sentences and gibberish, with the real GPT-2 tokenizer."""
import numpy as np
import pytest

from lotlib.models import corpus
from lotlib.models.corpus import bos_prefix, gibberish, pseudo_sentences

from ..conftest import StartsWithBos, gpt2_tokenizer

TEXT = "It is  a truth\n\nuniversally   acknowledged, that a single man in possession of a good fortune " * 20


def test_chunks_tile_the_whitespace_collapsed_text():
    tok = gpt2_tokenizer()
    c = pseudo_sentences(TEXT, tok, n_k=7)
    ids = tok(" ".join(TEXT.split()))["input_ids"]
    assert c.ids.shape == (len(ids) // 7, 7)
    assert c.ids.ravel().tolist() == ids[: c.n_s * 7]
    assert "  " not in tok.decode(c.ids.ravel())


def test_a_text_longer_than_the_model_reads_tokenizes_without_the_length_warning(monkeypatch):
    """Walden is 145,185 tokens for an encoder that reads 512 positions: only its pseudo-sentences reach the
    model, so the tokenizer's "indexing errors" warning (printed into every encoder chapter's log) is false."""
    from transformers import tokenization_utils_base

    warned = []
    monkeypatch.setattr(tokenization_utils_base.logger, "warning", lambda message, *a, **k: warned.append(message))
    tok = gpt2_tokenizer()
    tok.model_max_length = 16
    c = pseudo_sentences(TEXT, tok, n_k=7)
    assert c.ids.size > 16 and not warned
    tok("word " * 40)  # the warning this avoids, which the same tokenizer gives when asked for
    assert len(warned) == 1 and "longer than the specified maximum" in warned[0]


def test_cap_bos_and_identity():
    tok = gpt2_tokenizer()
    full = pseudo_sentences(TEXT, tok, n_k=5)
    capped = pseudo_sentences(TEXT, tok, n_k=5, n_s=3)
    assert capped.n_s == 3 and np.array_equal(capped.ids, full.ids[:3])
    with_bos = pseudo_sentences(TEXT, tok, n_k=5, n_s=3, bos=True)
    assert with_bos.ids.shape == (3, 6) and (with_bos.ids[:, 0] == tok.bos_token_id).all()
    assert with_bos.prefix == 1 and with_bos.prefix_ids.tolist() == [tok.bos_token_id] and full.prefix == 0
    assert np.array_equal(with_bos.ids[:, 1:], capped.ids)
    assert len({full.identity, capped.identity, with_bos.identity}) == 3


def test_bos_follows_the_tokenizer_unless_asked():
    gpt2 = gpt2_tokenizer()  # GPT-2 (and SmolLM2) start texts without BOS: the paper's pseudo-sentences
    assert bos_prefix(gpt2) == [] and pseudo_sentences(TEXT, gpt2, n_k=5).prefix == 0
    gemma_like = StartsWithBos(gpt2)
    assert bos_prefix(gemma_like) == [gpt2.bos_token_id] and bos_prefix(gemma_like, bos=False) == []
    c = pseudo_sentences(TEXT, gemma_like, n_k=5, n_s=3)
    assert c.prefix == 1 and c.ids.shape == (3, 6) and (c.ids[:, 0] == gpt2.bos_token_id).all()
    noise = gibberish(50257, 3, 5, seed=0, prefix=c.prefix_ids)  # compared like with like
    assert noise.prefix == 1 and noise.ids.shape == (3, 6) and (noise.ids[:, 0] == gpt2.bos_token_id).all()
    assert np.array_equal(noise.ids[:, 1:], gibberish(50257, 3, 5, seed=0).ids)


def test_bad_chunk_sizes_are_clear_errors():
    tok = gpt2_tokenizer()
    with pytest.raises(ValueError, match="at least 2"):
        pseudo_sentences(TEXT, tok, n_k=1)
    with pytest.raises(ValueError, match="larger than the whole text"):
        pseudo_sentences("a few words only", tok, n_k=50)
    for empty in ("", "  \n "):
        with pytest.raises(ValueError, match="has 0 token.*give a longer text"):
            pseudo_sentences(empty, tok, n_k=2)


def test_gibberish_is_seeded_and_uniform():
    a, b, c = gibberish(50257, 400, 10, seed=1), gibberish(50257, 400, 10, seed=1), gibberish(50257, 400, 10, seed=2)
    assert np.array_equal(a.ids, b.ids) and not np.array_equal(a.ids, c.ids)
    assert a.ids.shape == (400, 10) and a.ids.min() >= 0 and a.ids.max() < 50257
    assert abs(a.ids.mean() - 50256 / 2) < 0.02 * 50257


def test_walden_with_gpt2_tokenizer_matches_paper_scale():
    c = corpus.walden(gpt2_tokenizer(), n_k=50)
    assert 2800 <= c.n_s <= 3000  # the paper: about 2,900 pseudo-sentences for GPT-2's tokenizer


def test_common_nouns():
    nouns = corpus.common_nouns()
    assert len(nouns) == 100 and all(n.isalpha() for n in nouns)
