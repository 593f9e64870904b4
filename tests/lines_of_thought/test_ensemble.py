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
















def svd_ensemble_svd(X: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Test oracle: `ensemble_svd` as LAPACK's thin SVD of each layer computes it (left vectors and all), with
    numpy's signs: U `(T, D, k)`, S `(T, k)`."""
    N, T, D = X.shape
    k = k or min(N, D)
    U, S = np.empty((T, D, k)), np.empty((T, k))
    for t in range(T):
        _, s, vh = np.linalg.svd(X[:, t, :].astype(np.float64), full_matrices=False)
        U[t], S[t] = vh[:k].T, s[:k]
    return U, S


def _assert_same_basis(X, U, S, rtol=1e-10, cos_tol=1e-8):
    """U, S of `ensemble_svd` against the SVD's: equal values, the same vectors up to sign, and each vector
    signed so that the pilots' sum has a non-negative coordinate on it."""
    U_svd, S_svd = svd_ensemble_svd(X)
    np.testing.assert_allclose(S, S_svd, rtol=rtol)
    np.testing.assert_allclose(np.abs(np.einsum("tdk,tdk->tk", U, U_svd)), 1.0, atol=cos_tol)
    assert (np.einsum("td,tdk->tk", X.sum(0), U) >= 0).all()


def test_the_gram_basis_equals_the_svd_on_tall_and_wide_layers():
    rng = np.random.default_rng(7)
    tall = rng.normal(size=(864, 2, 576)) + 0.3  # N >= D: from Z^T Z
    U, S = ensemble_svd(tall)
    assert U.shape == (2, 576, 576) and np.isfinite(U).all()
    _assert_same_basis(tall, U, S)
    np.testing.assert_allclose(U[0].T @ U[0], np.eye(576), atol=1e-12)
    wide = rng.normal(size=(400, 2, 576)) + 0.3  # N < D: from Z Z^T, mapped through Z^T
    U, S = ensemble_svd(wide)
    assert U.shape == (2, 576, 400)
    _assert_same_basis(wide, U, S)
    np.testing.assert_allclose(U[1].T @ U[1], np.eye(400), atol=1e-10)
    U_all, S_all = ensemble_svd(tall)
    U5, S5 = ensemble_svd(tall, k=5)  # the first k of the full basis
    assert U5.shape == (2, 576, 5)
    np.testing.assert_array_equal(S5, S_all[:, :5])
    np.testing.assert_array_equal(U5, U_all[:, :, :5])


def test_a_rank_deficient_layer_has_zero_not_nan_singular_values():
    """Fewer distinct directions than D (x(0) repeats tokens): the values past the rank come out as the SVD's
    (about eps times the largest), never NaN, and the vectors stay orthonormal."""
    rng = np.random.default_rng(8)
    low = rng.normal(size=(864, 2, 100)) @ rng.normal(size=(100, 576))  # rank 100 of 576
    repeated = np.repeat(rng.normal(size=(50, 2, 576)), 12, axis=0)  # 600 rows, 50 distinct: N > D, rank 50
    for X, rank in ((low, 100), (repeated, 50)):
        U, S = ensemble_svd(X)
        assert np.isfinite(U).all() and np.isfinite(S).all() and (S >= 0).all()
        U_svd, S_svd = svd_ensemble_svd(X)
        np.testing.assert_allclose(S, S_svd, rtol=1e-10, atol=1e-10 * S_svd.max())
        assert (S[:, rank:] < 1e-10 * S[:, :1]).all() and (S[:, :rank] > 1e-3 * S[:, :1]).all()
        cos = np.abs(np.einsum("tdk,tdk->tk", U[:, :, :rank], U_svd[:, :, :rank]))
        np.testing.assert_allclose(cos, 1.0, atol=1e-8)
        np.testing.assert_allclose(U[0].T @ U[0], np.eye(U.shape[2]), atol=1e-10)


def test_an_ill_conditioned_layer_takes_the_svd():
    """A spectrum spanning more than 1 / sqrt(GRAM_CONDITION): the layer's values are the SVD's to its
    precision, where the Gram matrix would have lost the smallest ones."""
    from lotlib.lines_of_thought.ensemble import GRAM_CONDITION

    rng = np.random.default_rng(9)
    Q = np.linalg.qr(rng.normal(size=(300, 40)))[0]
    sigma = np.logspace(0, -6, 40)  # sigma_40 / sigma_1 = 1e-6: lambda ratio 1e-12
    assert sigma[-1] ** 2 < GRAM_CONDITION
    X = (Q * sigma) @ np.linalg.qr(rng.normal(size=(40, 40)))[0]
    U, S = ensemble_svd(X[:, None])
    np.testing.assert_allclose(S[0], sigma, rtol=1e-8)
    _assert_same_basis(X[:, None], U, S)
