"""Ensemble SVD (uncentered) and alignment of singular vectors across layers."""

from collections import Counter

import numpy as np
import torch

from lotlib.lines_of_thought import ensemble
from lotlib.lines_of_thought.ensemble import (
    align_bases,
    aligned_svd,
    ensemble_svd,
    stored_alignment,
)
from lotlib.lines_of_thought.nulls import gaussian_cloud


def test_uncentered_svd_reconstructs_each_layer():
    rng = np.random.default_rng(0)
    # a large common offset: the uncentered u1 follows the mean
    X = rng.normal(size=(40, 3, 8)) + 5.0
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
    np.testing.assert_allclose(
        np.cov(cloud.T, bias=True), np.cov(x.T, bias=True), atol=0.25
    )
    np.testing.assert_allclose(cloud.mean(0), x.mean(0), atol=0.1)


def svd_ensemble_svd(
    X: np.ndarray, k: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
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
    np.testing.assert_allclose(
        np.abs(np.einsum("tdk,tdk->tk", U, U_svd)), 1.0, atol=cos_tol
    )
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
    # rank 100 of 576; 600 rows, 50 distinct: N > D, rank 50
    low = rng.normal(size=(864, 2, 100)) @ rng.normal(size=(100, 576))
    repeated = np.repeat(rng.normal(size=(50, 2, 576)), 12, axis=0)
    for X, rank in ((low, 100), (repeated, 50)):
        U, S = ensemble_svd(X)
        assert np.isfinite(U).all() and np.isfinite(S).all() and (S >= 0).all()
        U_svd, S_svd = svd_ensemble_svd(X)
        np.testing.assert_allclose(S, S_svd, rtol=1e-10, atol=1e-10 * S_svd.max())
        assert (S[:, rank:] < 1e-10 * S[:, :1]).all() and (
            S[:, :rank] > 1e-3 * S[:, :1]
        ).all()
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


def count_stored_bases(monkeypatch, tmp_path) -> Counter:
    """Every basis kept (`STORED_SIZE` 0) in a fresh cache under `tmp_path`; the returned counter counts the
    SVDs (`_layer_bases`) and alignments (`_alignment`) computed."""
    monkeypatch.setenv("LOTLIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ensemble, "STORED_SIZE", 0)
    calls = Counter()

    def counting(name: str):
        real = getattr(ensemble, name)

        def counted(*args):
            calls[name] += 1
            return real(*args)

        return counted

    for name in ("_layer_bases", "_alignment"):
        monkeypatch.setattr(ensemble, name, counting(name))
    return calls


def test_a_kept_basis_is_computed_once_and_read_back_bit_for_bit(monkeypatch, tmp_path):
    calls = count_stored_bases(monkeypatch, tmp_path)
    X = np.random.default_rng(10).normal(size=(30, 3, 8)) + 1.0
    U, S = ensemble_svd(X)
    # the contents key it, not the device
    again = ensemble_svd(X.copy(), device=torch.device("cpu"))
    assert calls["_layer_bases"] == 1
    monkeypatch.setattr(ensemble, "STORED_SIZE", 10**9)  # computed afresh
    fresh = ensemble_svd(X)
    assert calls["_layer_bases"] == 2
    for got in (again, fresh):
        np.testing.assert_array_equal(got[0], U)
        np.testing.assert_array_equal(got[1], S)


def test_other_pilots_or_another_k_are_another_entry(monkeypatch, tmp_path):
    calls = count_stored_bases(monkeypatch, tmp_path)
    X = np.random.default_rng(11).normal(size=(30, 3, 8)) + 1.0
    other = X.copy()
    other[0, 0, 0] += 1e-9
    U, _ = ensemble_svd(X)
    U_other, _ = ensemble_svd(other)
    U5, _ = ensemble_svd(X, k=5)
    ensemble_svd(X.astype(np.float32))
    assert calls["_layer_bases"] == 4 and len(list(tmp_path.rglob("*.pkl"))) == 4
    assert not np.array_equal(U_other, U) and U5.shape == (3, 8, 5)


def test_an_alignment_is_kept_by_the_bases_it_aligns(monkeypatch, tmp_path):
    """B4 and C3 align the half-split bases through `aligned_svd`, C5 aligns the sorted ones it holds
    (`stored_alignment`): one SVD and one alignment in all; another reference is another alignment."""
    calls = count_stored_bases(monkeypatch, tmp_path)
    X = np.random.default_rng(12).normal(size=(30, 4, 8)) + 1.0
    U, S = aligned_svd(X)
    for again in (aligned_svd(X), stored_alignment(*ensemble_svd(X))):
        np.testing.assert_array_equal(again[0], U)
        np.testing.assert_array_equal(again[1], S)
    assert calls == {"_layer_bases": 1, "_alignment": 1}
    aligned_svd(X, reference=-1)
    aligned_svd(X, reference=3)  # the same layer
    assert calls == {"_layer_bases": 1, "_alignment": 2}
    direct = align_bases(*ensemble_svd(X), reference=3)
    for got, want in zip(aligned_svd(X, reference=3), direct):
        np.testing.assert_array_equal(got, want)


def test_an_order_and_signs_applied_are_the_alignment_bit_for_bit():
    """`aligned_by` of the order and signs `align_bases` chose gives its copies exactly, in U's dtype."""
    rng = np.random.default_rng(14)
    U, S = ensemble_svd(rng.normal(size=(30, 5, 8)) + 1.0)
    U32 = U.astype(np.float32)
    for reference in (0, 2, -1):
        U_al, S_al, order, signs = ensemble._alignment(U32, S, reference)
        assert (np.sort(order, axis=1) == np.arange(8)).all()
        assert set(np.unique(signs)) <= {-1.0, 1.0}
        got_U, got_S = ensemble.aligned_by(U32, S, order, signs)
        assert got_U.dtype == np.float32
        np.testing.assert_array_equal(got_U, U_al)
        np.testing.assert_array_equal(got_S, S_al)


def test_a_small_basis_is_recomputed_and_never_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("LOTLIB_CACHE_DIR", str(tmp_path))
    X = np.random.default_rng(13).normal(size=(30, 3, 8))
    assert 3 * 8 * 8 < ensemble.STORED_SIZE
    np.testing.assert_array_equal(aligned_svd(X)[0], aligned_svd(X)[0])
    assert not list(tmp_path.rglob("*.pkl"))
