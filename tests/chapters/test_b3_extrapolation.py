"""Tests of `lotlib.chapters.b3_extrapolation`."""

import numpy as np
import pytest

from lotlib.chapters.b3_extrapolation import (
    BASES_FROM,
    VerdictSvm,
    prediction_errors,
    repeated_svm,
    same_pilot_svm,
    subsamples,
    svm_by_tau,
    svm_true_vs_true,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.extrapolation import (
    HeldOutBases,
    extrapolate,
    split_accuracy,
    svm_split_accuracy,
    weighted_svd,
)
from lotlib.stats import training_rows
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
    assert errors.distances["eq1"].max() < 1e-9
    naive = np.linalg.norm(X[held, 3 + 2] - X[held, 3], axis=1)
    np.testing.assert_allclose(errors.distances["naive"][1], naive)
    blind = np.linalg.norm(X[held, 6] - X[study.fit, 6].mean(0), axis=1)
    np.testing.assert_allclose(errors.distances["mean"][2], blind)
    np.testing.assert_allclose(
        errors.state_norm, np.linalg.norm(X[held, 4:7], axis=-1).mean(0)
    )
    assert errors.ratio("naive", 2, n_boot=50).value == 1.0
    assert errors.ratio("eq1", 1, n_boot=50).hi < 1e-6
    summary = errors.summary(n_boot=50)
    assert summary["error_ratio_mean_tau_max"] == errors.ratio("mean", 3, 50)
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
    assert np.all(curves["eq1"] <= 0.55)  # identical sets: nothing to learn
    assert np.all(curves["naive"] > 0.9)  # the mean moves by 30% a layer
    same = svm_true_vs_true(
        study, np.random.default_rng(0).permutation(study.held), [1]
    )
    assert 0.3 < same[0] < 0.7
    verdicts = repeated_svm(
        study, study.starts(2, last=3), 2, 100, VerdictSvm(n_rep=3, C=0.1)
    )
    tau1, far = verdicts["svm_extrapolated_tau1"], verdicts["svm_extrapolated_tau_max"]
    assert (
        len(verdicts) == 6
        and far.value <= 0.6
        and tau1.method == "bootstrap (centered)"
    )
    assert np.isclose(verdicts["svm_extrapolated_growth"].value, far.value - tau1.value)
    # the values are one measurement on study's own split, drawn with default_rng(seed)
    once = repeated_svm(study, np.array([2]), 2, 100, VerdictSvm(n_rep=0, seed=3))
    rng = np.random.default_rng(3)
    scored = rng.choice(study.held, size=100, replace=False)
    A, B = study.pair(scored, 2, 1, "Eq. 1", seed=int(rng.integers(2**31)))
    assert once["svm_extrapolated_tau1"].value == svm_split_accuracy(A, B, scored, rng)


def test_same_pilot_svm_is_the_paper_protocol():
    X = _growing(
        N=300, T=6, loc=10.0
    )  # Eq. 1 is exact on any pilots: the classes are identical
    found = same_pilot_svm(X, 2, [2, 3], 2, VerdictSvm(n_rep=4, seed=1))
    assert set(found) == {"paper_svm_tau1", "paper_svm_tau10"}
    tau1 = found["paper_svm_tau1"]
    assert tau1.n == 300 and tau1.value <= 0.56 and tau1.lo <= tau1.hi
    # the value: bases from all 300 pilots, the same pilots extrapolated and classified
    Xs = X[:, 2:6].astype(np.float64)
    U, S = align_bases(*ensemble_svd(Xs), reference=0)
    rng = np.random.default_rng(1)
    direct = [
        svm_split_accuracy(
            extrapolate(Xs, U, S, t, 1), Xs[:, t + 1], np.arange(300), rng
        )
        for t in (0, 1)
    ]
    assert tau1.value == pytest.approx(np.mean(direct))
    # a nonlinear step: Eq. 1 still matches the second moments, not the shape, and the SVM sees it
    x = np.random.default_rng(9).normal(size=(300, 6))
    bent = np.stack([x, x**2 * np.sign(x) + 1.0], axis=1)
    assert (
        same_pilot_svm(bent, 0, [0], 1, VerdictSvm(n_rep=2))["paper_svm_tau1"].value
        > 0.65
    )


def test_the_two_readings_of_the_same_pilot_split_err_on_opposite_sides_where_eq1_holds():
    """B3's two readings of the paper's unpublished split, on a Langevin generator that Eq. 1 describes by
    construction (D = 16, 96 pilots, from layer 1, tau 1 and 3, 8 seeds): bases fit on all pilots score below
    chance (0.45: the pooled moments tie the split's halves), bases fit on the training pilots only score above
    it (0.56-0.59: the classifier learns on extrapolations of the fit pilots and is scored on others). The
    figures B3's prose quotes."""
    from benchmarks.coverage_cases import LangevinGenerator

    generator = LangevinGenerator(D=16, L=8, alpha=1.0)
    mean = {}
    for bases in BASES_FROM:
        found = [
            same_pilot_svm(
                generator.sample(96, s), 1, [2], 3, VerdictSvm(n_rep=0, seed=s), bases
            )
            for s in range(8)
        ]
        mean[bases] = np.mean([[e.value for e in f.values()] for f in found], axis=0)
    assert set(found[0]) == {
        "paper_svm_tau1_training_bases",
        "paper_svm_tau10_training_bases",
    }
    assert (0.43 <= mean["all"]).all() and (mean["all"] <= 0.47).all()
    assert (0.55 <= mean["training"]).all() and (mean["training"] <= 0.60).all()
    # the training reading's bases see the training pilots only: its value is a direct computation
    X, rng = generator.sample(96, 0), np.random.default_rng(0)
    train = training_rows(np.arange(96), rng)
    U, S = align_bases(
        *weighted_svd(X[:, 1:6].astype(np.float64), train.astype(float)), reference=0
    )
    direct = split_accuracy(
        extrapolate(X[:, 1:6].astype(np.float64), U, S, 1, 1), X[:, 3], train
    )
    got = same_pilot_svm(X, 1, [2], 3, VerdictSvm(n_rep=0), "training")[
        "paper_svm_tau1_training_bases"
    ]
    assert got.value == pytest.approx(direct)
    with pytest.raises(ValueError, match="bases_from must be one of"):
        same_pilot_svm(X, 1, [2], 3, VerdictSvm(n_rep=0), "held out")


def test_no_number_moves_with_the_compiled_solver(monkeypatch):
    """Every SVM value of B3 (the curves, the held-out verdicts, both readings of the paper's protocol) is
    the same with liblinear itself as the SVM (the old code, `liblinear_predictions`), to the last bit."""
    import lotlib.lines_of_thought.extrapolation as extrapolation
    from benchmarks.coverage_cases import LangevinGenerator
    from tests.lines_of_thought.test_extrapolation import liblinear_predictions

    X = LangevinGenerator(D=12, L=8, alpha=1.0).sample(160, 0)
    study = HeldOutBases.split(X, first=2, seed=0)

    def values() -> dict:
        svm = VerdictSvm(n_rep=3, seed=1)
        found = {
            **svm_by_tau(study, study.held, [1, 3], seed=0, C=0.1),
            "true": svm_true_vs_true(study, study.held, [1, 3], C=0.1),
            **repeated_svm(study, np.array([2, 3]), 3, 60, svm),
        }
        for bases in BASES_FROM:
            found |= same_pilot_svm(X, 2, [2, 3], 3, svm, bases)
        return found

    new = values()
    monkeypatch.setattr(extrapolation, "svm_predictions", liblinear_predictions)
    old = values()
    assert new.keys() == old.keys()
    for key, value in new.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(old[key]), key)
