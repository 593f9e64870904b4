"""Residual statistics of the linear extrapolation (Eq. 2, Fig. B4) and the variance fit."""
import numpy as np
from scipy import stats

from lotlib.lines_of_thought.extrapolation import residuals
from lotlib.lines_of_thought.residuals import (coordinate_moments, fit_variance, mean_abs_offdiagonal, pair_mask, pair_statistics,
                              residual_coordinates, singular_coordinates)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd


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
            direct = residuals(X, U, S, t, tau)
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
            w = residuals(X, U, S, t, s - t)
            for result, W in ((st, w @ U[s]), (raw, w)):
                np.testing.assert_allclose(result.z[t, s], W.mean(0) / W.std(0), rtol=1e-3, atol=1e-4)
                np.testing.assert_allclose(result.var[t, s], W.var(0), rtol=1e-3)
                np.testing.assert_allclose(result.kurtosis[t, s], stats.kurtosis(W, axis=0), rtol=1e-3, atol=1e-3)


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


def test_offdiagonal_correlation():
    rng = np.random.default_rng(5)
    N = 2000
    independent = rng.normal(size=(N, 20))
    assert abs(mean_abs_offdiagonal(independent) - np.sqrt(2 / (np.pi * N))) < 0.005
    shared = independent + 2.0 * rng.normal(size=(N, 1))
    assert mean_abs_offdiagonal(shared) > 0.7
