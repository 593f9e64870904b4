"""Eq. 1 extrapolation, residuals, angles between aligned bases, and the SVM distinguishability metric."""
import numpy as np
from scipy.linalg import expm
from scipy.stats import norm

from lotlib.lines_of_thought.extrapolation import basis_angles, extrapolate, residuals, svm_accuracy
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd


def _linear_chain(N=300, T=6, D=8, rank=None, seed=0):
    """x(t+1) = R_t M_t x(t): M_t scales the ensemble's own singular directions (a different factor for
    each), R_t is a small rotation. Then Eq. 1 is exact at every (t, tau), whatever the rank of the data."""
    rng = np.random.default_rng(seed)
    X0 = rng.normal(size=(N, D)) * np.linspace(3.0, 1.0, D) + 2.0
    if rank is not None:
        X0 = X0 @ np.linalg.qr(rng.normal(size=(D, rank)))[0] @ rng.normal(size=(rank, D))
    X = [X0]
    for _ in range(T - 1):
        _, _, vh = np.linalg.svd(X[-1], full_matrices=False)
        M = vh.T @ np.diag(rng.uniform(0.8, 1.3, D)) @ vh
        skew = rng.normal(size=(D, D)) * 0.05
        X.append(X[-1] @ M.T @ expm(skew - skew.T).T)
    return np.stack(X, axis=1)


def test_extrapolation_is_exact_for_a_linear_chain():
    X = _linear_chain()
    U, S = align_bases(*ensemble_svd(X))
    for t, tau in [(0, 1), (1, 3), (2, 3), (0, 5)]:
        np.testing.assert_allclose(extrapolate(X, U, S, t, tau), X[:, t + tau], atol=1e-8)
        assert np.abs(residuals(X, U, S, t, tau)).max() < 1e-8


def test_extrapolation_is_exact_for_low_rank_data_at_its_rank():
    X = _linear_chain(rank=3, seed=1)
    U, S = align_bases(*ensemble_svd(X))
    assert np.sum(S[0] > 1e-8 * S[0].max()) == 3
    for rank in (None, 3):
        np.testing.assert_allclose(extrapolate(X, U, S, 1, 3, rank=rank), X[:, 4], atol=1e-8)


def test_tau_zero_is_the_identity_and_rank_truncates():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 2, 6))
    U, S = align_bases(*ensemble_svd(X))
    np.testing.assert_allclose(extrapolate(X, U, S, 0, 0), X[:, 0], atol=1e-10)
    top2 = U[0][:, np.argsort(S[0])[::-1][:2]]
    np.testing.assert_allclose(extrapolate(X, U, S, 0, 0, rank=2), X[:, 0] @ top2 @ top2.T, atol=1e-10)
    np.testing.assert_allclose(residuals(X, U, S, 0, 1), X[:, 1] - extrapolate(X, U, S, 0, 1), atol=1e-12)


def test_basis_angles():
    U, _ = align_bases(*ensemble_svd(_linear_chain()))
    for i in range(4):
        A = basis_angles(U, i)
        assert A.shape == (6, 6)
        np.testing.assert_allclose(np.diag(A), 0.0, atol=1e-5)
        np.testing.assert_allclose(A, A.T)
        assert A.min() >= 0 and A.max() <= 90
    Q = np.linalg.qr(np.random.default_rng(3).normal(size=(4, 4)))[0]
    assert np.isclose(basis_angles(np.stack([Q, np.roll(Q, 1, axis=1)]), 0)[0, 1], 90.0)


def test_svm_accuracy_is_chance_on_indistinguishable_data_and_one_on_separable_data():
    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(400, 10)), rng.normal(size=(400, 10))
    assert abs(svm_accuracy(A, B, seed=0) - 0.5) < 0.06
    assert svm_accuracy(A, B, seed=0) == svm_accuracy(A, B, seed=0)
    shifted = A + 3.0 * np.eye(10)[0]  # two unit Gaussians 3 apart: the best accuracy is Phi(1.5) = 0.933
    assert abs(svm_accuracy(A, shifted, seed=0) - norm.cdf(1.5)) < 0.03


def test_alignment_from_the_last_layer_names_columns_by_its_order():
    rng = np.random.default_rng(5)
    Q = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    perm, signs = [3, 0, 5, 1, 2, 4], np.array([-1, 1, 1, -1, 1, -1])
    U = np.stack([Q[:, perm] * signs, Q])
    S = np.stack([np.arange(6.0, 0, -1)[perm], np.arange(6.0, 0, -1)])
    Ua, Sa = align_bases(U, S, reference=-1)
    np.testing.assert_allclose(Ua, np.stack([Q, Q]), atol=1e-12)
    np.testing.assert_allclose(Sa[0], S[1])
