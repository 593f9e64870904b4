"""Ensemble SVD (uncentered) and alignment of singular vectors across layers."""
import numpy as np

from lotlib.lines_of_thought.ensemble import (align_bases, centered_spectrum, directions_for, ensemble_svd, gaussian_cloud,
                                              principal_directions, variance_captured)


def test_uncentered_svd_reconstructs_each_layer():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3, 8)) + 5.0  # a large common offset: the uncentered u1 follows the mean
    U, S = ensemble_svd(X)
    assert U.shape == (3, 8, 8) and S.shape == (3, 8)
    for t in range(3):
        coords = X[:, t] @ U[t]
        np.testing.assert_allclose(coords @ U[t].T, X[:, t], atol=1e-10)
        np.testing.assert_allclose(np.linalg.norm(coords, axis=0), S[t], atol=1e-10)
        mean_dir = X[:, t].mean(0) / np.linalg.norm(X[:, t].mean(0))
        assert abs(U[t][:, 0] @ mean_dir) > 0.99


def test_alignment_undoes_permutations_and_sign_flips():
    rng = np.random.default_rng(1)
    Q = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    perm = [2, 0, 1, 5, 3, 4]
    signs = np.array([1, -1, -1, 1, -1, 1])
    U = np.stack([Q, Q[:, perm] * signs])
    S = np.stack([np.arange(6.0, 0, -1), np.arange(6.0, 0, -1)[perm]])
    Ua, Sa = align_bases(U, S)
    np.testing.assert_allclose(Ua[1], Q, atol=1e-12)
    np.testing.assert_allclose(Sa[1], S[0])


def test_centered_spectrum_is_the_variance_around_the_mean_for_tall_and_wide_ensembles():
    rng = np.random.default_rng(2)
    for N, D in [(50, 8), (6, 20)]:
        x = rng.normal(size=(N, D)) * np.linspace(4.0, 0.5, D) + 10.0
        expected = np.linalg.svd(x - x.mean(0), compute_uv=False) ** 2 / N
        spectrum = centered_spectrum(x)
        assert spectrum.shape == (min(N, D),)
        np.testing.assert_allclose(spectrum[:len(expected)], expected, rtol=1e-9, atol=1e-9)
        assert np.all(np.diff(spectrum) <= 1e-12)


def test_directions_for_a_share():
    assert directions_for(np.array([5.0, 3.0, 1.0, 1.0]), 0.8) == 2
    assert directions_for(np.array([5.0, 3.0, 1.0, 1.0]), 0.81) == 3
    assert directions_for(np.ones(10), 0.9) == 9


def test_a_structured_ensemble_needs_fewer_directions_than_its_structureless_cloud():
    """Points on a 2-plane with a large offset: two directions around the mean, while the cloud with the same
    mean and per-coordinate variance (correlations removed) spreads over every coordinate."""
    rng = np.random.default_rng(3)
    plane = np.linalg.qr(rng.normal(size=(30, 2)))[0]
    x = rng.normal(size=(400, 2)) @ plane.T * 3.0 + 20.0
    cloud = gaussian_cloud(x, seed=0)
    np.testing.assert_allclose(cloud.mean(0), x.mean(0), atol=0.5)
    np.testing.assert_allclose(cloud.std(0), x.std(0), rtol=0.15)
    assert directions_for(centered_spectrum(x)) == 2
    assert directions_for(centered_spectrum(cloud)) > 15
    np.testing.assert_array_equal(gaussian_cloud(x, seed=0), cloud)


def test_correlated_cloud_keeps_the_covariance():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 5)) + 3.0
    cloud = gaussian_cloud(x, n=20000, seed=1, correlated=True)
    np.testing.assert_allclose(np.cov(cloud.T, bias=True), np.cov(x.T, bias=True), atol=0.25)
    np.testing.assert_allclose(cloud.mean(0), x.mean(0), atol=0.1)


def test_variance_captured_out_of_sample_by_the_principal_directions_of_other_states():
    rng = np.random.default_rng(5)
    plane = np.linalg.qr(rng.normal(size=(12, 3)))[0]
    x = rng.normal(size=(600, 3)) @ plane.T * 5.0 + 0.1 * rng.normal(size=(600, 12)) + 7.0
    mean, directions = principal_directions(x[:300], 3)
    assert directions.shape == (12, 3)
    np.testing.assert_allclose(directions.T @ directions, np.eye(3), atol=1e-10)
    captured, total = variance_captured(x[300:], mean, directions)
    assert 0.98 < captured.sum() / total.sum() < 1.0
    assert np.all(captured <= total + 1e-12)
    cloud = gaussian_cloud(x, seed=2)
    mean, directions = principal_directions(cloud[:300], 3)
    captured, total = variance_captured(cloud[300:], mean, directions)
    assert captured.sum() / total.sum() < 0.5
