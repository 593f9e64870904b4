"""Traveling words: travel cosines equal a direct per-position computation, the baseline is a seeded
permutation, the logit lens reproduces the model's logits, and the UMAP cache is keyed and reused."""
import numpy as np
import pytest
import torch

from lotlib import load_model
from lotlib.traveling_words import umap_map
from lotlib.traveling_words.lens import (
    arrival,
    first_layer_within,
    follow_token,
    lens_logits,
    locate,
    logit_lens,
    token_path,
)
from lotlib.traveling_words.travel import (
    paired_summary,
    per_sentence_difference,
    positive_block_share,
    shuffled_next,
    travel_cosines,
    trip_difference,
    win_share,
)
from lotlib.traveling_words.umap_map import (
    approach_rank,
    approach_ratios,
    embedding_maps,
    fitted_umap,
    neighbour_agreement,
    umap_key,
    umap_path,
)

from ..conftest import StartsWithBos

SENTENCE = "To kill two birds with one stone"


def _final_norm_module(model):
    base = model.hf.base_model
    return base.ln_f if hasattr(base, "ln_f") else base.norm


def _cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_travel_cosines_match_direct_computation(fixture, request):
    model = load_model(str(request.getfixturevalue(fixture)))
    ids = np.random.default_rng(0).integers(0, 50257, size=(3, 6))
    shuffled = shuffled_next(ids[:, 1:], seed=0)
    travel = travel_cosines(model, ids, {"shuffled": shuffled}, batch_size=2, progress=False)
    L = model.view.n_layers
    assert travel["W_E"].steps["true"].shape == (3, 5, L) and travel["W_E"].trip["shuffled"].shape == (3, 5)
    with torch.no_grad():  # independent path: HF hidden states and the model's own final-norm module
        hidden = model.hf(torch.from_numpy(ids), output_hidden_states=True).hidden_states
        ln_f = _final_norm_module(model)
        Y = torch.stack([ln_f(h) for h in hidden[:L]] + [hidden[L]], dim=2).numpy()  # (n, T, L+1, d)
        E = model.view.W_E.detach()
        tables = {"W_E": E.numpy(), "final_norm(W_E)": ln_f(E).numpy()}
    for name, table in tables.items():
        for s in range(3):
            for i in range(5):
                for kind, nxt in (("true", ids[s, i + 1]), ("shuffled", shuffled[s, i])):
                    target = table[nxt] - table[ids[s, i]]
                    steps = [_cos(Y[s, i, t + 1] - Y[s, i, t], target) for t in range(L)]
                    np.testing.assert_allclose(travel[name].steps[kind][s, i], steps, atol=2e-5)
                    np.testing.assert_allclose(travel[name].trip[kind][s, i],
                                               _cos(Y[s, i, L] - Y[s, i, 0], target), atol=2e-5)


def test_repeated_token_gives_nan_not_a_number():
    from lotlib.traveling_words.travel import _cosine

    assert torch.isnan(_cosine(torch.ones(4), torch.zeros(4)))
    assert float(_cosine(torch.ones(4), 2 * torch.ones(4))) == pytest.approx(1.0)


def test_shuffled_baseline_is_a_seeded_permutation():
    nxt = np.random.default_rng(1).integers(0, 1000, size=(7, 9))
    a, b, c = shuffled_next(nxt, 3), shuffled_next(nxt, 3), shuffled_next(nxt, 4)
    assert a.shape == nxt.shape
    np.testing.assert_array_equal(np.sort(a.ravel()), np.sort(nxt.ravel()))  # same multiset of tokens
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, nxt)
    rows = shuffled_next(nxt, 3, within_rows=True)  # each pseudo-sentence keeps its own tokens
    np.testing.assert_array_equal(np.sort(rows, axis=1), np.sort(nxt, axis=1))
    assert not np.array_equal(rows, nxt)


def test_paired_summary_difference_interval_and_shift():
    rng = np.random.default_rng(2)
    true, shuffled = rng.normal(0.1, 0.05, size=(40, 10, 3)), rng.normal(0.0, 0.05, size=(40, 10, 3))
    s = paired_summary(true, shuffled, n_boot=500, seed=0)
    per_sentence = true.mean(1) - shuffled.mean(1)
    np.testing.assert_allclose(s["difference"], per_sentence.mean(0))
    np.testing.assert_allclose(s["difference"], s["true"] - s["shuffled"])
    np.testing.assert_allclose(s["se"], per_sentence.std(0, ddof=1) / np.sqrt(40))
    assert ((s["ci_lo"] < s["difference"]) & (s["difference"] < s["ci_hi"])).all()
    shifted = paired_summary(true + 0.3, shuffled, n_boot=500, seed=0)  # same resamples: interval shifts
    np.testing.assert_allclose(shifted["ci_lo"] - s["ci_lo"], 0.3, atol=1e-12)
    true[0, 0, 0] = np.nan  # a repeated token: ignored, not propagated
    assert np.isfinite(paired_summary(true, shuffled, n_boot=10)["difference"]).all()


def test_trip_estimates_resample_sentences_and_agree_with_the_summary_table():
    rng = np.random.default_rng(5)
    true, shuffled = rng.normal(0.05, 0.1, size=(30, 12)), rng.normal(0.0, 0.1, size=(30, 12))
    true[2, 4], shuffled[7, 1] = np.nan, np.nan  # zero targets: left out of both sides of the pair
    estimate = trip_difference(true, shuffled, n_boot=400, seed=1)
    table = paired_summary(true, shuffled, n_boot=400, seed=1).iloc[0]
    assert estimate.n == 30 and estimate.unit == "pseudo-sentences"
    assert (estimate.value, estimate.lo, estimate.hi) == pytest.approx((table["difference"], table["ci_lo"], table["ci_hi"]))
    paired = np.where(np.isnan(true) | np.isnan(shuffled), np.nan, true - shuffled)
    assert estimate.value == pytest.approx(np.nanmean(paired, axis=1).mean())
    np.testing.assert_allclose(per_sentence_difference(true, shuffled), np.nanmean(paired, axis=1))
    assert estimate.lo < estimate.value < estimate.hi
    assert trip_difference(shuffled, true, n_boot=400, seed=1).hi < 0  # the sign follows the pair


def test_win_share_pools_positions_and_block_share_counts_leaning_blocks():
    true = np.array([[1.0, 1.0, np.nan, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    baseline = np.full_like(true, 0.5)
    share = win_share(true, baseline, n_boot=200, seed=0)
    assert share.value == pytest.approx(7 / 11) and share.n == 3 and share.lo <= share.value <= share.hi
    rng = np.random.default_rng(6)
    lean = np.array([0.1, 0.1, -0.1, 0.1])  # three of four blocks lean toward the true next word
    steps_true = rng.normal(0.0, 0.01, size=(40, 5, 4)) + lean
    steps_baseline = rng.normal(0.0, 0.01, size=(40, 5, 4))
    blocks = positive_block_share(steps_true, steps_baseline, n_boot=200, seed=0)
    assert blocks.value == 0.75 and blocks.lo == blocks.hi == 0.75  # far from zero: every resample agrees


def test_approach_ratio_and_the_rank_of_the_target():
    points = np.array([[10.0, 0.0], [0.0, 10.0], [-10.0, 0.0], [9.0, 1.0]])
    start, end = np.zeros(2), np.array([8.0, 0.0])
    ratios = approach_ratios(start, end, points)
    np.testing.assert_allclose(ratios, [0.2, np.hypot(8, 10) / 10, 1.8, np.hypot(1, 1) / np.hypot(9, 1)])
    assert approach_rank(np.delete(ratios, 3), ratios[3]) == 0.0  # the path heads for point 3 most
    assert approach_rank(np.delete(ratios, 0), ratios[0]) == pytest.approx(1 / 3)
    assert approach_rank(np.delete(ratios, 2), ratios[2]) == 1.0


@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_logit_lens_at_last_layer_equals_model_logits(fixture, request):
    model = load_model(str(request.getfixturevalue(fixture)))
    ids, position = locate(model.tokenizer, SENTENCE, -2)
    assert model.tokenizer.decode([int(ids[position])]) == " one" and position == len(ids) - 2
    X = token_path(model, ids, position)
    assert X.shape == (model.view.n_layers + 1, model.view.d_model)
    with torch.no_grad():
        logits = model.hf(torch.from_numpy(ids[None])).logits[0, position].numpy()
    np.testing.assert_allclose(lens_logits(model, X[-1]), logits, atol=1e-4, rtol=1e-4)
    stone = int(ids[position + 1])
    table = logit_lens(model, X, k=5, target=stone)
    assert len(table) == model.view.n_layers + 1
    assert table["top 1"].iloc[-1].startswith(repr(model.tokenizer.decode([int(logits.argmax())])))
    assert table["rank of ' stone'"].iloc[-1] == int((logits > logits[stone]).sum())
    with pytest.raises(ValueError, match="outside"):
        locate(model.tokenizer, SENTENCE, 50)


def test_a_tokenizer_that_starts_texts_with_bos_gets_its_bos_before_the_sentence(tiny_gpt2_dir):
    tok = load_model(str(tiny_gpt2_dir)).tokenizer
    plain, at = locate(tok, SENTENCE, -2)
    with_bos, at_bos = locate(StartsWithBos(tok), SENTENCE, -2)
    assert with_bos[0] == tok.bos_token_id and with_bos[1:].tolist() == plain.tolist() and at_bos == at + 1
    assert locate(StartsWithBos(tok), SENTENCE, 0)[1] == 1  # token 0 is the sentence's first word, not the BOS


def test_travel_leaves_out_the_positions_before_first(tiny_gpt2_dir):
    model = load_model(str(tiny_gpt2_dir))
    ids = np.random.default_rng(0).integers(0, 50257, size=(2, 6))
    ids[:, 0] = model.tokenizer.bos_token_id
    whole = travel_cosines(model, ids, {}, progress=False)["W_E"]
    text = travel_cosines(model, ids, {}, first=1, progress=False)["W_E"]
    assert text.steps["true"].shape == (2, 4, model.view.n_layers)  # the BOS -> first word pair is gone
    np.testing.assert_allclose(text.steps["true"], whole.steps["true"][:, 1:], atol=1e-6)


def test_neighbour_agreement_nearest_rows_versus_largest_dot_products():
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(200, 8))
    states = rng.normal(size=(5, 8))
    sphere = rows / np.linalg.norm(rows, axis=1, keepdims=True)  # equal norms: nearest == largest dot product
    np.testing.assert_array_equal(neighbour_agreement(states, sphere, k=10), 1.0)
    assert neighbour_agreement(1e6 * states, rows, k=10).min() == 1.0  # a far state: distance ranks by dot
    nearest = np.argsort(((rows[None] - states[:, None]) ** 2).sum(-1), axis=1)[:, :10]
    largest = np.argsort(-(states @ rows.T), axis=1)[:, :10]
    expected = [len(np.intersect1d(a, b)) / 10 for a, b in zip(nearest, largest)]
    np.testing.assert_allclose(neighbour_agreement(states, rows, k=10), expected)


def test_umap_cache_key_and_reuse(tmp_path, monkeypatch):
    import umap

    monkeypatch.setenv("LOTLIB_CACHE_DIR", str(tmp_path))
    data = np.random.default_rng(0).normal(size=(300, 16)).astype(np.float32)
    params = dict(n_neighbors=15, min_dist=0.1, n_components=3)
    key = umap_key(data, "tiny", "W_E", 0, **params)
    assert umap_path(umap_key(data, "tiny", "W_E", 1, **params)) != umap_path(key)  # seed
    assert umap_path(umap_key(data[:250], "tiny", "W_E", 0, **params)) != umap_path(key)  # rows
    assert umap_path(umap_key(data, "other", "W_E", 0, **params)) != umap_path(key)  # model identity
    first = fitted_umap(data, identity="tiny", seed=0, progress=False)
    assert umap_path(key).exists() and first.embedding_.shape == (300, 3)

    def refit(*args, **kwargs):
        raise AssertionError("the cached UMAP should have been reused")

    monkeypatch.setattr(umap.UMAP, "fit", refit)
    again = fitted_umap(data, identity="tiny", seed=0, progress=False)
    np.testing.assert_array_equal(again.embedding_, first.embedding_)
    with pytest.raises(AssertionError, match="reused"):  # another seed is another key: it fits
        fitted_umap(data, identity="tiny", seed=1, progress=False)
    placed = again.transform(np.vstack([data[5] * 0.5, data[7] + 0.1]))  # the reloaded model places new points
    assert placed.shape == (2, 3) and np.isfinite(placed).all()


def test_follow_token_and_its_logit_lens(tiny_gpt2_dir):
    model = load_model(str(tiny_gpt2_dir))
    path = follow_token(model, SENTENCE, -2)
    ids, position = locate(model.tokenizer, SENTENCE, -2)
    assert (path.current_name, path.target_name) == (" one", " stone") and path.position == position
    np.testing.assert_allclose(path.X, token_path(model, ids, position))
    with torch.no_grad():  # the model's own final-norm module
        expected = _final_norm_module(model)(torch.from_numpy(path.X)).numpy()
    np.testing.assert_allclose(path.normed, expected, atol=1e-5)
    lens = arrival(model, path, k=3)
    logits = lens_logits(model, path.X)
    np.testing.assert_array_equal(lens.ranks, (logits > logits[:, [path.target]]).sum(-1))
    assert lens.top1 == [model.tokenizer.decode([int(i)]) for i in logits.argmax(-1)]
    assert lens.first_top5 == first_layer_within(lens.ranks, 5)
    with pytest.raises(ValueError, match="next token"):
        follow_token(model, SENTENCE, -1)


def test_first_layer_within():
    assert first_layer_within(np.array([40, 7, 3, 0, 2]), 5) == 2
    assert first_layer_within(np.array([40, 7, 3, 0, 2]), 1) == 3
    assert first_layer_within(np.array([40, 7]), 1) is None


class _Projection:
    """A stand-in for a fitted UMAP: the first three coordinates."""

    def __init__(self, data):
        self.embedding_ = np.asarray(data)[:, :3]

    def transform(self, X):
        return np.asarray(X)[:, :3]


def test_embedding_maps_place_the_path_and_rank_the_next_token(tiny_gpt2_dir, monkeypatch):
    model = load_model(str(tiny_gpt2_dir))
    monkeypatch.setattr(umap_map, "fitted_umap", lambda data, **kw: _Projection(data))
    path = follow_token(model, SENTENCE, -2)
    maps = embedding_maps(model, path, seeds=[0, 1], rows=100, drawn=False)  # the paper's first rows
    W_E = model.view.W_E.detach().numpy()
    assert maps.rows == 100 and maps.fit_ids.tolist() == [*range(100), path.current, path.target]
    first = maps.maps[0]
    np.testing.assert_allclose(first.landmarks[" stone"], W_E[path.target, :3])
    np.testing.assert_allclose(first.path, np.vstack([path.X[:1], path.normed])[:, :3])
    np.testing.assert_allclose(first.distance, np.linalg.norm(path.normed[:, :3] - W_E[path.target, :3], axis=1))
    ratios = approach_ratios(path.normed[0, :3], path.normed[-1, :3], W_E[maps.fit_ids, :3])
    rank = approach_rank(np.delete(ratios, 101), ratios[101])
    assert maps.target_rank.value == pytest.approx(rank) and maps.target_rank.n == 2
    assert maps.target_ratio.value == pytest.approx(ratios[101])
    assert maps.approached == pytest.approx(np.mean(np.delete(ratios, 101) < 1))
    assert 0 <= maps.target_rank.lo <= maps.target_rank.hi <= 1


def test_each_drawn_map_fits_its_own_rows(tiny_gpt2_dir, monkeypatch):
    """With drawn rows, a repetition resamples the tokens of the map: each seed its own seeded draw, the
    current and next token always in it, the same draw for the same seed."""
    model = load_model(str(tiny_gpt2_dir))
    fitted = []
    monkeypatch.setattr(umap_map, "fitted_umap", lambda data, **kw: fitted.append(data) or _Projection(data))
    path = follow_token(model, SENTENCE, -2)
    maps = embedding_maps(model, path, seeds=[0, 1], rows=100)
    W_E = model.view.W_E.detach().numpy()
    first, second = umap_map.map_rows(len(W_E), 100, [path.current, path.target], 0), \
        umap_map.map_rows(len(W_E), 100, [path.current, path.target], 1)
    assert not np.array_equal(first, second) and {path.current, path.target} <= set(first) & set(second)
    np.testing.assert_array_equal(maps.fit_ids, first)
    np.testing.assert_allclose(fitted[1], W_E[second])  # the second seed's map is fitted on its own rows
    m = maps.maps[1]
    np.testing.assert_allclose(m.landmarks[" stone"], W_E[path.target, :3])  # found in its own rows
    assert umap_map.map_rows(50, 100, [3], 0).tolist() == list(range(50))  # rows >= vocabulary: all of them


def test_architecture_facts_read_the_view(tiny_gpt2_dir, tiny_gemma3_dir):
    gpt2, gemma = (load_model(str(d)).view.facts() for d in (tiny_gpt2_dir, tiny_gemma3_dir))
    assert gpt2["norm_text"] == "LayerNorm" and gpt2["positions_text"].startswith("learned")
    assert gemma["norm_text"].startswith("RMSNorm") and "times 8" in gemma["positions_text"]  # sqrt(64) scale
    assert gemma["attention_text"] == "2 key/value heads for 4 query heads"
    assert gpt2["attention_text"] == "4 key/value heads for 4 query heads" and gpt2["tied_text"].startswith("tied")
