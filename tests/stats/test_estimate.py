import numpy as np
import pytest

from lotlib.stats import (
    Estimate,
    bootstrap,
    centered_percentile,
    jackknife_estimate,
    jackknife_weights,
    percentile_estimate,
    resampled_estimate,
    resampling_weights,
    side_word,
)


def test_centered_percentile_keeps_the_spread_and_moves_it_to_the_value():
    draws = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    found = centered_percentile(np.r_[10.0, draws], 5, unit="pilots", level=0.5)
    lo, hi = np.quantile(draws, [0.25, 0.75])
    assert (
        found.value == 10.0
        and np.isclose(found.lo, 10.0 + lo - 3.0)
        and np.isclose(found.hi, 10.0 + hi - 3.0)
    )
    assert np.isnan(centered_percentile([1.0, np.nan], 5, unit="pilots").lo)
    clipped = centered_percentile(
        np.r_[0.98, 0.9, 0.95, 1.0], 3, unit="pilots", bounds=(0.0, 1.0)
    )
    assert clipped.hi == 1.0 and clipped.lo < 0.98
    both = centered_percentile(
        np.r_[10.0, draws], 5, unit="pilots", level=0.5, with_raw=True
    )
    assert (both.lo, both.hi) == (
        lo,
        10.0 + hi - 3.0,
    )  # from the raw low end to the moved high end
    assert both.method == "bootstrap (centered and raw)"


def test_resampling_weights_draw_what_the_bootstrap_draws():
    drawn = []
    bootstrap(
        lambda idx: drawn.append(np.bincount(idx, minlength=50)) or 0.0,
        50,
        unit="units",
        n_boot=30,
        seed=7,
    )
    weights = resampling_weights(50, n_boot=30, seed=7)
    assert weights.shape == (31, 50)
    np.testing.assert_array_equal(weights[0], 1.0)
    np.testing.assert_array_equal(
        weights[1:], np.array(drawn[1:])
    )  # drawn[0] is the sample itself


def test_resampled_estimate_has_the_standard_error_of_a_mean():
    x = np.random.default_rng(6).exponential(size=400)
    weights = resampling_weights(400, n_boot=2000, seed=7)
    estimate = resampled_estimate(weights @ x / 400, 400, unit="units")
    assert (
        estimate.value == pytest.approx(x.mean())
        and estimate.n == 400
        and estimate.unit == "units"
    )
    half = 1.96 * x.std() / np.sqrt(400)  # the textbook interval of a mean
    assert (estimate.hi - estimate.lo) / 2 == pytest.approx(half, rel=0.1)
    assert estimate.lo < x.mean() < estimate.hi
    assert np.isnan(resampled_estimate(np.array([1.0]), 1, unit="units").lo)


def test_side_word_reads_the_whole_interval():

    def word(lo, hi):
        return side_word(
            Estimate((lo + hi) / 2, lo, hi, 5, "seeds"), ("less", "as much", "more")
        )

    assert (word(-0.3, -0.1), word(-0.1, 0.2), word(0.1, 0.3)) == (
        "less",
        "as much",
        "more",
    )
    assert side_word(Estimate(1.2, 1.1, 1.3, 5, "seeds"), than=1.0) == "above"


def test_percentile_estimate_of_resampled_values():
    values = np.concatenate(
        [[0.5], np.linspace(0.0, 1.0, 401), [np.nan]]
    )  # the sample first, then the resamples
    estimate = percentile_estimate(values, 40, unit="pilots")
    assert (estimate.value, estimate.n, estimate.unit, estimate.method) == (
        0.5,
        40,
        "pilots",
        "bootstrap",
    )
    assert estimate.lo == pytest.approx(0.025) and estimate.hi == pytest.approx(0.975)
    assert np.isnan(percentile_estimate([1.0, np.nan], 5, unit="pilots").lo)


def test_jackknife_log_interval_of_a_mean_is_its_standard_error():
    """The leave-one-out jackknife of a mean is exact: its standard error is s / sqrt(n). On the log scale the
    interval is log mean -+ t_(n-1) s / (sqrt(n) mean) to first order; grouped (50 groups of 4), the standard error
    of the group means. A statistic that reads 0 gets the raw scale from 0; a negative one no interval."""
    from scipy.stats import t

    x = np.random.default_rng(2).gamma(9.0, size=200)
    for groups in (200, 50):
        weights = jackknife_weights(200, groups)
        assert weights.shape == (groups, 200) and np.all(
            (weights == 0).sum(0) == 1
        )  # each unit left out once
        left_out = weights @ x / weights.sum(1)
        estimate = jackknife_estimate(x.mean(), left_out, 200, unit="values", log=True)
        blocks = x.reshape(groups, -1).mean(1)
        se = blocks.std(ddof=1) / np.sqrt(groups) / x.mean()
        half = np.log(estimate.hi / estimate.lo) / 2
        assert half == pytest.approx(t.ppf(0.975, groups - 1) * se, rel=0.01)
        assert estimate.lo < x.mean() < estimate.hi and estimate.method == "jackknife"
    zero = jackknife_estimate(
        0.0, left_out - left_out.min(), 200, unit="values", log=True
    )  # a distance that reads 0
    assert zero.lo == 0.0 and zero.hi == pytest.approx(
        t.ppf(0.975, 49) * se * x.mean(), rel=0.01
    )
    assert np.isnan(jackknife_estimate(-1.0, left_out, 200, unit="values", log=True).lo)
