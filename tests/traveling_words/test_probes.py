"""Noun probes, head SVD tables and probe rates against direct, slow computations on tiny models."""
import numpy as np
import pytest
import torch

from lotlib import load_model
from lotlib.traveling_words import head_svd as HS
from lotlib.traveling_words import probes as P
from lotlib.traveling_words import vocabulary as Voc

NOUN, HEAD, K = 1110, 1, 5  # a token id, a head, top-k


def _perturbed(folder):
    """A tiny model whose norms and biases are random too (fresh inits leave gamma = 1, beta = 0, b = 0)."""
    model = load_model(str(folder))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.hf.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


@pytest.fixture(scope="module")
def tiny_gemma_dir(tmp_path_factory):
    """A randomly initialised 2-block Gemma 3: embedding scale, per-head q/k norms, grouped-query attention."""
    from transformers import Gemma3TextConfig

    from ..conftest import _save_tiny, gpt2_tokenizer

    config = Gemma3TextConfig(vocab_size=50257, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                              max_position_embeddings=128, sliding_window=16)
    return _save_tiny(tmp_path_factory.mktemp("gemma"), config, gpt2_tokenizer())


@pytest.fixture(scope="module", params=["gpt2", "llama", "gemma"])
def model(request, tiny_gpt2_dir, tiny_llama_dir, tiny_gemma_dir):
    return _perturbed({"gpt2": tiny_gpt2_dir, "llama": tiny_llama_dir, "gemma": tiny_gemma_dir}[request.param])


def _embedding(v, token):
    return v.W_E[token].detach() * v.embed_scale


@pytest.mark.parametrize("V", [1000, 50257, 49152])
def test_blockwise_topk_equals_torch_topk(V):
    x = torch.randn(3, 4, V, generator=torch.Generator().manual_seed(V))
    x[0, 0, -3:] = torch.tensor([100.0, 101.0, 102.0])  # the best entries in the short last block
    values, ids = P.topk(x, K)
    expected = x.topk(K, dim=-1)
    assert torch.equal(values, expected.values) and torch.equal(ids, expected.indices)


def test_qk_probe_matches_direct_computation(model):
    v = model.view
    heads, norm = v.heads(0), v.block_norm(0)
    ids = torch.tensor([NOUN, 42, 7000])
    scores, top = P.qk_top(v, 0, ids, K, chunk=2)
    assert top.shape == (v.n_heads, 3, K)
    X = norm(v.W_E.detach() * v.embed_scale)
    for h in range(v.n_heads):
        if heads.q_norm is None:  # the bilinear form: q W_QK^h . block_norm(e_v)
            direct = X @ (X[NOUN] @ heads.W_QK(h))
        else:  # Gemma 3 normalizes each head's query and key before the dot product
            direct = heads.k_norm(X @ heads.W_K[h]) @ heads.q_norm(X[NOUN] @ heads.W_Q[h]) * heads.scaling
        expected = direct.topk(K)
        torch.testing.assert_close(scores[h, 0], expected.values, rtol=1e-4, atol=1e-5)
        assert top[h, 0].tolist() == expected.indices.tolist()


def _direct_logits(v, layer, token, h=None, residual=True):
    """final_norm(e + u_h + b_O) @ W_U (+ b_U), u_h = q W_VO^h + b_V^h W_O^h; h=None sums the heads."""
    heads, e = v.heads(layer), _embedding(v, token)
    q = v.block_norm(layer)(e)
    u = sum(q @ _W_VO(heads, i) + heads.b_V[i] @ heads.W_O[i] for i in ([h] if h is not None else range(v.n_heads)))
    x = e + u + heads.b_O if residual else u
    logits = v.final_norm(x) @ v.W_U.detach()
    return logits if v.b_U is None else logits + v.b_U.detach()


@pytest.mark.parametrize("n_queries", [None, 1], ids=["factored", "direct"])
def test_vo_probe_matches_direct_computation(model, n_queries):
    v = model.view
    layer, ids = v.n_layers - 1, torch.tensor([NOUN, 99])
    with_residual, update = P.vo_scorer(v, layer, n_queries)(ids)
    assert with_residual.shape == (v.n_heads + 1, 2, v.W_E.shape[0])
    for h in (0, HEAD, None):
        row = v.n_heads if h is None else h
        torch.testing.assert_close(with_residual[row, 0], _direct_logits(v, layer, NOUN, h), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(update[row, 0], _direct_logits(v, layer, NOUN, h, residual=False),
                                   rtol=1e-4, atol=1e-4)
    (scores, top), (_, top_update) = P.vo_top(v, layer, ids, K, chunk=1)
    expected = _direct_logits(v, layer, NOUN, HEAD).topk(K)
    assert top[HEAD, 0].tolist() == expected.indices.tolist()
    assert top_update[HEAD, 0].tolist() == _direct_logits(v, layer, NOUN, HEAD, False).topk(K).indices.tolist()
    heads, q = v.heads(layer), v.block_norm(layer)(_embedding(v, NOUN))
    u = [q @ _W_VO(heads, i) + heads.b_V[i] @ heads.W_O[i] for i in range(v.n_heads)]
    norms = torch.stack([x.norm() for x in u + [sum(u)]])
    torch.testing.assert_close(P.update_norms(v, layer, ids)[:, 0], norms, rtol=1e-4, atol=1e-5)


def test_noun_table_rows_are_the_probes(model):
    v = model.view
    vocab = Voc.vocab_strings(model.tokenizer, v.W_E.shape[0])
    queries = Voc.single_tokens(model.tokenizer, ["time", "water", "zxqv"], leading_space=True)
    assert queries.words == ["time", "water"] and queries.dropped == ["zxqv"]
    table = P.noun_table(v, vocab, queries, [1], K).set_index(["probe", "noun", "head"])
    given = P.noun_table(v, vocab, queries, [1], K, tops=P.probe_tops(v, [1], queries.ids, K))
    assert given.set_index(["probe", "noun", "head"]).equals(table)
    assert len(table) == 2 * (v.n_heads + 2 * (v.n_heads + 1))
    _, qk = P.qk_top(v, 1, queries.ids, K)
    (_, vo), _ = P.vo_top(v, 1, queries.ids, K)
    row = table.loc[("QK", "water", str(HEAD))]
    assert row.tokens == " | ".join(Voc.token_label(vocab[t]) for t in qk[HEAD, 1].tolist())
    assert row.matches == sum(vocab[t] in Voc.variants("water") for t in qk[HEAD, 1].tolist())
    assert table.loc[("VO", "time", "sum")].top1 == Voc.token_label(vocab[vo[v.n_heads, 0, 0]])


def test_untied_model_reads_out_with_w_u(tiny_llama_dir):
    v = load_model(str(tiny_llama_dir)).view
    R, _ = v.unembedding()
    assert not v.tied and torch.equal(R, v.W_U.detach().T) and not torch.equal(R, v.W_E.detach())


def test_gqa_query_heads_share_key_projections(tiny_llama_dir):
    v = load_model(str(tiny_llama_dir)).view
    heads = v.heads(0)
    assert heads.n_kv_heads == 2 and v.n_heads == 4
    torch.testing.assert_close(heads.W_K[0], heads.W_K[1])  # the view expands kv head 0 to query heads 0, 1
    scores = P.qk_scorer(v, 0)(torch.tensor([NOUN]))
    X = v.block_norm(0)(v.W_E.detach())
    for h in range(4):
        torch.testing.assert_close(scores[h, 0], X @ (X[NOUN] @ heads.W_QK(h)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["qk", "vo"])
def test_head_svd_is_the_svd_of_the_head_matrix(model, kind):
    v = model.view
    heads = v.heads(1)
    U, S, V = HS.head_svd(v, 1, kind)
    H, d, dh = U.shape
    assert (H, d, dh) == (v.n_heads, v.d_model, v.d_head)
    for h in range(H):
        W = heads.W_QK(h) if kind == "qk" else _W_VO(heads, h)
        torch.testing.assert_close(U[h] * S[h] @ V[h].T, W, rtol=1e-4, atol=1e-5)
        full = torch.linalg.svdvals(W.double())
        torch.testing.assert_close(S[h].double(), full[:dh], rtol=1e-4, atol=1e-6)
        assert full[dh:].max() < 1e-6 * full[0]  # rank <= d_head: the rest is the null space
        torch.testing.assert_close(U[h].T @ U[h], torch.eye(dh), atol=1e-4, rtol=0)
        torch.testing.assert_close(V[h].T @ V[h], torch.eye(dh), atol=1e-4, rtol=0)


def _W_VO(heads, h: int) -> torch.Tensor:
    """Value-output map of head h, `(d, d)`: update = x W_VO."""
    return heads.W_V[h] @ heads.W_O[h]


def _fix_signs(U, V, rows):
    """Flip each singular pair (u_i, v_i) together so that v_i's best match among `rows` `(V, d)` is on its
    positive side (max_v v_i . row_v >= max_v -v_i . row_v), as in the authors' code. U, V `(H, d, r)`."""
    scores = torch.einsum("hdr,vd->hrv", V, rows)
    sign = torch.where(scores.amax(-1) >= -scores.amin(-1), 1.0, -1.0)[:, None, :]
    return U * sign, V * sign


def test_sign_fixing_puts_the_best_match_on_the_positive_side(model):
    v = model.view
    U, S, V = HS.head_svd(v, 0, "vo")
    rows = v.unembedding()[0]
    Uf, Vf = _fix_signs(U, V, rows)
    torch.testing.assert_close(Uf * S[:, None] @ Vf.transpose(1, 2), U * S[:, None] @ V.transpose(1, 2))
    scores = torch.einsum("hdr,vd->hrv", Vf, rows)
    assert (scores.amax(-1) >= -scores.amin(-1)).all()
    flipped = _fix_signs(-U, -V, rows)  # the result does not depend on the SVD's arbitrary signs
    torch.testing.assert_close(flipped[0], Uf)
    torch.testing.assert_close(flipped[1], Vf)


def test_svd_table_reads_the_fixed_directions(model):
    v = model.view
    vocab = Voc.vocab_strings(model.tokenizer, v.W_E.shape[0])
    table = HS.svd_table(v, vocab, 0, "qk", n_dirs=4, k=3)
    assert len(table) == v.n_heads * 4 and (table.groupby("head")["sigma"].diff().dropna() <= 1e-6).all()
    U, S, V = HS.head_svd(v, 0, "qk")
    X = v.block_norm(0)(v.W_E.detach() * v.embed_scale)
    Uf, Vf = _fix_signs(U[..., :4], V[..., :4], X)
    best = (X @ Vf[2, :, 1]).topk(3).indices.tolist()
    row = table[(table["head"] == 2) & (table.direction == 1)].iloc[0]
    assert row.right == ", ".join(Voc.token_label(vocab[t]) for t in best)
    left = (X @ Uf[2, :, 1]).topk(3).indices.tolist()
    assert row.shared == bool({vocab[t].strip().lower() for t in left} & {vocab[t].strip().lower() for t in best} - {""})


def test_coverage_is_monotone_and_reaches_one_at_d_head(model):
    v = model.view
    _, S, _ = HS.head_svd(v, 0, "qk")
    curve = HS.coverage(S, v.d_model)
    dh = v.d_head
    assert curve.shape == (v.n_heads, v.d_model)
    assert (curve[:, 1:] >= curve[:, :-1] - 1e-12).all() and (curve[:, : dh - 1] < 1).all()
    assert abs(curve[:, dh - 1:] - 1).max() < 1e-12


def test_variants():
    assert Voc.plural("city") == "cities" and Voc.plural("day") == "days" and Voc.plural("box") == "boxes"
    assert Voc.plural("child") == "children" and Voc.plural("person") == "people" and Voc.plural("time") == "times"
    forms = Voc.variants("child")
    assert forms == {"child", "children", "Child", "Children", " child", " children", " Child", " Children"}
    vocab = ["child", " Children", "chil", " childs", "time", " times", "TIME"]
    mask = Voc.variant_mask(vocab, ["child", "time"])
    assert mask.tolist() == [[True, True, False, False, False, False, False],
                             [False, False, False, False, True, True, False]]


def test_noun_tokens_and_random_words(tiny_gpt2_dir):
    from lotlib import common_nouns

    tokenizer = load_model(str(tiny_gpt2_dir)).tokenizer
    nouns = common_nouns()
    for space in (False, True):
        q = Voc.single_tokens(tokenizer, nouns, space)
        assert len(q.words) + len(q.dropped) == len(nouns) == 100
        assert tokenizer.batch_decode(q.ids[:, None]) == [(" " if space else "") + w for w in q.words]
    vocab = Voc.vocab_strings(tokenizer, 50257)
    a, b = (Voc.random_words(vocab, 50, True, nouns, seed=3) for _ in range(2))
    assert Voc.variant_counts(vocab, nouns).tolist() == Voc.variant_mask(vocab, nouns).sum(1).tolist()
    assert a.words == b.words and len(set(a.words)) == 50
    assert not set(a.words) & set().union(*(Voc.variants(n) for n in nouns))
    assert [vocab[i] for i in a.ids.tolist()] == [" " + w for w in a.words]
    assert Voc.random_words(vocab, 50, True, nouns, seed=4).words != a.words


def test_probe_rates_count_variants_in_the_top_k(model):
    v = model.view
    vocab = Voc.vocab_strings(model.tokenizer, v.W_E.shape[0])
    words = ["time", "water", "house"]
    ids = torch.tensor([vocab.index(" " + w) for w in words])
    mask = Voc.variant_mask(vocab, words)
    layers = [0, v.n_layers - 1]
    rates = P.probe_rates(v, layers, ids, mask, k=K, chunk=2)
    assert rates["qk"].shape == (2, v.n_heads, 3) and rates["vo"].shape == (2, v.n_heads + 1, 3)
    for i, layer in enumerate(layers):
        _, qk = P.qk_top(v, layer, ids, K)
        (_, vo), (_, update) = P.vo_top(v, layer, ids, K)
        for name, top in (("qk", qk), ("vo", vo), ("vo_update", update)):
            for h in range(top.shape[0]):
                for j, w in enumerate(words):
                    hits = sum(vocab[t] in Voc.variants(w) for t in top[h, j].tolist())
                    assert rates[name][i, h, j] == pytest.approx(hits / K)


def test_random_words_of_a_wordpiece_vocabulary_are_its_whole_words():
    """A WordPiece vocabulary (BERT, MPNet) has no spaced tokens: "word" and " word" are one token, pieces are
    marked "##". Its random words are its whole alphabetic words, in either query form."""
    vocab = Voc.Vocabulary(["[PAD]", "house", "##s", "table", "##ing", "river", "cat", "stone", "ab", "Apple"])
    assert not vocab.spaced and Voc.Vocabulary(["a", " house"]).spaced
    for space in (False, True):
        drawn = Voc.random_words(vocab, 4, space, ["cat"], seed=0)
        assert sorted(drawn.words) == ["house", "river", "stone", "table"]
        assert [vocab[i] for i in drawn.ids.tolist()] == drawn.words
    with pytest.raises(ValueError, match="the vocabulary has 4"):
        Voc.random_words(vocab, 5, False, ["cat"], seed=0)


def test_random_words_match_the_variant_counts(tiny_gpt2_dir):
    from lotlib import common_nouns

    tokenizer = load_model(str(tiny_gpt2_dir)).tokenizer
    vocab, nouns = Voc.vocab_strings(tokenizer, 50257), common_nouns()
    counts = Voc.variant_counts(vocab, Voc.single_tokens(tokenizer, nouns, False).words)
    matched = Voc.random_words(vocab, len(counts), False, nouns, seed=0, like=counts)
    assert sorted(Voc.variant_counts(vocab, matched.words)) == sorted(counts)  # one for one
    unmatched = Voc.random_words(vocab, len(counts), False, nouns, seed=0)
    assert Voc.variant_counts(vocab, unmatched.words).mean() < counts.mean()  # the cap the matching removes
    assert Voc.random_words(vocab, len(counts), False, nouns, seed=0, like=counts).words == matched.words
    few = Voc.random_words(vocab, 10, False, nouns, seed=1, like=counts)
    assert len(few.words) == 10 and set(Voc.variant_counts(vocab, few.words)) <= set(counts)
    table = Voc.count_table(vocab, {"nouns": nouns, "matched": matched.words})
    assert table["matched"].sum() == len(counts) and table.index.name == "variant tokens"


def test_matching_falls_back_to_the_nearest_count():
    rng = np.random.default_rng(0)
    picks = Voc._matching(np.array([2, 2, 5, 8]), np.array([8, 8, 2]), rng)
    assert sorted(picks[:2]) == [2, 3] and picks[2] in (0, 1)  # the second 8 takes the 5, the nearest left


def _specificity_by_hand(v, layer, ids, top):
    X = torch.nn.functional.normalize(v.block_norm(layer)(v.embed(ids)), dim=-1)
    H, n, k = top.shape
    out = np.zeros((H, n))
    for h in range(H):
        keys = [torch.nn.functional.normalize(v.block_norm(layer)(v.embed(top[h, j])), dim=-1) for j in range(n)]
        for i in range(n):
            s = [(keys[j] @ X[i]).mean().item() for j in range(n)]
            out[h, i] = np.mean([1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0 for j in range(n) if j != i])
    return out


def test_key_specificity_against_a_direct_computation(model):
    v = model.view
    ids = torch.tensor([NOUN, 42, 7000, 99, 1234])
    _, top = P.qk_top(v, 0, ids, K)
    spec = P.key_specificity(v, 0, ids, top)
    assert spec.shape == (v.n_heads, 5)
    np.testing.assert_allclose(spec, _specificity_by_hand(v, 0, ids, top), atol=1e-6)
    same = P.key_specificity(v, 0, ids, top[:, :1].expand_as(top))  # one set of keys for every query
    np.testing.assert_allclose(same, 0.5)
    itself = P.key_specificity(v, 0, ids, ids[None, :, None].expand(v.n_heads, 5, K))  # each query is its keys
    np.testing.assert_allclose(itself, 1.0)


def test_query_estimates():
    rates = np.array([[0.0, 0.2, 0.4, 0.2], [0.6, 0.6, 0.8, 0.8]])  # (heads, queries)
    mean = P.query_estimate(rates, n_boot=200, seed=1)
    assert mean.value == pytest.approx(0.45) and mean.lo <= mean.value <= mean.hi and mean.n == 4
    best = P.query_estimate(rates[None], best_head=True, n_boot=200, seed=1)  # (blocks, heads, queries)
    assert best.value == pytest.approx(0.7) and best.unit == "nouns"
    assert P.query_estimate(rates, best_head=True, n_boot=200, seed=1) == best  # deterministic for a seed
    swapped = P.query_estimate(np.eye(2), best_head=True, n_boot=200, seed=1)  # each head best on one query
    assert swapped.value == 0.5 and swapped.lo == 0.5 and swapped.hi == 1.0  # the best head chosen per resample


def test_peak_depth():
    curve = np.array([[0.0, 0.1, 0.0], [0.3, 0.5, 0.4], [0.1, 0.0, 0.1]])  # (blocks, queries)
    peak = P.peak_depth(curve, [0, 5, 10], 11, n_boot=100)
    assert peak.value == pytest.approx(0.5) and 0 <= peak.lo <= peak.hi <= 1
    tied = P.peak_depth(np.array([[0.2, 0.2], [0.0, 0.0], [0.2, 0.2]]), [0, 5, 10], 11, n_boot=10)
    assert tied.value == pytest.approx(0.5)  # the mean depth of the tied blocks, not the first
    assert np.isnan(P.peak_depth(np.zeros((3, 4)), [0, 5, 10], 11, n_boot=10).value)


@pytest.mark.parametrize("kind", ["qk", "vo"])
def test_direct_singular_values_give_rank_d_head(model, kind):
    v = model.view
    s = HS.direct_singular_values(v, 1, kind)
    assert s.shape == (v.n_heads, v.d_model) and torch.allclose(s[:, 0], torch.ones(v.n_heads, dtype=torch.float64))
    assert (HS.numerical_rank(s) == v.d_head).all()  # random factors: full rank d_head, exactly
    _, S, _ = HS.head_svd(v, 1, kind)
    torch.testing.assert_close(s[:, : v.d_head], (S / S[:, :1]).double(), rtol=1e-4, atol=1e-6)
    assert HS.numerical_rank(torch.zeros(3, 8, dtype=torch.float64)).tolist() == [0, 0, 0]


WORDS = ["time", "water", "house", "car", "day", "zxqv"]


@pytest.fixture(scope="module")
def queries(tiny_gpt2_dir):
    tokenizer = load_model(str(tiny_gpt2_dir)).tokenizer
    return Voc.noun_queries(tokenizer, 50257, leading_space=True, n_random=4, seed=2, words=WORDS)


def test_noun_queries_is_the_query_set_built_by_hand(tiny_gpt2_dir, queries):
    tokenizer = load_model(str(tiny_gpt2_dir)).tokenizer
    vocab = Voc.vocab_strings(tokenizer, 50257)
    nouns = Voc.single_tokens(tokenizer, WORDS, True)
    randoms = Voc.random_words(vocab, 4, True, WORDS, 2, like=Voc.variant_counts(vocab, nouns.words))
    assert queries.nouns.words == nouns.words and queries.nouns.ids.equal(nouns.ids) and queries.n == 5
    assert queries.other.words == Voc.single_tokens(tokenizer, WORDS, False).words
    assert queries.randoms.words == randoms.words and len(queries.unmatched.words) == 4
    assert queries.ids.tolist() == nouns.ids.tolist() + randoms.ids.tolist()
    assert queries.mask.equal(Voc.variant_mask(vocab, nouns.words + randoms.words))
    assert queries.chance == pytest.approx(Voc.variant_counts(vocab, nouns.words).mean() / 50257)
    means = queries.mean_variant_tokens()
    assert means["nouns"] == pytest.approx(Voc.variant_counts(vocab, nouns.words).mean())
    assert means["random words (matched)"] == pytest.approx(Voc.variant_counts(vocab, randoms.words).mean())
    same_size = Voc.noun_queries(tokenizer, 50257, True, None, 2, WORDS)  # None: as many as the nouns
    assert len(same_size.randoms.words) == 5


def test_spectra_null_space_check_and_tables(model):
    v = model.view
    layers, dh, d = [0, 1], v.d_head, v.d_model
    spec = HS.spectra(v, layers)
    S = HS.head_svd(v, 1, "vo")[1]
    torch.testing.assert_close(spec.S[1, "vo"], S)
    ranks = spec.rank_at(0.9, 1, "vo")
    curve = HS.coverage(S, d)
    for h, r in enumerate(ranks):  # the smallest rank that reaches 90%
        assert curve[h, r - 1] >= 0.9 - 1e-12 and (r == 1 or curve[h, r - 2] < 0.9 - 1e-12)
    assert len(spec.coverage_frame()) == 2 * len(layers) * v.n_heads * d
    gaps = HS.null_space_check(v, layers)
    assert len(gaps) == 2 * len(layers) * v.n_heads and (gaps["rank"] == dh).all()
    vocab = Voc.vocab_strings(model.tokenizer, v.W_E.shape[0])
    tables = HS.svd_tables(v, vocab, layers, n_dirs=3, k=2)
    assert HS.side_by_side(tables, 1, 0).shape == (3, 6)
    assert HS.all_heads(tables, 0, "VO").shape == (3, 2 * v.n_heads)


def test_versus_word_compares_whole_intervals():
    from lotlib.stats import LIES, Estimate, side_word

    a, b = Estimate(0.5, 0.4, 0.6, 10, "nouns", "bootstrap"), Estimate(0.2, 0.1, 0.3, 10, "words", "bootstrap")
    assert side_word(a, LIES, b) == "lies above" and side_word(b, LIES, a) == "lies below"
    touching = Estimate(0.35, 0.25, 0.45, 10, "words", "bootstrap")
    assert side_word(a, LIES, touching) == "overlaps"
    assert side_word(a, LIES, Estimate(0.2, float("nan"), float("nan"), 1, "", "")) == "overlaps"
    assert side_word(a, ("less", "same", "more"), b) == "more"
