"""capture() equals block outputs computed independently; the final norm is never included."""
import numpy as np
import pytest
import torch

from lotlib import capture, load_model


def _hidden_states(model, ids):
    with torch.no_grad():
        return model.hf(torch.from_numpy(ids), output_hidden_states=True).hidden_states


def _check_against_hidden_states(model, ids, atol):
    X = capture(model, ids, batch_size=2, progress=False)
    L = model.view.n_layers
    hs = _hidden_states(model, ids)
    assert X.shape == (len(ids), L + 1, model.view.d_model)
    for t in range(L):  # hidden_states[t] is the input of block t
        np.testing.assert_allclose(X[:, t], hs[t][:, -1].numpy(), atol=atol, rtol=1e-5)
    # hidden_states[L] has the final norm applied; our x(L) is the state before it
    np.testing.assert_allclose(model.view.final_norm(torch.from_numpy(X[:, L])).numpy(), hs[L][:, -1].numpy(),
                               atol=atol * 10, rtol=1e-4)
    assert not np.allclose(X[:, L], hs[L][:, -1].numpy(), atol=1e-2)
    return X


@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_capture_matches_hidden_states(fixture, request):
    model = load_model(str(request.getfixturevalue(fixture)))
    ids = np.random.default_rng(0).integers(0, 50257, size=(5, 12))
    X = _check_against_hidden_states(model, ids, atol=1e-5)
    if model.view.W_P is not None:  # x(0) includes the learned positions
        expected = model.view.W_E[ids[:, -1]] + model.view.W_P[11]
        np.testing.assert_allclose(X[:, 0], expected.detach().numpy(), atol=1e-6)


def test_all_positions_and_dtype(tiny_gpt2_dir):
    model = load_model(str(tiny_gpt2_dir))
    ids = np.random.default_rng(1).integers(0, 50257, size=(3, 6))
    full = capture(model, ids, all_positions=True, progress=False)
    last = capture(model, ids, progress=False)
    half = capture(model, ids, dtype="float16", progress=False)
    assert full.shape == (3, 6, 4, 64) and half.dtype == np.float16
    np.testing.assert_array_equal(full[:, -1], last)
    np.testing.assert_allclose(half, last, rtol=2e-3, atol=2e-3)
    # batching does not change the result
    np.testing.assert_allclose(capture(model, ids, batch_size=1, progress=False), last, atol=1e-5)


def test_bad_ids_shape(tiny_gpt2_dir):
    with pytest.raises(ValueError, match=r"\(N, T\)"):
        capture(load_model(str(tiny_gpt2_dir)), np.arange(5), progress=False)


@pytest.mark.slow
def test_smollm2_walden_chunks(smollm2):
    from lotlib import walden

    ids = walden(smollm2.tokenizer, n_k=50, n_s=4).ids
    _check_against_hidden_states(smollm2, ids, atol=1e-3)
