"""The C3 readings of continuous lines of thought: layers, landings, partial flows, the free flow."""
import numpy as np
import pytest

from lotlib.chapters.c3_continuous_lines import (
    anchoring,
    continuous_layers,
    direction_overlap,
    free_flow_errors,
    held_out_flow,
    landing,
    landing_gaps,
    median_over_pilots,
    partial_flow_gaps,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.extrapolation import extrapolate
from lotlib.lines_of_thought.langevin import langevin_flow
from lotlib.models.bounds import ParameterError


def _ensemble(seed: int = 0, N: int = 30, T: int = 5, D: int = 6):
    rng = np.random.default_rng(seed)
    X = np.cumsum(rng.normal(size=(N, T, D)), axis=1) + 3.0
    U, S = align_bases(*ensemble_svd(X))
    return X, U, S, langevin_flow(U, S, np.arange(1, T), log=True)


def test_continuous_layers_defaults_and_bounds():
    assert continuous_layers(10, 1, None, None) == (1, 10, 5)
    assert continuous_layers(10, 0, 4, None) == (1, 4, 3)  # x(0) is no block output; t_free inside
    assert continuous_layers(10, 2, 8, 7) == (2, 8, 7)
    with pytest.raises(ParameterError):
        continuous_layers(10, 5, 5, None)
    with pytest.raises(ParameterError):
        continuous_layers(10, 2, 8, 8)


def test_landing_ratios_and_the_median_over_pilots():
    X, U, S, flow = _ensemble()
    layers = np.arange(1, 5)
    landed = landing(X, flow, layers)
    np.testing.assert_allclose(landed["gap"], landing_gaps(X, flow, layers))
    step = np.linalg.norm(X[:, 2] - X[:, 1], axis=-1)
    np.testing.assert_allclose(landed["gap / true step"][:, 0], landed["gap"][:, 0] / step)
    np.testing.assert_allclose(landed["gap / state norm"][:, 0], landed["gap"][:, 0] / np.linalg.norm(X[:, 2], axis=-1))
    e = median_over_pilots(landed["gap / true step"], n_boot=100)
    assert e.value == pytest.approx(np.median(landed["gap / true step"])) and e.lo <= e.value <= e.hi and e.n == 30


def test_direction_overlap_and_partial_flows():
    X, U, S, flow = _ensemble(1)
    layers = np.arange(1, 5)
    overlap = direction_overlap(U, S, layers)
    assert overlap.shape == (3, 6) and np.all((overlap >= 0) & (overlap <= 1 + 1e-12))
    t = 1
    expected = np.abs(np.sum(U[t] * U[t + 1], axis=0))[np.argsort(S[t])[::-1]]
    np.testing.assert_allclose(overlap[0], expected)
    partial = partial_flow_gaps(X, U, S, layers, [6])  # all directions: the full Eq. 1
    full = np.linalg.norm(extrapolate(X, U, S, 1, 1) - X[:, 2], axis=-1) / np.linalg.norm(X[:, 2] - X[:, 1], axis=-1)
    np.testing.assert_allclose(partial[6][:, 0], full, rtol=1e-8)


def test_anchoring_fits_on_one_half_and_scores_the_other():
    """Bases, spline and the best k come from the fitted pilots; every gap is of a held-out pilot."""
    X = _ensemble(1, N=40)[0]
    layers = np.arange(1, 5)
    fit = held_out_flow(X, layers, held_out=0.5, seed=3)
    assert len(fit.held) == 20 and np.intersect1d(fit.held, fit.fitted).size == 0
    U, S = align_bases(*ensemble_svd(X[fit.fitted]))
    np.testing.assert_allclose(np.abs(fit.U), np.abs(U), atol=1e-10)  # the fitted half's bases (up to sign)
    result = anchoring(X, fit, layers, ks=(1, 2, 8), n_boot=50)
    assert set(result.partial) == {1, 2, 6}  # k >= D left out, D is the full flow
    held_gaps = landing(X[fit.held], fit.flow, layers)["gap / true step"]
    np.testing.assert_allclose(result.partial[6], held_gaps)
    assert result.landing_gap.n == 20 and result.landing_gap.value == pytest.approx(np.median(held_gaps))
    on_fitted = partial_flow_gaps(X[fit.fitted], fit.U, fit.S, layers, [1, 2])
    on_fitted[6] = landing(X[fit.fitted], fit.flow, layers)["gap / true step"]
    assert result.best_k == min(on_fitted, key=lambda k: np.median(on_fitted[k]))  # chosen where it was fitted
    summary = result.summary()
    assert summary["stable_directions"] == int(np.sum(np.median(direction_overlap(fit.U, fit.S, layers), axis=0) > 0.9))
    assert set(summary["partial_flow_gap_by_k"]) == {"1", "2", "6"}
    with pytest.raises(ParameterError, match="n_s"):
        held_out_flow(X[:10], layers)  # 5 fitted pilots cannot span D = 6


def test_free_flow_starts_on_the_truth_and_ends_on_eq1():
    X, U, S, flow = _ensemble(2)
    error, eq1 = free_flow_errors(X, flow, U, S, 1, 4)
    assert error.shape == (4,) and error[0] == 0.0
    flips = [flow.flipped[t] for t in (1, 4)]
    if flips == [None, None]:
        assert eq1 < 1e-8
