"""Tests of `lotlib.chapters.c3_continuous_lines`."""

import numpy as np
import pytest
import scipy.optimize

from lotlib.chapters.b4_residuals import HELD_OUT, held_out_pairs
from lotlib.chapters.c3_continuous_lines import (
    anchoring,
    bridged_paths,
    continuous_layers,
    direction_overlap,
    free_flow_errors,
    free_path,
    held_out_flow,
    landing,
    landing_gaps,
    median_over_pilots,
    partial_flow_gaps,
    path_summary,
)
from lotlib.lines_of_thought.continuous import flow_segment, restarted_paths
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.extrapolation import extrapolate
from lotlib.lines_of_thought.langevin import (
    langevin_flow,
)
from lotlib.lines_of_thought.pilot_residuals import pilot_residuals
from lotlib.lines_of_thought.residuals import split_for_bases
from lotlib.models.bounds import ParameterError
from lotlib.stats import resampling_weights
from tests.lines_of_thought.test_continuous import _ensemble
from tests.lines_of_thought.test_ensemble import count_stored_bases
from tests.lines_of_thought.test_langevin import _orthogonal, _rotating_chain


def test_continuous_layers_defaults_and_bounds():
    assert continuous_layers(10, 1, None, None) == (1, 10, 5)
    assert continuous_layers(10, 0, 4, None) == (
        1,
        4,
        3,
    )  # x(0) is no block output; t_free inside
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
    np.testing.assert_allclose(
        landed["gap / true step"][:, 0], landed["gap"][:, 0] / step
    )
    np.testing.assert_allclose(
        landed["gap / state norm"][:, 0],
        landed["gap"][:, 0] / np.linalg.norm(X[:, 2], axis=-1),
    )
    e = median_over_pilots(landed["gap / true step"], n_boot=100)
    assert (
        e.value == pytest.approx(np.median(landed["gap / true step"]))
        and e.lo <= e.value <= e.hi
        and e.n == 30
    )


def test_direction_overlap_and_partial_flows():
    X, U, S, flow = _ensemble(1)
    layers = np.arange(1, 5)
    overlap = direction_overlap(U, S, layers)
    assert overlap.shape == (3, 6) and np.all((overlap >= 0) & (overlap <= 1 + 1e-12))
    t = 1
    expected = np.abs(np.sum(U[t] * U[t + 1], axis=0))[np.argsort(S[t])[::-1]]
    np.testing.assert_allclose(overlap[0], expected)
    partial = partial_flow_gaps(X, U, S, layers, [6])  # all directions: the full Eq. 1
    full = np.linalg.norm(
        extrapolate(X, U, S, 1, 1) - X[:, 2], axis=-1
    ) / np.linalg.norm(X[:, 2] - X[:, 1], axis=-1)
    np.testing.assert_allclose(partial[6][:, 0], full, rtol=1e-8)


def test_anchoring_fits_on_one_half_and_scores_the_other():
    """Bases, spline and the best k come from the fitted pilots; every gap is of a held-out pilot."""
    X = _ensemble(1, N=40)[0]
    layers = np.arange(1, 5)
    fit = held_out_flow(X, layers, held_out=0.5, seed=3)
    assert len(fit.held) == 20 and np.intersect1d(fit.held, fit.fitted).size == 0
    U, S = align_bases(*ensemble_svd(X[fit.fitted]))
    np.testing.assert_allclose(
        np.abs(fit.U), np.abs(U), atol=1e-10
    )  # the fitted half's bases (up to sign)
    result = anchoring(X, fit, layers, ks=(1, 2, 8), n_boot=50)
    assert set(result.partial) == {1, 2, 6}  # k >= D left out, D is the full flow
    held_gaps = landing(X[fit.held], fit.flow, layers)["gap / true step"]
    np.testing.assert_allclose(result.partial[6], held_gaps)
    assert result.landing_gap.n == 20 and result.landing_gap.value == pytest.approx(
        np.median(held_gaps)
    )
    on_fitted = partial_flow_gaps(X[fit.fitted], fit.U, fit.S, layers, [1, 2])
    on_fitted[6] = landing(X[fit.fitted], fit.flow, layers)["gap / true step"]
    assert result.best_k == min(
        on_fitted, key=lambda k: np.median(on_fitted[k])
    )  # chosen where it was fitted
    summary = result.summary()
    assert summary["stable_directions"] == int(
        np.sum(np.median(direction_overlap(fit.U, fit.S, layers), axis=0) > 0.9)
    )
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


def test_flow_over_several_layers_composes_across_flipped_layers():
    rng = np.random.default_rng(15)
    dets = [
        1.0,
        -1.0,
        1.0,
        -1.0,
        1.0,
    ]  # reflections between every pair of consecutive layers
    U = np.stack([_orthogonal(4, 20 + t, det=d) for t, d in enumerate(dets)])
    S = np.exp(rng.normal(0, 0.3, size=(5, 4))) * 5
    X = np.stack([rng.normal(size=(9, 4))] * 5, axis=1)
    flow = langevin_flow(U, S, np.arange(5))
    assert [flow.flipped[t] is not None for t in range(5)] == [d < 0 for d in dets]
    # start and end layers are not flipped: the chained flow is exactly Eq. 1 from 0 to 4 (and to 2)
    chained = free_path(X[:, 0], flow, 0, 4)
    np.testing.assert_allclose(chained[:, 4], extrapolate(X, U, S, 0, 4), atol=1e-10)
    np.testing.assert_allclose(chained[:, 2], extrapolate(X, U, S, 0, 2), atol=1e-10)


def test_continuous_paths_start_on_the_truth_land_on_eq1_and_bridge_through_the_truth():
    rng = np.random.default_rng(13)
    sigma = np.exp(np.cumsum(rng.normal(0, 0.3, size=(5, 4)), axis=0))
    U, S, _ = _rotating_chain(sigma=sigma)
    X = rng.normal(size=(7, 5, 4))
    flow = langevin_flow(U, S, np.arange(5))
    times, paths = restarted_paths(X, flow, np.arange(1, 5), per_layer=4)
    assert paths.shape == (7, 3, 5, 4) and times.shape == (3, 5)
    np.testing.assert_allclose(times[0], [1.0, 1.25, 1.5, 1.75, 2.0])
    for s, t in enumerate(range(1, 4)):
        np.testing.assert_allclose(paths[:, s, 0], X[:, t], atol=1e-12)
        np.testing.assert_allclose(
            paths[:, s, -1], extrapolate(X, U, S, t, 1), atol=1e-10
        )
    bridged = bridged_paths(X, paths, np.arange(1, 5))
    np.testing.assert_allclose(bridged[:, :, -1], X[:, 2:5], atol=1e-10)
    np.testing.assert_allclose(bridged[:, :, 0], X[:, 1:4], atol=1e-12)
    chained = free_path(X[:, 1], flow, 1, 3)
    np.testing.assert_allclose(
        chained[:, 3], extrapolate(X, U, S, 1, 3), atol=1e-10
    )  # Eq. 1 composes
    np.testing.assert_allclose(
        flow_segment(X[:, 2], flow, 2, [0.5])[:, 0], paths[:, 1, 2], atol=1e-12
    )


def test_path_summary_matches_the_paths():
    rng = np.random.default_rng(14)
    U, S, _ = _rotating_chain(
        sigma=np.exp(np.cumsum(rng.normal(0, 0.3, size=(5, 4)), axis=0))
    )
    X = rng.normal(size=(6, 5, 4))
    flow = langevin_flow(U, S, np.arange(5))
    summary = path_summary(X, flow, np.arange(1, 5), per_layer=50)
    _, paths = restarted_paths(X, flow, np.arange(1, 5), per_layer=50)
    bridged = bridged_paths(X, paths, np.arange(1, 5))
    np.testing.assert_allclose(
        summary["gap"], np.linalg.norm(paths[:, :, -1] - X[:, 2:], axis=-1), atol=1e-12
    )
    np.testing.assert_allclose(
        summary["step"], np.linalg.norm(X[:, 2:] - X[:, 1:4], axis=-1)
    )
    lengths = np.linalg.norm(np.diff(bridged, axis=2), axis=-1).sum(-1)
    np.testing.assert_allclose(
        summary["length_ratio"], lengths / summary["step"], rtol=1e-10
    )
    assert np.all(
        summary["length_ratio"] >= 1 - 1e-12
    )  # no path is shorter than the straight chord
    np.testing.assert_allclose(
        landing_gaps(X, flow, np.arange(1, 5)), summary["gap"], atol=1e-12
    )


def test_continuous_lines_returns_its_two_figures():
    import matplotlib.pyplot as plt

    from lotlib.chapters.c3_continuous_lines import continuous_lines, line_values

    X, U, _, flow = _ensemble()
    layers = np.arange(1, X.shape[1])
    pilots = np.array([0, 3])
    _, paths = restarted_paths(X[pilots], flow, layers, per_layer=4)
    rotatable, static = continuous_lines(X, pilots, paths, U[-1][:, :3], layers, "t")
    assert len(rotatable.data) == 4 * len(pilots) and static.axes
    plt.close(static)
    found = line_values(median_over_pilots(np.ones((5, 2)), 10), 2, np.arange(3.0), 0.5)
    assert found["free_flow_error_by_tau"] == [1.0, 2.0]


def test_the_flow_reads_back_the_half_split_bases_of_b4_and_c5(monkeypatch, tmp_path):
    """B4 (`held_out_pairs`), C3 (`held_out_flow`) and C5 (`pilot_residuals` of `ensemble_svd`) fit the same
    seeded half of the pilots: its SVD and alignment are computed once and read back bit for bit."""
    X = _ensemble(1, N=40)[0]
    calls = count_stored_bases(monkeypatch, tmp_path)
    matched = []  # every alignment, wherever it runs: one assignment per step between layers
    assign = scipy.optimize.linear_sum_assignment
    monkeypatch.setattr(
        scipy.optimize,
        "linear_sum_assignment",
        lambda c: matched.append(1) or assign(c),
    )
    layers = np.arange(1, X.shape[1])
    split = split_for_bases(len(X), X.shape[2], HELD_OUT, 0)
    weights = resampling_weights(len(split[0]), 2, 0)
    (U, S), _ = held_out_pairs(X, split, layers, weights, progress=False)
    fit = held_out_flow(X, layers, 0.5, 0)
    pilot_residuals(X[split[0]], *ensemble_svd(X[split[1]]), progress=False)
    assert calls == {"_layer_bases": 1, "_alignment": 1}
    assert len(matched) == X.shape[1] - 1
    np.testing.assert_array_equal(fit.U, U)
    np.testing.assert_array_equal(fit.S, S)
