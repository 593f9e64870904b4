"""Next-token KL after truncating states to their top-K singular directions (both protocols)."""
import numpy as np
import pytest
import torch

from lotlib import capture, gibberish, load_model
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.truncation import (consecutive_kl, kl, next_token_logprobs, propagated_truncated_kl,
                                                propagated_truncation, top_overlap, truncated_kl, truncation_scores)


@pytest.fixture(params=["tiny_gpt2_dir", "tiny_llama_dir"])
def tiny(request):
    model = load_model(str(request.getfixturevalue(request.param)))
    ids = gibberish(model.view.W_E.shape[0], n_s=40, n_k=7, seed=1).ids
    return model, ids, capture(model, ids, progress=False)


def test_logprobs_from_the_last_block_match_the_model(tiny):
    model, ids, X = tiny
    with torch.no_grad():
        logits = model.hf(input_ids=torch.as_tensor(ids[:5])).logits[:, -1]
    expected = logits.log_softmax(-1)
    np.testing.assert_allclose(next_token_logprobs(model.view, torch.as_tensor(X[:5, -1])), expected, atol=1e-4)


def test_kl_is_zero_at_full_rank_and_non_negative(tiny):
    model, _, X = tiny
    U, _ = ensemble_svd(X[:, -1:])
    D = X.shape[-1]
    ks = [1, 2, 8, 32, D]
    out = truncated_kl(model.view, X[:, -1], U[0], ks, batch_size=16, progress=False)
    assert out.shape == (len(ks), len(X))
    assert (out >= 0).all()
    np.testing.assert_allclose(out[-1], 0.0, atol=1e-5)
    assert out[0].mean() > out[-2].mean() > 0


def test_truncated_kl_matches_a_direct_computation(tiny):
    model, _, X = tiny
    U, _ = ensemble_svd(X[:, -1:])
    b = U[0][:, :3]
    x = torch.as_tensor(X[:, -1])
    logp, logq = next_token_logprobs(model.view, torch.as_tensor(X[:, -1] @ b @ b.T)), next_token_logprobs(model.view, x)
    direct = (logp.exp() * (logp - logq)).sum(-1).numpy()
    np.testing.assert_allclose(truncated_kl(model.view, X[:, -1], U[0], [3], batch_size=7, progress=False)[0],
                               direct, rtol=1e-4, atol=1e-6)


def test_consecutive_kl_across_batch_borders(tiny):
    model, _, X = tiny
    logp = next_token_logprobs(model.view, torch.as_tensor(X[:, -1]))
    expected = kl(logp[1:], logp[:-1]).numpy()
    np.testing.assert_allclose(consecutive_kl(model.view, X[:, -1], batch_size=6, progress=False), expected,
                               rtol=1e-4, atol=1e-6)


def test_propagated_truncation_matches_full_forward_passes_with_hooks(tiny):
    """The cached single-pilot step equals re-running the whole sequence with the pilot's state
    replaced after every block; full rank gives KL 0."""
    model, ids, X = tiny
    view, D = model.view, X.shape[-1]
    U, _ = ensemble_svd(X)
    K = 5
    ours = propagated_truncated_kl(model, ids[:9], U, [K, D], batch_size=4, progress=False)
    np.testing.assert_allclose(ours[1], 0.0, atol=1e-5)

    bases, last = torch.as_tensor(U[:, :, :K], dtype=torch.float32), {}

    def replace(module, args, output, t):
        hidden = (output[0] if isinstance(output, tuple) else output).clone()
        hidden[:, -1] = hidden[:, -1] @ bases[t] @ bases[t].T
        last[t] = hidden[:, -1]
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    hooks = [block.register_forward_hook(lambda m, a, o, t=t: replace(m, a, o, t))
             for t, block in enumerate(view.blocks, start=1)]
    try:
        with torch.no_grad():
            view.base(input_ids=torch.as_tensor(ids[:9]), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    truth = next_token_logprobs(view, torch.as_tensor(X[:9, -1]))
    direct = kl(next_token_logprobs(view, last[view.n_layers]), truth).numpy()
    np.testing.assert_allclose(ours[0], direct, rtol=1e-3, atol=1e-5)
    assert ours[0].mean() > 0


def test_top_overlap_counts_shared_tokens():
    logp = torch.log_softmax(torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]), -1)
    logq = torch.log_softmax(torch.tensor([[5.0, 0.0, 4.0, 1.0, 2.0, 3.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]]), -1)
    np.testing.assert_array_equal(top_overlap(logp, logq, top=3).numpy(), [2, 0])
    np.testing.assert_array_equal(top_overlap(logp, logp, top=3).numpy(), [3, 3])


def test_scores_keep_every_top_token_at_full_rank_and_lose_some_at_rank_one(tiny):
    model, ids, X = tiny
    U, _ = ensemble_svd(X)
    D = X.shape[-1]
    last = truncation_scores(model.view, X[:, -1], U[-1], [1, D], top=5, batch_size=16, progress=False)
    np.testing.assert_array_equal(last.overlap[1], 5)
    assert last.overlap[0].mean() < 5 and last.overlap.min() >= 0
    np.testing.assert_allclose(last.kl, truncated_kl(model.view, X[:, -1], U[-1], [1, D], progress=False), rtol=1e-6)
    every = propagated_truncation(model, ids[:6], U, [1, D], top=5, batch_size=4, progress=False)
    np.testing.assert_array_equal(every.overlap[1], 5)
    assert every.overlap[0].mean() < 5


def test_propagated_truncation_runs_on_a_half_precision_model(tiny_llama_dir):
    """The projection is computed in float32 and handed back in the model's dtype (bfloat16 here)."""
    model = load_model(str(tiny_llama_dir), device="cpu", dtype="bfloat16")
    ids = gibberish(model.view.W_E.shape[0], n_s=12, n_k=5, seed=2).ids
    X = capture(model, ids, progress=False)
    U, _ = ensemble_svd(X)
    D = X.shape[-1]
    out = propagated_truncation(model, ids[:4], U, [2, D], top=3, batch_size=4, progress=False)
    assert np.isfinite(out.kl).all() and (out.kl >= 0).all()
    assert out.overlap.shape == (2, 4) and out.overlap.max() <= 3


def test_truncation_grid_and_random_directions():
    from lotlib.lines_of_thought.truncation import random_orthonormal, truncation_grid

    assert truncation_grid(64) == [1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64]
    Q = random_orthonormal(8, seed=3)
    np.testing.assert_allclose(Q.T @ Q, np.eye(8), atol=1e-12)


def test_truncation_criteria_and_summary_on_known_scores():
    from lotlib.lines_of_thought.truncation import Truncation, truncation_criteria, truncation_summary

    ks = [1, 2, 4, 8, 16]  # d = 16, d/4 = 4
    kl_curve = np.array([10.0, 5.0, 2.0, 0.5, 0.0])
    result = Truncation(ks, np.tile(kl_curve[:, None], (1, 6)), np.tile(np.arange(5.0)[:, None], (1, 6)), 5)
    found = truncation_criteria(result, 16, n_boot=50)
    assert found["kl_drop"].value == pytest.approx(0.2)
    assert found["kl_quarter_d"].value == pytest.approx(2.0)
    assert found["overlap_quarter_d"].value == pytest.approx(2.0)
    assert found["k0_over_d"].value == pytest.approx(8 / 16)  # the first K with KL <= 0.1 x KL(1)
    random = truncation_criteria(Truncation([1, 4], result.kl[[0, 2]], result.overlap[[0, 2]], 5), 16, k0=False)
    assert "k0_over_d" not in random and random["kl_drop"].value == pytest.approx(0.2)
    summary = truncation_summary({"last layer": result}, {"last layer": found}, random)
    assert summary["kl_every_layer_mean"] is None
    np.testing.assert_allclose(summary["kl_last_layer_mean"], kl_curve)
    assert summary["k0_over_d_last_layer"] is found["k0_over_d"]
    assert summary["kl_drop_random_directions"] is random["kl_drop"]


def test_truncation_protocols_run_both_readings(tiny):
    from lotlib.lines_of_thought.truncation import truncation_protocols

    model, ids, X = tiny
    U, _ = ensemble_svd(X)
    D = X.shape[2]
    picked, sub = np.arange(10), np.arange(3)
    both = truncation_protocols(model, ids, X[:, -1], U, [1, D], picked, sub)
    np.testing.assert_allclose(
        both["last layer"].kl, truncation_scores(model.view, X[picked, -1], U[-1], [1, D], progress=False).kl
    )
    assert both["every layer"].kl.shape == (2, 3)
    assert list(truncation_protocols(model, ids, X[:, -1], U, [1, D], picked, sub[:1])) == ["last layer"]
