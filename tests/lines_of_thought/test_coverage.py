"""Coverage of the book's 95% intervals on synthetic ensembles, a small seeded version of
benchmarks/coverage.py.

Threshold: with R = 20 replications of an interval whose true coverage is 95%, the number covering the truth
is Binomial(20, 0.95), and P(covered >= 15) = 0.99967 > 0.999 (`binomial_floor`): a test asserting >= 15 of 20
fails a correct interval less than once in a thousand seeds, and catches an interval of true coverage 60%
(P(>= 15) = 0.13) most of the time.
"""

import numpy as np
import pytest
import torch
from scipy.stats import binom

from benchmarks.coverage_cases import (
    Case,
    GaussianCloud,
    LangevinGenerator,
    PairedClasses,
    authors_b4,
    binomial_floor,
    book_cases,
    held_out_b4,
    replicate,
)
from lotlib.lines_of_thought import langevin
from lotlib.stats import Estimate, bootstrap_mean

R = 20
FLOOR = 15


@pytest.fixture(autouse=True)
def one_thread():
    """Small problems on busy cores: torch on one thread, as `replicate` runs them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_binomial_floor_is_the_stated_bound():
    assert binomial_floor(R) == FLOOR
    assert binom.sf(FLOOR - 1, R, 0.95) > 0.999  # P(covered >= 15)
    assert (
        binom.sf(FLOOR, R, 0.95) < 0.999
    )  # 16 would fail a correct interval more often
    assert binomial_floor(100) == 87


def test_the_langevin_generator_has_the_fokker_planck_moments():
    """A large sample's mean and covariance at the last layer against `langevin.moments` carried from the
    start's mean and covariance (an independent computation of the same law)."""
    g = LangevinGenerator(D=6, L=4, alpha=0.5)
    U0, s0, plan = g.design
    mean, cov = langevin.moments(
        g.mean_norm * U0[:, 0],
        U0 @ np.diag(s0**2) @ U0.T,
        plan,
        langevin.exponential_noise(g.alpha, g.lam),
    )
    X = g.sample(20000, 3).astype(np.float64)
    assert X.shape == (20000, 5, 6)
    np.testing.assert_allclose(X[:, -1].mean(0), mean[-1], atol=0.05)
    np.testing.assert_allclose(
        np.cov(X[:, -1].T), cov[-1], atol=0.1 * np.trace(cov[-1]) / 6
    )


def test_the_cloud_truth_is_the_large_sample_value_of_both_b4_estimators():
    """The closed forms of `GaussianCloud.truth` (residual variance 2 c e^(lambda s), kurtosis kappa / 2) against
    both B4 estimators on one large sample: the estimand is the closed form."""
    for kappa in (0.0, 3.0):
        cloud = GaussianCloud(D=6, L=5, kurtosis=kappa)
        X = cloud.sample(20000, 7)
        exact = cloud.truth()
        found = {
            k: e.value
            for f in (authors_b4, held_out_b4)
            for k, e in f(X, n_boot=2).items()
        }
        for key in ("lambda_log_mean", "lambda_mean_log"):
            assert found[key] == pytest.approx(exact[key], abs=0.01)
        for key in ("lambda_L_log_mean", "lambda_L_mean_log"):
            assert found[key] == pytest.approx(exact[key], abs=0.05)
        for key in ("alpha_log_mean", "alpha_mean_log", "alpha_relative"):
            assert found[key] == pytest.approx(exact[key], rel=0.04)
        assert found["kurtosis_late"] == pytest.approx(
            exact["kurtosis_late"], abs=0.1 + 0.05 * kappa
        )
        assert (
            found["mean_abs_z"] < 0.03
        )  # the noise floor of 20000 pilots, about sqrt(2 / pi / 20000)


def test_paired_classes_have_their_bayes_accuracy():
    classes = PairedClasses(D=4, separation=1.0)
    a, b = classes.sample(50000, 0)
    rule = np.concatenate(
        [a[:, 0] < 0.5, b[:, 0] >= 0.5]
    )  # the best rule: halfway along the shift
    assert rule.mean() == pytest.approx(classes.bayes_accuracy, abs=0.005)
    assert PairedClasses().bayes_accuracy == 0.5


def test_replicate_counts_the_intervals_that_hold_a_known_mean():
    """The loop on an interval of known behaviour: the bootstrap of a mean of 40 Gaussian draws."""
    case = Case(
        "mean",
        40,
        lambda n, seed: np.random.default_rng(seed).normal(1.0, 2.0, n),
        lambda x, seed: {
            "mean": bootstrap_mean(x, unit="draws", n_boot=500, seed=seed)
        },
        lambda x: {"mean": bootstrap_mean(x, unit="draws", n_boot=2)},
        lambda: {"mean": 1.0},
    )
    (c,) = replicate(case, R, progress=False)
    assert c.truth == 1.0 and abs(c.large_sample - 1.0) < 0.1
    assert c.covered.shape == (R,) and c.covered.sum() >= FLOOR
    assert c.mean_width == pytest.approx(2 * 1.96 * 2.0 / np.sqrt(40), rel=0.2)


def test_a_verdict_row_counts_the_replications_judged_as_the_truth_is():
    """A statistic judged against a band: the verdict is right when the interval meets the band exactly when the
    truth lies in it. Here the interval is [x, x + 1] for x ~ U(0, 2) (seeded), the band [0, 0.5]: with the
    truth 0.25 (in the band) the verdict is right when x <= 0.5 (a quarter of the draws); with the truth 3 (out
    of it) it is right when x > 0.5. The coverage row is kept, ungated with its reason."""

    def case(truth):
        return Case(
            "toy",
            1,
            lambda n, seed: np.random.default_rng(seed).uniform(0, 2),
            lambda x, seed: {"s": Estimate(x, x, x + 1, 1, "draws")},
            lambda x: {"s": Estimate(x, x, x + 1, 1, "draws")},
            lambda: {"s": truth},
            bands=lambda: {"s": (0.0, 0.5)},
            ungated={"s": "judged against its band"},
        )

    for truth, in_band in ((0.25, True), (3.0, False)):
        coverage, verdict = replicate(case(truth), 200, progress=False)
        assert coverage.ungated == "judged against its band" and not verdict.ungated
        assert verdict.statistic == "s · ~0 verdict" and verdict.estimand == "~0 band"
        draws = np.array(
            [np.random.default_rng(1 + r).uniform(0, 2) for r in range(200)]
        )
        meets = draws <= 0.5
        np.testing.assert_array_equal(verdict.covered, meets if in_band else ~meets)
        np.testing.assert_array_equal(
            coverage.covered, (draws <= truth) & (truth <= draws + 1)
        )


SMALL = {case.name: case for case in book_cases(D=8, L=6, n_boot=50, n_rep=20)}


@pytest.mark.parametrize(
    "name, statistics",
    [
        (
            "Gaussian cloud · B4 authors (bases refitted)",
            (
                "lambda_log_mean",
                "lambda_mean_log",
                "alpha_log_mean",
                "alpha_mean_log",
                "kurtosis_late",
                "mean_abs_z · ~0 verdict",
                "kurtosis_late · ~0 verdict",
            ),
        ),
        (
            "Langevin · B4 authors (bases refitted)",
            ("alpha_mean_log", "mean_abs_z · ~0 verdict", "kurtosis_late · ~0 verdict"),
        ),
        (
            "Gaussian cloud · B4 chapter (held out)",
            ("lambda_L_log_mean", "mean_offset", "kurtosis_late"),
        ),
        (
            "Langevin · B4 chapter (held out)",
            ("lambda_L_log_mean", "mean_offset", "kurtosis_late"),
        ),
        ("SVM, classes identical", ("svm_accuracy",)),
    ],
)
def test_small_coverage_of_the_intervals_that_hold_the_truth(name, statistics):
    """benchmarks/coverage.py at D = 8, L = 6, 24 pilots, 50 resamples (20 SVM repetitions), 20 replications:
    the intervals that cover in the benchmark cover here in at least 15 of 20 (the binomial floor). Their
    coverage at these sizes, over 100 other replications (200 for the SVM): 0.95-1.00."""
    found = {c.statistic: c for c in replicate(SMALL[name], R, progress=False)}
    for statistic in statistics:
        assert found[statistic].covered.sum() >= FLOOR, (
            statistic,
            found[statistic].coverage,
        )


@pytest.mark.xfail(
    strict=True,
    reason="on Laplace coordinates (residual excess kurtosis 1.5) the authors' kurtosis understates the tails at "
    "small N and D (the fitted bases mix the coordinates, and small samples understate tails), and its interval "
    "can meet the Gaussian floor's band at such sizes: the paper's '~0' then reads 'agrees' too often; remove "
    "this mark when it is right",
)
def test_the_authors_kurtosis_tells_heavy_tails_from_the_gaussian_floor():
    found = {
        c.statistic: c
        for c in replicate(
            SMALL["heavy-tailed cloud · B4 authors (bases refitted)"], R, progress=False
        )
    }
    assert found["kurtosis_late · ~0 verdict"].covered.sum() >= FLOOR


def test_the_held_out_jackknife_covers_alpha_of_the_mean_log_variance():
    """Alpha of the mean of log variances scored on a dozen held-out pilots: its percentile bootstrap held the
    truth in 8-11 of these 20 replications; the jackknife (`ResidualNulls.estimate`) reaches the floor."""
    found = {
        c.statistic: c
        for c in replicate(SMALL["Langevin · B4 chapter (held out)"], R, progress=False)
    }
    assert found["alpha_mean_log"].covered.sum() >= FLOOR
