"""Tests of `lotlib.chapters.c7_open_questions`. Where the states are: raw norms over sqrt(d) and the ellipsoid
ratio of the norm that reads each state, checked against the model's own LayerNorm modules and an explicit
resample. What a head cannot see: the read share tr(P C) / tr(C) of each head's query subspace, checked against
an explicit projector and covariance, d_head / d for evenly spread states, near 1 for states inside the
subspace."""
import numpy as np
import pytest
import torch

from lotlib import load_model
from lotlib.chapters.c7_open_questions import read_shares, state_norms
from lotlib.stats import resampling_weights


def _states(view, ids):
    """x(0..L) of the last position of each row of `ids`: `(N, L+1, d)` float32, through the view's trace."""
    out = {}

    def keep(t, x):
        out[t] = x[:, -1].clone()

    with torch.no_grad(), view.trace(keep):
        view.run(ids)
    return torch.stack([out[t] for t in range(view.n_layers + 1)], 1).float().numpy()


@pytest.mark.parametrize("fixture, on", [("tiny_bert_dir", True), ("tiny_gpt2_dir", False)])
def test_a_post_ln_stream_lies_on_the_ellipsoids_a_pre_norm_stream_does_not(fixture, on, request):
    """A post-LN encoder's states are its norms' outputs: ratio 1 up to eps, for any weights. A pre-norm model's
    stream is not normalized: its states are off the ellipsoids of the norms that read them."""
    view = load_model(str(request.getfixturevalue(fixture)), device="cpu").view
    ids = torch.randint(0, 50257, (24, 7), generator=torch.Generator().manual_seed(0))
    found = state_norms(view, _states(view, ids), n_boot=20, seed=1)
    gap = found.off_ellipsoid()
    if on:
        assert gap.hi < 1e-3
    else:
        assert gap.lo > 0.05
    assert found.raw.shape == found.ellipsoid.shape == (24, view.n_layers + 1)


def test_the_growth_is_a_ratio_of_medians_on_the_sample_and_on_a_resample(tiny_gpt2_dir):
    view = load_model(str(tiny_gpt2_dir), device="cpu").view
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(50, view.n_layers + 1, view.d_model)) * np.arange(1, view.n_layers + 2)[:, None])
    found = state_norms(view, X.astype(np.float32), n_boot=3, seed=2)
    norms = np.linalg.norm(X, axis=2) / np.sqrt(view.d_model)
    assert found.growth().value == pytest.approx(np.median(norms[:, -1]) / np.median(norms[:, 1]), rel=1e-6)
    drawn = np.repeat(np.arange(50), resampling_weights(50, 3, 2)[1].astype(int))  # resample 1, explicitly
    again = state_norms(view, X[drawn].astype(np.float32), n_boot=0)
    assert found._medians(found.raw)[1] == pytest.approx(np.median(again.raw, axis=0), rel=1e-9)
    assert found.summary()["raw_norm_last"] == pytest.approx(np.median(norms[:, -1]), rel=1e-6)


@pytest.fixture(scope="module")
def view(tiny_gpt2_dir):
    return load_model(str(tiny_gpt2_dir), device="cpu").view


def _normalized(view, X, t):
    with torch.no_grad():
        return view.block_norm(t)(torch.as_tensor(X[:, t])).double().numpy()


def test_read_shares_are_the_projected_variance_on_the_sample_and_on_a_resample(view):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, view.n_layers + 1, view.d_model)).astype(np.float32) * np.linspace(0.2, 3, 64)
    found = read_shares(view, X, [0, 2], n_boot=3, seed=1)
    assert found.shares.shape == (4, 2, view.n_heads) and found.n == 200
    for i, t in enumerate([0, 2]):
        z = _normalized(view, X, t)
        C = np.cov(z.T, bias=True)
        for h in range(view.n_heads):
            W = view.heads(t).W_Q[h].double().numpy()
            P = W @ np.linalg.pinv(W)  # the projector onto W's columns, computed another way
            assert found.shares[0, i, h] == pytest.approx(np.trace(P @ C) / np.trace(C), rel=1e-9)
    drawn = np.repeat(np.arange(200), resampling_weights(200, 3, 1)[2].astype(int))  # resample 2, explicitly
    again = read_shares(view, X[drawn], [2], n_boot=0)
    np.testing.assert_allclose(found.shares[2, 1], again.shares[0, 0], rtol=1e-9)


def test_evenly_spread_states_give_d_head_over_d_and_states_in_the_subspace_give_more(view):
    rng = np.random.default_rng(1)
    spread = rng.normal(size=(4000, view.n_layers + 1, view.d_model)).astype(np.float32)
    even = read_shares(view, spread, [1], n_boot=50)
    assert even.isotropic == view.d_head / view.d_model
    estimate = even.median_ratio()
    assert estimate.lo <= 1.0 <= estimate.hi and abs(estimate.value - 1) < 0.1
    W = view.heads(1).W_Q[0].double().numpy()  # states varying along head 0's query directions only
    inside = spread.copy()
    inside[:, 1] = (rng.normal(size=(4000, view.d_head)) @ np.linalg.pinv(W)).astype(np.float32) * 5
    inside[:, 1] += rng.normal(size=(4000, view.d_model)).astype(np.float32) * 0.01
    focused = read_shares(view, inside, [1], n_boot=0)
    assert focused.shares[0, 0, 0] > 0.9 > even.shares[0, 0, 0] * 3
