"""Eq. 1 extrapolation, residuals, angles between aligned bases, and the SVM distinguishability metric."""

import warnings

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.stats import norm

from benchmarks.coverage_cases import svm_accuracy_interval
from lotlib.lines_of_thought.ensemble import align_bases, basis_angles, ensemble_svd
from lotlib.lines_of_thought.extrapolation import (
    HeldOutBases,
    eq1_residuals,
    extrapolate,
    linear_svc,
    split_accuracy,
    svm_accuracy,
    svm_predictions,
    svm_split_accuracy,
    weighted_svd,
)
from lotlib.lines_of_thought.resampling import refit_bootstrap


def liblinear_predictions(features, labels, train, C):
    """The old `extrapolation.svm_predictions`, the oracle of `linear_svc`: sklearn's StandardScaler then
    LinearSVC (liblinear's primal solver) fit on the rows `train` and applied to the others."""
    pipeline = _liblinear_pipeline(C).fit(features[train], labels[train])
    return pipeline.predict(features[~train])


def _liblinear_pipeline(C):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    return make_pipeline(StandardScaler(), LinearSVC(C=C, dual=False, max_iter=5000))


def _linear_chain(N=300, T=6, D=8, rank=None, seed=0):
    """x(t+1) = R_t M_t x(t): M_t scales the ensemble's own singular directions (a different factor for
    each), R_t is a small rotation. Then Eq. 1 is exact at every (t, tau), whatever the rank of the data."""
    rng = np.random.default_rng(seed)
    X0 = rng.normal(size=(N, D)) * np.linspace(3.0, 1.0, D) + 2.0
    if rank is not None:
        X0 = (
            X0
            @ np.linalg.qr(rng.normal(size=(D, rank)))[0]
            @ rng.normal(size=(rank, D))
        )
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
        np.testing.assert_allclose(
            extrapolate(X, U, S, t, tau), X[:, t + tau], atol=1e-8
        )
        assert np.abs(eq1_residuals(X, U, S, t, tau)).max() < 1e-8


def test_extrapolation_is_exact_for_low_rank_data_at_its_rank():
    X = _linear_chain(rank=3, seed=1)
    U, S = align_bases(*ensemble_svd(X))
    assert np.sum(S[0] > 1e-8 * S[0].max()) == 3
    for rank in (None, 3):
        np.testing.assert_allclose(
            extrapolate(X, U, S, 1, 3, rank=rank), X[:, 4], atol=1e-8
        )


def test_tau_zero_is_the_identity_and_rank_truncates():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 2, 6))
    U, S = align_bases(*ensemble_svd(X))
    np.testing.assert_allclose(extrapolate(X, U, S, 0, 0), X[:, 0], atol=1e-10)
    top2 = U[0][:, np.argsort(S[0])[::-1][:2]]
    np.testing.assert_allclose(
        extrapolate(X, U, S, 0, 0, rank=2), X[:, 0] @ top2 @ top2.T, atol=1e-10
    )
    np.testing.assert_allclose(
        eq1_residuals(X, U, S, 0, 1), X[:, 1] - extrapolate(X, U, S, 0, 1), atol=1e-12
    )


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
    # two unit Gaussians 3 apart: the best accuracy is Phi(1.5) = 0.933
    shifted = A + 3.0 * np.eye(10)[0]
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


def _growing(N=200, T=8, D=6, c=1.3, loc=1.0, seed=0):
    """x(t) = c^t x(0): every layer's basis is layer 0's, and Eq. 1 is exact for every pilot, fit or not."""
    X0 = (
        np.random.default_rng(seed).normal(size=(N, D)) * np.linspace(3.0, 1.0, D) + loc
    )
    return np.stack([X0 * c**t for t in range(T)], axis=1)


def test_resplit_draws_a_new_half_and_refits_the_bases():
    X = _linear_chain(N=200, seed=3)
    study = HeldOutBases.split(X, first=1, seed=0)
    other = study.resplit(np.random.default_rng(5))
    assert not np.array_equal(other.fit, study.fit)
    assert np.array_equal(
        np.sort(np.concatenate([other.fit, other.held])), np.arange(200)
    )
    _, S = align_bases(*ensemble_svd(X[other.fit, 1:]), reference=0)
    np.testing.assert_allclose(other.S, S, rtol=1e-9)


def test_weighted_svd_is_the_svd_of_the_repeated_pilots():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(40, 3, 7)) + 1.0
    counts = rng.integers(0, 3, size=40)
    U, S = weighted_svd(X, counts)
    U0, S0 = ensemble_svd(np.repeat(X, counts, axis=0))
    np.testing.assert_allclose(S, S0, rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.einsum("tdk,tdk->tk", U, U0)), 1.0, atol=1e-8)
    _, S_few = weighted_svd(X, np.eye(40, dtype=int)[0] * 3 + np.eye(40, dtype=int)[1])
    # two distinct pilots: rank 2
    assert S_few.shape == (3, 4) and np.all(S_few[:, 2:] == 0)


def test_split_accuracy_keeps_every_copy_of_a_pilot_on_one_side():
    rng = np.random.default_rng(7)
    # nothing to learn, easy to memorize
    A, B = rng.normal(size=(20, 60)), rng.normal(size=(20, 60))
    pilots = np.repeat(np.arange(20), 10)
    grouped = [
        svm_split_accuracy(
            A[pilots], B[pilots], pilots, np.random.default_rng(s), C=10.0
        )
        for s in range(5)
    ]
    leaked = [
        svm_split_accuracy(
            A[pilots], B[pilots], np.arange(200), np.random.default_rng(s), C=10.0
        )
        for s in range(5)
    ]
    assert np.mean(leaked) > 0.95  # copies on both sides: memorized
    assert abs(np.mean(grouped) - 0.5) < 0.15


def test_svm_accuracy_interval_on_identical_and_separated_classes():
    rng = np.random.default_rng(8)
    A, B = rng.normal(size=(300, 5)), rng.normal(size=(300, 5))
    same = svm_accuracy_interval(A, B, n_rep=30, seed=1)
    assert same.lo < 0.5 < same.hi and same.n == 300 and same.hi - same.lo < 0.2
    # best accuracy Phi(3) = 0.9987
    far = svm_accuracy_interval(A, B + 6.0 * np.eye(5)[0], n_rep=30, seed=1)
    assert far.lo > 0.97 and far.value > 0.98


def test_refit_bootstrap_resamples_pilots_in_every_repetition():
    seen = []

    def statistic(pilots, rng):
        seen.append(pilots.copy())
        return {"mean": float(np.arange(50.0)[pilots].mean())}

    found = refit_bootstrap(statistic, 50, n_rep=6, seed=2)["mean"]
    assert np.array_equal(seen[0], np.arange(50)) and found.value == 24.5
    draws = seen[1:]
    assert all(len(np.unique(d)) < 50 for d in draws)  # with replacement
    assert len({tuple(d) for d in draws}) == 6  # a new draw each time
    again = []
    refit_bootstrap(lambda p, rng: again.append(p) or {"x": 0.0}, 50, n_rep=6, seed=2)
    assert all(np.array_equal(a, b) for a, b in zip(again, seen))  # seeded


def test_the_same_pilot_trap_pooled_moments_agree_and_a_split_then_scores_below_chance():
    """Why the paper's protocol scores below 0.5 (B3, SmolLM2: about 0.40). (1) On the pilots that fit full-rank
    bases, Eq. 1 reproduces the ensemble's second-moment matrix exactly: x~ stacks to V(t) S(t+tau) U(t+tau)^T.
    (2) Two classes whose pooled statistics agree by construction lean opposite ways in any train/test split
    of the pool, so a linear classifier scores below chance (here: two independent Gaussian samples, then the
    same with their pooled means made equal)."""
    X = (
        np.random.default_rng(3).normal(size=(200, 3, 8))
        + np.array([0.0, 1.0, 2.0])[None, :, None]
    )
    U, S = align_bases(*ensemble_svd(X), reference=0)
    moved, true = extrapolate(X, U, S, 0, 2), X[:, 2]
    np.testing.assert_allclose(moved.T @ moved, true.T @ true, rtol=1e-8, atol=1e-8)
    assert not np.allclose(moved, true)  # the pilots themselves are not reproduced
    rng = np.random.default_rng(0)
    free, tied = [], []
    for r in range(20):
        A, B = rng.normal(size=(600, 40)), rng.normal(size=(600, 40))
        free.append(svm_split_accuracy(A, B, np.arange(600), np.random.default_rng(r)))
        tied.append(
            svm_split_accuracy(
                A, B - B.mean(0) + A.mean(0), np.arange(600), np.random.default_rng(r)
            )
        )
    assert abs(np.mean(free) - 0.5) < 0.02 and np.mean(tied) < 0.46


def _classes(case: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two seeded classes of 20 features (rows `(n, 20)`, labels `(n,)` in {0, 1}) for `linear_svc`'s tests:
    identical, overlapping, nearly separable, separable, unbalanced (130 against 70), or with repeated rows,
    a constant feature and an all-zero one."""
    rng = np.random.default_rng(seed)
    n0, n1 = (130, 70) if case == "unbalanced" else (100, 100)
    shift = {
        "identical": 0.0,
        "overlapping": 0.4,
        "nearly separable": 2.5,
        "separable": 8.0,
    }.get(case, 0.4)
    X = rng.normal(size=(n0 + n1, 20)) * np.linspace(0.5, 2.0, 20)
    X[n0:] += shift * rng.normal(size=20) / 2
    if case == "repeated rows, constant and zero features":
        X[::3] = X[1::3][: len(X[::3])]
        X[:, 4], X[:, 7] = 3.0, 0.0
    labels = np.repeat([0, 1], [n0, n1])
    order = rng.permutation(n0 + n1)
    return X[order], labels[order]


CASES = [
    "identical",
    "overlapping",
    "nearly separable",
    "separable",
    "unbalanced",
    "repeated rows, constant and zero features",
]


@pytest.mark.parametrize("case", CASES)
def test_linear_svc_is_liblinear_bit_for_bit(case):
    """The weights of LinearSVC(dual=False) to the last bit (x86-64, where liblinear's sums are plain
    multiplies and adds), and so its predictions, for several C, on standardized features as B3 gives them."""
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    for seed, C in [(0, 0.1), (1, 1.0), (2, 10.0)]:
        X, labels = _classes(case, seed)
        X = StandardScaler().fit_transform(X)
        svc = LinearSVC(C=C, dual=False, max_iter=5000).fit(X, labels)
        w = linear_svc(X, labels, C)
        assert np.array_equal(w, np.r_[svc.coef_[0], svc.intercept_])
        train = np.random.default_rng(seed).random(len(X)) < 0.5
        np.testing.assert_array_equal(
            svm_predictions(X, labels, train, C),
            liblinear_predictions(X, labels, train, C),
        )


def test_the_svm_accuracies_are_the_old_ones():
    """split_accuracy and svm_accuracy equal the old code's scores exactly (the pipeline fit on the training
    rows, and cross_val_score over the folds of paired pilots), on paired classes as B3 gives them."""
    from sklearn.model_selection import cross_val_score

    for seed in range(3):
        rng = np.random.default_rng(seed)
        A = rng.normal(size=(150, 30))
        B = A * 0.9 + 0.4 * rng.normal(size=(150, 30)) + 0.05 * seed
        features, labels = np.concatenate([A, B]), np.repeat([0, 1], 150)
        train = np.tile(rng.random(150) < 0.5, 2)
        old = np.mean(
            liblinear_predictions(features, labels, train, 0.1) == labels[~train]
        )
        assert split_accuracy(A, B, train[:150], C=0.1) == old
        fold = np.tile(np.random.default_rng(seed).permutation(150) % 5, 2)
        splits = [
            (np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(5)
        ]
        pipeline = _liblinear_pipeline(1.0)
        old = cross_val_score(pipeline, features, labels, cv=splits).mean()
        assert svm_accuracy(A, B, seed=seed) == old


def test_linear_svc_edge_cases_fail_or_warn_as_liblinear_does():
    """One class, no test rows and NaN features fail; too few steps warn and stop where liblinear stops."""
    from sklearn.svm import LinearSVC

    X, labels = _classes("overlapping", 3)
    with pytest.raises(ValueError, match="two classes"):
        linear_svc(X, np.zeros(len(X), int), 1.0)
    with pytest.raises(ValueError):
        LinearSVC(dual=False).fit(X, np.zeros(len(X), int))
    for train in (labels == 0, np.ones(len(X), bool)):  # one class, or no test rows
        with pytest.raises(ValueError):
            svm_predictions(X, labels, train, 1.0)
        with pytest.raises(ValueError):
            liblinear_predictions(X, labels, train, 1.0)
    broken = X.copy()
    broken[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        linear_svc(broken, labels, 1.0)
    with pytest.warns(UserWarning, match="did not converge"):
        w = linear_svc(X, labels, 10.0, max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svc = LinearSVC(C=10.0, dual=False, max_iter=2).fit(X, labels)
    assert np.array_equal(w, np.r_[svc.coef_[0], svc.intercept_])
