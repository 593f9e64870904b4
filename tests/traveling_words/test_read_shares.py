"""What a head cannot see (C7): the read share tr(P C) / tr(C) of each head's query subspace, checked against an
explicit projector and covariance, d_head / d for evenly spread states, near 1 for states inside the subspace."""
import numpy as np
import pytest
import torch

from lotlib import load_model
from lotlib.traveling_words.read_shares import read_shares


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
    from lotlib.stats import resampling_weights

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
