"""Next-token KL after truncating states to their top-K singular directions (both protocols)."""

import numpy as np
import pytest
import torch

from lotlib import capture, gibberish, load_model
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.truncation import (
    TruncatedReadout,
    kl,
    next_token_logprobs,
    propagated_truncation,
    shared_tokens,
    top_tokens,
    truncation_scores,
)


def truncated_kl(view, x, basis, ks, batch_size=256, progress=True):
    """Test oracle: the `kl` of `truncation_scores`, `(len(ks), n)`."""
    return truncation_scores(
        view, x, basis, ks, batch_size=batch_size, progress=progress
    ).kl


def propagated_truncated_kl(model, ids, bases, ks, batch_size=32, progress=True):
    """Test oracle: the `kl` of `propagated_truncation`, `(len(ks), n)`."""
    return propagated_truncation(
        model, ids, bases, ks, batch_size=batch_size, progress=progress
    ).kl


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
    np.testing.assert_allclose(
        next_token_logprobs(model.view, torch.as_tensor(X[:5, -1])), expected, atol=1e-4
    )


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
    logp, logq = (
        next_token_logprobs(model.view, torch.as_tensor(X[:, -1] @ b @ b.T)),
        next_token_logprobs(model.view, x),
    )
    direct = (logp.exp() * (logp - logq)).sum(-1).numpy()
    np.testing.assert_allclose(
        truncated_kl(model.view, X[:, -1], U[0], [3], batch_size=7, progress=False)[0],
        direct,
        rtol=1e-4,
        atol=1e-6,
    )


def test_propagated_truncation_matches_full_forward_passes_with_hooks(tiny):
    """The cached single-pilot step equals re-running the whole sequence with the pilot's state
    replaced after every block; full rank gives KL 0."""
    model, ids, X = tiny
    view, D = model.view, X.shape[-1]
    U, _ = ensemble_svd(X)
    K = 5
    ours = propagated_truncated_kl(
        model, ids[:9], U, [K, D], batch_size=4, progress=False
    )
    np.testing.assert_allclose(ours[1], 0.0, atol=1e-5)

    bases, last = torch.as_tensor(U[:, :, :K], dtype=torch.float32), {}

    def replace(module, args, output, t):
        hidden = (output[0] if isinstance(output, tuple) else output).clone()
        hidden[:, -1] = hidden[:, -1] @ bases[t] @ bases[t].T
        last[t] = hidden[:, -1]
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    hooks = [
        block.register_forward_hook(lambda m, a, o, t=t: replace(m, a, o, t))
        for t, block in enumerate(view.blocks, start=1)
    ]
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


def test_top_tokens_and_the_count_of_shared_ones():
    logp = torch.log_softmax(
        torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]),
        -1,
    )
    logq = torch.log_softmax(
        torch.tensor([[5.0, 0.0, 4.0, 1.0, 2.0, 3.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]]),
        -1,
    )
    np.testing.assert_array_equal(top_tokens(logp, 3).numpy(), [[0, 1, 2], [5, 4, 3]])
    np.testing.assert_array_equal(
        shared_tokens(top_tokens(logp, 3), top_tokens(logq, 3)).numpy(), [2, 0]
    )
    np.testing.assert_array_equal(
        shared_tokens(top_tokens(logp, 3), top_tokens(logp, 3)).numpy(), [3, 3]
    )


def test_scores_keep_every_top_token_at_full_rank_and_lose_some_at_rank_one(tiny):
    model, ids, X = tiny
    U, _ = ensemble_svd(X)
    D = X.shape[-1]
    last = truncation_scores(
        model.view, X[:, -1], U[-1], [1, D], top=5, batch_size=16, progress=False
    )
    np.testing.assert_array_equal(last.overlap[1], 5)
    assert last.overlap[0].mean() < 5 and last.overlap.min() >= 0
    np.testing.assert_allclose(
        last.kl,
        truncated_kl(model.view, X[:, -1], U[-1], [1, D], progress=False),
        rtol=1e-6,
    )
    every = propagated_truncation(
        model, ids[:6], U, [1, D], top=5, batch_size=4, progress=False
    )
    np.testing.assert_array_equal(every.overlap[1], 5)
    assert every.overlap[0].mean() < 5


def test_propagated_truncation_runs_on_a_half_precision_model(tiny_llama_dir):
    """The projection is computed in float32 and handed back in the model's dtype (bfloat16 here)."""
    model = load_model(str(tiny_llama_dir), device="cpu", dtype="bfloat16")
    ids = gibberish(model.view.W_E.shape[0], n_s=12, n_k=5, seed=2).ids
    X = capture(model, ids, progress=False)
    U, _ = ensemble_svd(X)
    D = X.shape[-1]
    out = propagated_truncation(
        model, ids[:4], U, [2, D], top=3, batch_size=4, progress=False
    )
    assert np.isfinite(out.kl).all() and (out.kl >= 0).all()
    assert out.overlap.shape == (2, 4) and out.overlap.max() <= 3


def test_truncation_at_sizes_fits_each_sample_alone_and_shares_equal_ones(monkeypatch):
    from lotlib.chapters import b2_ensemble_svd as truncation
    from lotlib.stats import draw_pilots

    calls = []

    def fake(model, ids, X, scored, study):
        calls.append((ids.copy(), X.copy(), scored.last, scored.every))
        return len(calls)

    monkeypatch.setattr(truncation, "resampled_truncation", fake)
    X, ids = (
        np.arange(50.0)[:, None, None] * np.ones((50, 2, 3)),
        np.arange(50)[:, None],
    )
    subset = np.array([3, 7, 8, 20, 41])
    study = truncation.TruncationStudy([1], n_rep=1, n_propagated=2, seed=4)
    samples = {"all": np.arange(50), "subset": subset, "again": np.arange(50)}
    runs = truncation.truncation_at_sizes(None, ids, X, samples, study)
    assert runs == {"all": 1, "subset": 2, "again": 1} and len(calls) == 2
    ids_sub, X_sub, picked, sub = calls[1]
    assert np.array_equal(ids_sub[:, 0], subset) and np.array_equal(
        X_sub[:, 0, 0], subset
    )
    rng = np.random.default_rng(4)
    expected = [draw_pilots(5, 5, rng), draw_pilots(5, 2, rng)]
    assert np.array_equal(picked, expected[0]) and np.array_equal(sub, expected[1])


def test_the_readout_of_a_whole_grid_equals_reading_each_truncation_from_scratch(tiny):
    """One unembedding product per state for the grid (`TruncatedReadout`) gives each K's log-probabilities as
    projecting the state on the first K columns and reading it through the model's own final norm and head
    (LayerNorm with beta on GPT-2, RMSNorm on Llama); a K beyond the basis keeps all of it."""
    model, _, X = tiny
    U, _ = ensemble_svd(X[:20, -1:])
    basis, rows = U[0][:, :12], torch.as_tensor(X[:, -1])
    ks = [1, 2, 5, 12, 40]
    got = list(TruncatedReadout.of(model.view, basis).logprobs(rows, ks))
    B = torch.as_tensor(basis, dtype=torch.float32)
    for K, logp in zip(ks, got):
        direct = next_token_logprobs(model.view, rows @ B[:, :K] @ B[:, :K].T)
        np.testing.assert_allclose(logp.numpy(), direct.numpy(), atol=2e-5)
    with pytest.raises(ValueError, match="ks must increase"):
        next(TruncatedReadout.of(model.view, basis).logprobs(rows, [4, 2]))


def topk_tokens(logp: torch.Tensor, top: int = 5) -> torch.Tensor:
    """Test oracle: `top_tokens` as `torch.topk` over the whole row computes it, `(n, top)` ids."""
    return logp.topk(top, dim=-1).indices


@pytest.mark.parametrize("shape", [(64, 50257), (9, 49152), (3, 262144 + 17), (4, 300)])
def test_top_tokens_by_blocks_equal_topk_over_the_whole_row(shape):
    """The same ids in the same order as `topk`: vocabularies that fill their blocks or leave a partial one,
    the top entries crowded into one block or at the very end, and a vocabulary too small for blocks."""
    from lotlib.lines_of_thought.truncation import TOP_BLOCK

    generator = torch.Generator().manual_seed(shape[1])
    logp = (4 * torch.randn(shape, generator=generator) - 60).log_softmax(-1)
    logp[0, 5 * TOP_BLOCK : 5 * TOP_BLOCK + 5] += 50.0  # the whole top in one block
    logp[1, -3:] += 50.0  # in the last (partial) block
    for top in (1, 5, 20):
        np.testing.assert_array_equal(
            top_tokens(logp, top).numpy(), topk_tokens(logp, top).numpy()
        )


def test_top_tokens_at_a_tie_keep_the_largest_values():
    """Entries tied at the boundary may be taken in another order than `topk` takes them, never another value."""
    logp = torch.full((2, 4096), -20.0)
    logp[:, ::97] = -1.0  # 43 ties for the 5 places
    logp[1, 7] = 0.0
    ids = top_tokens(logp, 5)
    np.testing.assert_array_equal(
        logp.gather(1, ids).numpy(), logp.topk(5, dim=-1).values.numpy()
    )


def allocating_kl(logp: torch.Tensor, logq: torch.Tensor, work=None) -> torch.Tensor:
    """Test oracle: `kl` with fresh tensors for every term, `(n,)`."""
    return (logp.exp() * (logp - logq)).sum(-1).clamp_min(0.0)


def test_kl_in_work_tensors_equals_kl_in_fresh_ones():
    generator = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(3, 16, 50257, generator=generator) - 60
    logp, logq = (
        logits[0].log_softmax(-1),
        (logits[0] + 0.5 * logits[1]).log_softmax(-1),
    )
    work = torch.empty_like(logp), torch.empty_like(logp)
    expected = allocating_kl(logp, logq)
    torch.testing.assert_close(kl(logp, logq, work), expected, rtol=0, atol=0)
    torch.testing.assert_close(
        kl(logq, logp, work), allocating_kl(logq, logp), rtol=0, atol=0
    )  # reused
    torch.testing.assert_close(kl(logp, logq), expected, rtol=0, atol=0)


def test_truncation_scores_equal_the_scores_with_topk_over_whole_rows(
    tiny, monkeypatch
):
    """KL bit for bit and the overlaps of the top-5 sets, against the scores with `topk` over every row and
    fresh tensors for every KL."""
    from lotlib.lines_of_thought import truncation

    model, _, X = tiny
    U, _ = ensemble_svd(X[:, -1:])
    ks = [1, 2, 8, 32, X.shape[-1]]
    ours = truncation_scores(
        model.view, X[:, -1], U[0], ks, top=5, batch_size=16, progress=False
    )
    monkeypatch.setattr(truncation, "top_tokens", topk_tokens)
    monkeypatch.setattr(truncation, "kl", allocating_kl)
    old = truncation_scores(
        model.view, X[:, -1], U[0], ks, top=5, batch_size=16, progress=False
    )
    np.testing.assert_array_equal(ours.kl, old.kl)
    np.testing.assert_array_equal(ours.overlap, old.overlap)


def every_truncation(ks, k, d):
    """Test oracle: a `grid_plan` that reads every K of the grid, the whole space and repeats included."""
    return list(ks), list(range(len(ks)))


def square_bases(n: int, d: int, seed: int = 0) -> np.ndarray:
    """`n` random orthonormal bases of all `d` directions, `(n, d, d)`."""
    rng = np.random.default_rng(seed)
    return np.stack([np.linalg.qr(rng.normal(size=(d, d)))[0] for _ in range(n)])


def test_grid_plan_reads_each_distinct_truncation_once_and_never_the_whole_space():
    from lotlib.lines_of_thought.truncation import grid_plan, spread

    assert grid_plan([1, 2, 4, 8, 16], 4, 16) == ([1, 2, 4], [0, 1, 2, 2, 2])
    assert grid_plan([1, 4, 8, 16], 16, 16) == ([1, 4, 8], [0, 1, 2, None])
    assert grid_plan([16], 16, 16) == ([], [None])
    values = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(
        spread(values, [0, None, 1, 1], np.array([7.0, 8.0, 9.0])),
        [[0, 1, 2], [7, 8, 9], [3, 4, 5], [3, 4, 5]],
    )


@pytest.mark.parametrize("columns", [12, None])
def test_truncation_scores_serve_repeated_and_whole_truncations_as_reading_them(
    tiny, monkeypatch, columns
):
    """A K beyond a basis of k < D columns scores as K = k, read once (bit for bit what reading it again
    gives); on all D directions K = D scores KL 0 and overlap 5, which reading p_D gives up to rounding."""
    from lotlib.lines_of_thought import truncation

    model, _, X = tiny
    D = X.shape[-1]
    basis = (
        ensemble_svd(X[:, -1:])[0][0][:, :columns] if columns else square_bases(1, D)[0]
    )
    ks = [1, 4, 12, 20, D] if columns else [1, 4, 12, D]
    ours = truncation_scores(
        model.view, X[:, -1], basis, ks, batch_size=16, progress=False
    )
    monkeypatch.setattr(truncation, "grid_plan", every_truncation)
    read = truncation_scores(
        model.view, X[:, -1], basis, ks, batch_size=16, progress=False
    )
    partial = slice(None) if columns else slice(None, -1)
    np.testing.assert_array_equal(ours.kl[partial], read.kl[partial])
    np.testing.assert_array_equal(ours.overlap, read.overlap)
    if columns:
        np.testing.assert_array_equal(ours.kl[2:], np.tile(ours.kl[2], (3, 1)))
    else:
        np.testing.assert_array_equal(ours.kl[-1], 0.0)
        np.testing.assert_allclose(read.kl[-1], 0.0, atol=1e-5)


def test_truncation_scores_of_bases_read_p_once_for_every_basis(tiny, p_reads):
    """Each basis scores as `truncation_scores` scores it alone, bit for bit, from one reading of p per batch."""
    from lotlib.lines_of_thought import truncation

    model, _, X = tiny
    D = X.shape[-1]
    U, directions = ensemble_svd(X[:, -1:])[0][0], square_bases(1, D, seed=3)[0]
    grids = [(U, [1, 2, 8, D]), (directions, [1, D // 4])]
    alone = [
        truncation_scores(model.view, X[:, -1], b, ks, batch_size=16, progress=False)
        for b, ks in grids
    ]
    calls = p_reads
    calls.clear()  # only the readings below count
    both = truncation.truncation_scores_of_bases(
        model.view, X[:, -1], grids, batch_size=16, progress=False
    )
    assert calls == [16, 16, 8]
    for one, shared in zip(alone, both):
        assert shared.ks == one.ks
        np.testing.assert_array_equal(shared.kl, one.kl)
        np.testing.assert_array_equal(shared.overlap, one.overlap)


@pytest.mark.parametrize("columns", [5, None])
def test_propagated_truncation_serves_repeated_and_whole_truncations_as_running_them(
    tiny, monkeypatch, columns
):
    """Every K beyond k < D columns scores as K = k, run once (bit for bit what running it again gives); on
    all D directions of every layer K = D is p's own pass, which running the truncated pass gives up to
    rounding: KL 0, overlap 5, p's loss and top-1 hit."""
    from lotlib.lines_of_thought import truncation

    model, ids, X = tiny
    D = X.shape[-1]
    if columns:
        bases, ks = ensemble_svd(X)[0][:, :, :columns], [2, 5, 8, D]
    else:
        bases, ks = square_bases(X.shape[1], D, seed=1), [2, 8, D]
    targets = ids[1:7, 0]

    def scores():
        return propagated_truncation(
            model, ids[:6], bases, ks, batch_size=4, progress=False, targets=targets
        )

    ours = scores()
    monkeypatch.setattr(truncation, "grid_plan", every_truncation)
    run = scores()
    partial = slice(None) if columns else slice(None, -1)
    for name in ("kl", "overlap", "loss", "top1"):
        np.testing.assert_array_equal(
            getattr(ours, name)[partial], getattr(run, name)[partial]
        )
    np.testing.assert_array_equal(ours.full_loss, run.full_loss)
    if columns:
        np.testing.assert_array_equal(ours.kl[1:], np.tile(ours.kl[1], (3, 1)))
        return
    np.testing.assert_array_equal(ours.kl[-1], 0.0)
    np.testing.assert_allclose(run.kl[-1], 0.0, atol=1e-5)
    np.testing.assert_array_equal(ours.overlap[-1], run.overlap[-1])
    np.testing.assert_array_equal(ours.loss[-1], ours.full_loss)
    np.testing.assert_allclose(run.loss[-1], run.full_loss, atol=1e-4)
    np.testing.assert_array_equal(ours.top1[-1], run.top1[-1])
