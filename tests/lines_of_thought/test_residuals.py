"""Residual statistics of the linear extrapolation (Eq. 2, Fig. B4) and the variance fit."""
import numpy as np
import pytest
from scipy import stats

from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.extrapolation import eq1_residuals
from lotlib.lines_of_thought.nulls import shuffled_pilots
from lotlib.lines_of_thought.residuals import (
    PairLayers,
    coordinate_moments,
    fit_accumulated,
    fit_laws,
    fit_variance,
    pair_mask,
    pair_statistics,
    resampled_pairs,
    residual_coordinates,
    singular_coordinates,
    singular_pair_moments,
)


def _gaussian_layers(N=4000, T=4, D=6, seed=0):
    """Independent Gaussian ensembles at every layer, growing scales: Eq. 1 residuals are Gaussian."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, T, D)) * np.exp(0.3 * np.arange(T))[None, :, None]


def test_residual_coordinates_are_eq1_residuals_in_the_arrival_basis():
    rng = np.random.default_rng(1)
    for N in (50, 4):  # a full basis (N >= D) and a thin one (N < D)
        X = rng.normal(size=(N, 4, 6)) + 2.0
        U, S = align_bases(*ensemble_svd(X))
        Y = singular_coordinates(X, U)
        for t, tau in [(0, 1), (1, 2), (0, 3)]:
            direct = eq1_residuals(X, U, S, t, tau)
            np.testing.assert_allclose(residual_coordinates(Y, S, t, tau), direct @ U[t + tau], atol=1e-4)
            np.testing.assert_allclose(residual_coordinates(Y, S, t, tau) @ U[t + tau].T, direct, atol=1e-4)
        batched = residual_coordinates(Y, S, np.array([0, 1]), 2)
        np.testing.assert_allclose(batched[:, 1], residual_coordinates(Y, S, 1, 2))


def test_gaussian_residuals_have_zero_mean_and_zero_excess_kurtosis():
    X = _gaussian_layers()
    U, S = align_bases(*ensemble_svd(X))
    st = pair_statistics(singular_coordinates(X, U), S, np.arange(4), progress=False)
    mask = pair_mask(4, 0, 3)
    N = len(X)
    assert mask.sum() == 6 and np.all(np.isfinite(st.mean_abs_z()[mask])) and np.all(np.isnan(st.var[~mask]))
    assert np.all(st.mean_abs_z()[mask] < 3 / np.sqrt(N))
    assert np.all(st.mean_abs_kurtosis()[mask] < 3 * np.sqrt(24 / N))
    raw = pair_statistics(singular_coordinates(X, U), S, np.arange(4), U=U, progress=False)
    assert raw.basis == "raw" and np.all(raw.mean_abs_kurtosis()[mask] < 3 * np.sqrt(24 / N))
    # the mean variance over coordinates is a trace: the same in both bases
    np.testing.assert_allclose(raw.log_mean_var()[mask], st.log_mean_var()[mask], rtol=1e-4)


def test_vectorized_statistics_equal_a_direct_loop():
    rng = np.random.default_rng(2)
    X = rng.standard_t(df=5, size=(300, 5, 4)) + 1.0
    U, S = align_bases(*ensemble_svd(X))
    layers = np.arange(1, 5)
    st = pair_statistics(singular_coordinates(X, U), S, layers, progress=False)
    raw = pair_statistics(singular_coordinates(X, U), S, layers, U=U, progress=False)
    for t in layers[:-1]:
        for s in range(t + 1, 5):
            w = eq1_residuals(X, U, S, t, s - t)
            for result, W in ((st, w @ U[s]), (raw, w)):
                np.testing.assert_allclose(result.z[t, s], W.mean(0) / W.std(0), rtol=1e-3, atol=1e-4)
                np.testing.assert_allclose(result.var[t, s], W.var(0), rtol=1e-3)
                np.testing.assert_allclose(result.kurtosis[t, s], stats.kurtosis(W, axis=0), rtol=1e-3, atol=1e-3)


def test_counted_pilots_give_the_statistics_of_the_pilots_repeated():
    rng = np.random.default_rng(4)
    X = rng.standard_t(df=5, size=(120, 5, 4)) + 1.0
    U, S = align_bases(*ensemble_svd(X))
    Y, layers = singular_coordinates(X, U), np.arange(1, 5)
    counts = rng.integers(1, 4, len(X))
    formed = pair_statistics(np.repeat(Y, counts, axis=0), S, layers, expand=False, progress=False)
    for basis in (None, U):
        counted = pair_statistics(Y, S, layers, U=basis, counts=counts, progress=False)
        repeated = pair_statistics(np.repeat(Y, counts, axis=0), S, layers, U=basis, progress=False)
        for name in ("z", "var", "kurtosis"):
            np.testing.assert_allclose(getattr(counted, name), getattr(repeated, name), rtol=1e-4, atol=1e-5)
            if basis is None:  # the expansion against the residuals formed
                np.testing.assert_allclose(getattr(counted, name), getattr(formed, name), rtol=1e-4, atol=1e-5)
    # a residual far smaller than the states it is the difference of: the expansion declines, and the
    # residuals formed keep their moments
    Y = rng.standard_normal((400, 2, 3)).astype(np.float32) * 100
    Y[:, 1] = Y[:, 0] + rng.standard_normal((400, 3)).astype(np.float32) * 1e-2
    w = Y[:, 1].astype(np.float64) - Y[:, 0]
    assert singular_pair_moments(Y, np.ones((2, 3)), np.arange(2)) is None
    small = pair_statistics(Y, np.ones((2, 3)), np.arange(2), progress=False)
    np.testing.assert_allclose(small.var[0, 1], w.var(0), rtol=1e-3)
    np.testing.assert_allclose(small.kurtosis[0, 1], stats.kurtosis(w, axis=0), atol=0.05)


def test_coordinate_moments_of_known_distributions():
    rng = np.random.default_rng(3)
    z, var, kurt = coordinate_moments(rng.normal(2.0, 3.0, size=(200_000, 2)).astype(np.float32))
    np.testing.assert_allclose(z, 2 / 3, atol=0.01)
    np.testing.assert_allclose(var, 9.0, rtol=0.01)
    np.testing.assert_allclose(kurt, 0.0, atol=0.05)
    _, _, kurt = coordinate_moments(rng.laplace(size=(200_000, 2)).astype(np.float32))
    np.testing.assert_allclose(kurt, 3.0, atol=0.2)  # the Laplace distribution's excess kurtosis


def test_variance_fit_recovers_alpha_and_lambda_under_both_conventions():
    rng = np.random.default_rng(4)
    T, k, N, alpha, lam = 12, 50, 2000, 0.64, 0.18
    t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    mask = pair_mask(T, 1, T - 1)
    var = np.full((T, T, k), np.nan)
    for ti, si in zip(*np.nonzero(mask)):  # sample variances of Gaussian residuals with the law's variance
        var[ti, si] = rng.normal(0, np.sqrt(alpha * np.exp(lam * si)), size=(N, k)).var(0)
    for log_var in (np.log(np.mean(var, -1)), np.mean(np.log(var), -1)):
        fit = fit_variance(log_var, mask)
        assert abs(fit["alpha"] - alpha) < 0.02 and abs(fit["lambda"] - lam) < 0.003
        assert fit["r2"] > 0.999 and fit["arrival_r2"] > 0.999 and fit["n_pairs"] == mask.sum()
    departure_dependent = np.log(alpha) + lam * s - 0.3 * t  # depends on t as well as t + tau
    assert fit_variance(departure_dependent, mask)["arrival_r2"] < 0.9
    assert pair_mask(5, 2, 3).sum() == 1 and pair_mask(5, 0, 4).sum() == 10


def test_resampled_pairs_match_the_direct_statistics_of_each_resample():
    rng = np.random.default_rng(6)
    X = (rng.standard_t(df=6, size=(300, 5, 6)) + 1.0) * np.exp(0.3 * np.arange(5))[None, :, None]
    U, S = align_bases(*ensemble_svd(X))
    Y = singular_coordinates(X, U)
    weights = np.vstack([np.ones(300), np.bincount(rng.integers(0, 300, 300), minlength=300)])
    rp = resampled_pairs(Y, S, np.arange(1, 5), weights, progress=False)
    st = pair_statistics(Y, S, np.arange(1, 5), progress=False)
    mask = pair_mask(5, 1, 4)
    np.testing.assert_allclose(rp.trace[0][mask], st.var.sum(-1)[mask], rtol=1e-4)
    np.testing.assert_allclose(rp.mean_log_var[0][mask], st.mean_log_var()[mask], atol=1e-4)
    assert np.isnan(rp.trace[:, ~mask]).all()
    drawn = np.repeat(np.arange(300), weights[1].astype(int))  # resample 1 as an explicit sample
    for t, s in zip(*np.nonzero(mask)):
        W = eq1_residuals(X[drawn], U, S, t, s - t) @ U[s]
        var = W.var(0)
        np.testing.assert_allclose(rp.trace[1, t, s], var.sum(), rtol=1e-4)
        G2 = stats.kurtosis(W, axis=0, bias=False)  # scipy's small-sample correction, computed apart
        np.testing.assert_allclose(rp.kurtosis[1, t, s], np.sum(G2 * var) / var.sum(), rtol=1e-3)
    np.testing.assert_allclose(rp.spread[1], [X[drawn, t].var(0).sum() for t in range(5)], rtol=1e-4)
    np.testing.assert_allclose(rp.log_relative_var()[1][mask], np.log(rp.trace[1] / rp.spread[1][None])[mask])


def test_offset_is_about_zero_for_a_zero_mean_residual_and_finds_a_real_one():
    rng = np.random.default_rng(7)
    N, T, D = 2000, 3, 8
    for shift, expected in ((0.0, 0.0), (0.5, 0.5 ** 2 * D / D)):  # |E w|^2 / tr Cov w = shift^2 D / D
        Y = rng.normal(size=(N, T, D))
        Y[:, 2] += shift  # the layer-2 states move by `shift` along every coordinate; Eq. 1 from layer 1 cannot know
        S = np.ones((T, D))
        rp = resampled_pairs(Y, S, np.arange(T), np.ones((1, N)), progress=False)
        # w(1, 2) = y(2) - y(1): mean `shift` per coordinate, variance 2 per coordinate
        assert abs(rp.offset[0, 1, 2] - expected / 2) < 0.01
        assert abs(rp.offset[0, 0, 1]) < 0.005  # zero-mean residual: unbiased, no 1/N floor


def test_a_cloud_passes_the_absolute_law_and_fails_the_relative_one():
    """Independent points whose scale grows as e^(0.15 t) obey 'arrival only, exponential'."""
    rng = np.random.default_rng(8)
    N, T, D = 600, 12, 10
    cloud = rng.normal(size=(N, T, D)) * np.exp(0.15 * np.arange(T))[None, :, None] + 3.0
    U, S = align_bases(*ensemble_svd(cloud))
    rp = resampled_pairs(singular_coordinates(cloud, U), S, np.arange(1, T), np.ones((1, N)), progress=False)
    mask = pair_mask(T, 1, T - 1)
    absolute, relative = fit_laws(rp.log_mean_var(), mask), fit_laws(rp.log_relative_var(), mask)
    assert absolute["arrival_r2"][0] > 0.99 and absolute["r2"][0] > 0.99 and abs(absolute["lambda"][0] - 0.3) < 0.02
    assert relative["arrival_r2"][0] < 0.5 and relative["r2"][0] < 0.2
    np.testing.assert_allclose(np.exp(rp.log_relative_var()[0][mask]), 2.0, rtol=0.15)  # the map knows nothing


def test_fit_laws_is_fit_variance_row_by_row():
    rng = np.random.default_rng(9)
    mask = pair_mask(8, 1, 7)
    stack = np.where(mask, 0.2 * np.arange(8)[None, None, :] + rng.normal(0, 0.1, size=(3, 8, 8)), np.nan)
    laws = fit_laws(stack, mask)
    for row in range(3):
        fit = fit_variance(stack[row], mask)
        for name in ("alpha", "lambda", "r2", "arrival_r2"):
            assert laws[name][row] == pytest.approx(fit[name])
    t, s = np.nonzero(mask)
    slope, intercept = np.polyfit(s, stack[0][t, s], 1)
    assert laws["lambda"][0] == pytest.approx(slope) and laws["alpha"][0] == pytest.approx(np.exp(intercept))


def test_accumulated_law_is_told_apart_from_eq2():
    T, alpha, lam = 14, 0.7, 0.2
    t, s = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    mask = pair_mask(T, 1, T - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        accumulated = np.log(alpha) + lam * s + np.log(1 - np.exp(-lam * (s - t)))
    fit = fit_accumulated(accumulated, mask)
    assert fit["alpha"] == pytest.approx(alpha, rel=1e-3) and fit["lambda"] == pytest.approx(lam, rel=1e-3)
    assert fit["r2"] > 0.999 > fit_variance(accumulated, mask)["r2"]
    eq2 = np.log(alpha) + lam * s
    assert fit_variance(eq2, mask)["r2"] > 0.999 > fit_accumulated(eq2, mask)["r2"]


def test_shuffled_pilots_keep_every_layer_and_break_every_line():
    X = np.random.default_rng(10).normal(size=(50, 4, 3))
    shuffled = shuffled_pilots(X, seed=1)
    for t in range(4):
        assert sorted(map(tuple, shuffled[:, t])) == sorted(map(tuple, X[:, t]))
    assert np.mean(np.all(shuffled[:, 1] == X[:, 1], axis=1)) < 0.2
    np.testing.assert_array_equal(shuffled, shuffled_pilots(X, seed=1))


def _walk(N=80, T=9, D=12, seed=0):
    rng = np.random.default_rng(seed)
    return (np.cumsum(rng.normal(size=(N, T, D)), axis=1) + 3).astype(np.float32)


def test_pair_layers_split_the_pairs():
    pairs = PairLayers.of(8, "test", early_layers=3)
    assert (pairs.fit_last, pairs.t_pdf, pairs.T) == (8, 4, 9)
    assert np.array_equal(pairs.early | pairs.late, pairs.all) and not (pairs.early & pairs.late).any()
    assert pairs.all.sum() == 28 and pairs.late.sum() == pair_mask(9, 3, 8).sum()
    assert set(pairs.subsets()) == {"default", "all", "no_last", "no_early", "no_both"}
