"""Where the states are (C7): raw norms over sqrt(d) and the ellipsoid ratio of the norm that reads each state,
checked against the model's own LayerNorm modules and an explicit resample."""
import numpy as np
import pytest
import torch

from lotlib import load_model
from lotlib.stats import resampling_weights
from lotlib.traveling_words.state_norms import state_norms


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
