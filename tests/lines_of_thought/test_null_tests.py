"""Null tests and the last-layer diagnostic: separability, stalling, the noise law at the last layer."""
import numpy as np
import pytest
import torch

from lotlib import capture, gibberish, load_model
from lotlib.lines_of_thought.null_tests import (arrival_log_variance, arrival_spread, last_layer_normalized, law_ratio,
                               layer_separability, next_token_nll, relative_steps, residual_statistics,
                               separability, stalling, step_coherence, step_cosines, straightness)
from lotlib.lines_of_thought.residuals import fit_variance, pair_mask
from lotlib.lines_of_thought.ensemble import ensemble_svd


@pytest.mark.parametrize("classifier", ["perceptron", "logistic"])
def test_separability_is_chance_on_one_distribution_and_perfect_on_shifted_ones(classifier):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(1000, 20)), rng.normal(size=(1000, 20))
    same = separability(A, B, seed=0, classifier=classifier)
    shifted = separability(A, B + 8.0 * np.eye(20)[0], seed=0, classifier=classifier)
    assert abs(same - 0.5) < 0.06  # 600 test samples: the standard error of chance is 0.02
    assert shifted > 0.99  # a shift of 8 sigma: the best boundary errs with probability 3e-5
    assert separability(A, B, seed=0, classifier=classifier) == same  # seeded


def test_separability_rejects_unknown_classifiers():
    with pytest.raises(ValueError, match="classifier"):
        separability(np.zeros((4, 2)), np.ones((4, 2)), classifier="svm")


def test_layer_separability_follows_each_layer():
    rng = np.random.default_rng(1)
    XA, XB = rng.normal(size=(400, 3, 10)), rng.normal(size=(400, 3, 10))
    XB[:, 1, 0] += 5.0  # only layer 1 differs
    acc = layer_separability(XA, XB, progress=False)
    assert acc.shape == (3,)
    assert acc[1] > 0.98 and abs(acc[0] - 0.5) < 0.1 and abs(acc[2] - 0.5) < 0.1


def _stalled_chain(N=200, T=21, D=50, split=10, small=0.01, seed=2):
    """Random walks around a far offset, steps of length ~1 up to layer `split`, `small` after it."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=(N, T - 1, D)) / np.sqrt(D)
    steps[:, split:] *= small
    offset = np.zeros(D)
    offset[0] = 100.0
    return offset + np.concatenate([np.zeros((N, 1, D)), np.cumsum(steps, axis=1)], axis=1)


def test_step_measures_match_a_direct_computation():
    X = _stalled_chain(N=5, T=6, D=4)
    for n in range(5):
        for t in range(5):
            step = X[n, t + 1] - X[n, t]
            assert np.isclose(relative_steps(X)[n, t], np.linalg.norm(step) / np.linalg.norm(X[n, t]))
            if t >= 1:
                prev = X[n, t] - X[n, t - 1]
                cos = step @ prev / np.linalg.norm(step) / np.linalg.norm(prev)
                assert np.isclose(step_cosines(X)[n, t - 1], cos)


def test_stalling_on_a_synthetic_stalled_chain():
    result = stalling(_stalled_chain(split=10, small=0.01), split=10)
    assert result["step_ratio"] == pytest.approx(0.01, rel=0.1)
    assert result["step_before"] == pytest.approx(0.01, rel=0.1)  # steps ~1 on states of norm ~100
    assert abs(result["cos_before"]) < 0.05 and abs(result["cos_after"]) < 0.05  # random walks turn at random
    no_stall = stalling(_stalled_chain(split=10, small=1.0), split=10)
    assert no_stall["step_ratio"] == pytest.approx(1.0, rel=0.1)
    line = np.linspace(0, 1, 12)[None, :, None] * np.ones((3, 1, 8)) + 1.0  # straight paths
    assert stalling(line, split=5)["cos_before"] == pytest.approx(1.0)


def test_straightness_of_lines_and_random_walks():
    line = np.linspace(0, 1, 12)[None, :, None] * np.arange(1, 9)[None, None, :] + 3.0
    np.testing.assert_allclose(straightness(line), 1.0)
    walk = _stalled_chain(N=400, T=101, D=200, small=1.0)
    assert np.mean(straightness(walk)) == pytest.approx(1 / np.sqrt(100), rel=0.1)


def test_step_coherence_of_parallel_and_independent_steps():
    rng = np.random.default_rng(3)
    parallel = np.cumsum(np.broadcast_to(rng.normal(size=(1, 5, 30)), (100, 5, 30)), axis=1) + rng.normal(size=(100, 1, 30))
    np.testing.assert_allclose(step_coherence(parallel), 1.0)
    independent = step_coherence(rng.normal(size=(2000, 5, 30)))
    assert np.all(independent < 3 / np.sqrt(2000))


def test_arrival_spread_is_zero_for_a_function_of_the_arrival_layer():
    T = 8
    t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    mask = pair_mask(T, 1, T - 1)
    assert arrival_spread(0.2 * s + 1.0, mask) == pytest.approx(0.0, abs=1e-12)
    assert arrival_spread(0.2 * s - 0.1 * t, mask) > 0.1


def _law_layers(N=4000, T=9, D=6, lam=0.3, last_scale=1.0, seed=4):
    """Independent Gaussian ensembles with variance exp(lam t): Eq. 1 residuals have variance ~ 2 exp(lam (t+tau)),
    a function of the arrival layer (the law holds exactly); the last layer optionally scaled."""
    X = np.random.default_rng(seed).normal(size=(N, T, D)) * np.exp(0.5 * lam * np.arange(T))[None, :, None]
    X[:, -1] *= last_scale
    return X


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_last_layer_ratio_is_one_when_the_law_holds(scale):
    X = _law_layers(last_scale=scale)
    T = X.shape[1]
    L = T - 1
    U, S = ensemble_svd(X)
    st = residual_statistics(X, U, S, progress=False)
    fit = fit_variance(st.log_mean_var(), pair_mask(T, 1, L - 1))  # the law fitted without the last layer
    assert fit["lambda"] == pytest.approx(0.3, abs=0.01) and fit["alpha"] == pytest.approx(2.0, rel=0.05)
    observed = arrival_log_variance(X, U, S)
    np.testing.assert_allclose(observed, st.log_mean_var()[1:L, L], rtol=1e-5)  # the arrival-only shortcut
    assert law_ratio(observed, fit, L) == pytest.approx(scale ** 2, rel=0.05)  # a scaled last layer breaks it


@pytest.fixture(scope="module")
def tiny_llama(tiny_llama_dir):
    model = load_model(str(tiny_llama_dir))
    ids = gibberish(model.view.W_E.shape[0], n_s=30, n_k=6, seed=1).ids
    return model, ids, capture(model, ids, progress=False)


def test_last_layer_normalized_applies_the_final_norm_to_the_last_layer_only(tiny_llama):
    model, _, X = tiny_llama
    U, S = ensemble_svd(X)
    Xn, Un, Sn = last_layer_normalized(model.view, X, U, S, batch_size=7)
    expected = model.view.final_norm(torch.as_tensor(X[:, -1])).numpy()
    np.testing.assert_allclose(Xn[:, -1], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(Xn[:, :-1], X[:, :-1])
    np.testing.assert_array_equal(Un[:-1], U[:-1])
    gram = Xn[:, -1].T.astype(np.float64) @ Xn[:, -1]
    np.testing.assert_allclose((Un[-1] * Sn[-1] ** 2) @ Un[-1].T, gram, rtol=1e-4, atol=1e-3)
    assert not np.allclose(X[:, -1], Xn[:, -1])  # the tiny model's last states are not already normalized


def test_next_token_nll_matches_the_models_logits(tiny_llama):
    model, ids, X = tiny_llama
    targets = ids[:, 0]
    with torch.no_grad():
        logp = model.hf(input_ids=torch.as_tensor(ids)).logits[:, -1].log_softmax(-1)
    expected = -logp[np.arange(len(ids)), targets].numpy()
    np.testing.assert_allclose(next_token_nll(model.view, X[:, -1], targets, batch_size=4), expected, rtol=1e-4)
