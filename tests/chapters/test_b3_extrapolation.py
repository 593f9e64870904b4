"""Tests of `lotlib.chapters.b3_extrapolation`."""

import numpy as np

from lotlib.chapters.b3_extrapolation import (
    prediction_errors,
    subsamples,
    svm_by_tau,
    svm_true_vs_true,
)
from lotlib.lines_of_thought.extrapolation import (
    HeldOutBases,
    repeated_svm,
    svm_split_accuracy,
)
from tests.lines_of_thought.test_extrapolation import _growing


def test_held_out_split_and_prediction_errors():
    X = _growing()
    study = HeldOutBases.split(X, first=3, seed=1)
    assert study.L == 7 and study.columns == 6
    assert np.array_equal(
        np.sort(np.concatenate([study.fit, study.held])), np.arange(200)
    )
    np.testing.assert_allclose(
        study.extrapolate(study.held, 4, 2), X[study.held, 6], rtol=1e-9
    )
    errors = prediction_errors(study, 3)
    held = study.held
    assert errors.distances["Eq. 1"].max() < 1e-9
    naive = np.linalg.norm(X[held, 3 + 2] - X[held, 3], axis=1)
    np.testing.assert_allclose(errors.distances["naive x(t)"][1], naive)
    blind = np.linalg.norm(X[held, 6] - X[study.fit, 6].mean(0), axis=1)
    np.testing.assert_allclose(
        errors.distances["pilot-blind: mean of x(t+τ)"][2], blind
    )
    np.testing.assert_allclose(
        errors.state_norm, np.linalg.norm(X[held, 4:7], axis=-1).mean(0)
    )
    assert errors.ratio("naive x(t)", 2, n_boot=50).value == 1.0
    assert errors.ratio("Eq. 1", 1, n_boot=50).hi < 1e-6
    summary = errors.summary(n_boot=50)
    assert summary["error_ratio_mean_tau_max"] == errors.ratio(
        "pilot-blind: mean of x(t+τ)", 3, 50
    )
    np.testing.assert_allclose(
        summary["relative_error_naive_by_tau"][1], naive.mean() / errors.state_norm[1]
    )
    assert study.starts(3).tolist() == [3, 4, 6] and study.starts(
        2, last=5
    ).tolist() == [3, 5]


def test_subsamples_come_from_their_halves():
    study = HeldOutBases.split(_growing(), first=2)
    drawn = subsamples(study, seed=0, n_plot=30, n_svm=500)
    assert len(drawn.drawn) == 30 and set(drawn.drawn) <= set(study.held)
    assert np.array_equal(drawn.test, study.held)
    assert np.array_equal(np.sort(drawn.shuffled), drawn.test)


def test_held_out_svm_verdicts_on_an_exact_extrapolation():
    X = _growing(N=300, T=6, loc=10.0)
    study = HeldOutBases.split(X, first=2, seed=0)
    curves = svm_by_tau(study, study.held, [1, 2], seed=0, C=1.0)
    assert np.all(curves["Eq. 1"] <= 0.55)  # identical sets: nothing to learn
    assert np.all(curves["naive x(t)"] > 0.9)  # the mean moves by 30% a layer
    same = svm_true_vs_true(
        study, np.random.default_rng(0).permutation(study.held), [1]
    )
    assert 0.3 < same[0] < 0.7
    verdicts = repeated_svm(study, study.starts(2, last=3), 2, n_rep=3, n_svm=100)
    tau1, far = verdicts["svm_extrapolated_tau1"], verdicts["svm_extrapolated_tau_max"]
    assert (
        len(verdicts) == 6
        and far.value <= 0.6
        and tau1.method == "bootstrap (centered)"
    )
    assert np.isclose(verdicts["svm_extrapolated_growth"].value, far.value - tau1.value)
    # the values are one measurement on study's own split, drawn with default_rng(seed)
    once = repeated_svm(study, np.array([2]), 2, n_rep=0, n_svm=100, seed=3)
    rng = np.random.default_rng(3)
    scored = rng.choice(study.held, size=100, replace=False)
    A, B = study.pair(scored, 2, 1, "Eq. 1", seed=int(rng.integers(2**31)))
    assert once["svm_extrapolated_tau1"].value == svm_split_accuracy(A, B, scored, rng)
