"""Ensemble SVD (uncentered) and alignment of singular vectors across layers."""
import numpy as np

from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.nulls import gaussian_cloud


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








def test_correlated_cloud_keeps_the_covariance():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 5)) + 3.0
    cloud = gaussian_cloud(x, n=20000, seed=1, correlated=True)
    np.testing.assert_allclose(np.cov(cloud.T, bias=True), np.cov(x.T, bias=True), atol=0.25)
    np.testing.assert_allclose(cloud.mean(0), x.mean(0), atol=0.1)














