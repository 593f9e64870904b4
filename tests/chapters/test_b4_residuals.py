"""Tests of `lotlib.chapters.b4_residuals`."""

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from lotlib.chapters.b4_residuals import (
    NULL_ENSEMBLES,
    claim_values,
    dimensionless_table,
    gaussian_reference,
    heavy_share_z,
    law_subset_table,
    law_subset_values,
    law_subsets,
    offdiagonal_correlation,
    residual_consistency,
    residual_heatmaps,
    residual_nulls,
    tau1_variances,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.extrapolation import eq1_residuals
from lotlib.lines_of_thought.residuals import (
    PairLayers,
    fit_variance,
    pair_statistics,
    singular_coordinates,
)
from tests.lines_of_thought.test_residuals import _walk

matplotlib.use("Agg")


def test_subset_fits_variances_and_consistency():
    X = _walk()
    U, S = align_bases(*ensemble_svd(X))
    pairs = PairLayers.of(8, "test")
    Y = singular_coordinates(X, U)
    st = pair_statistics(Y, S, pairs.layers, progress=False)
    fits = law_subsets(st, pairs)
    assert fits["log_mean", "default"] == fit_variance(st.log_mean_var(), pairs.fit)
    assert law_subset_table(fits, pairs).shape == (10, 6)
    values = law_subset_values(fits)
    assert values["lambda_log_mean"] == fits["log_mean", "default"]["lambda"]
    assert values["alpha_mean_log_no_both"] == fits["mean_log", "no_both"]["alpha"]
    assert len(values) == 4 + 2 * 2 * 4
    var, decades = tau1_variances(st, pairs)
    np.testing.assert_array_equal(var[2], st.var[3, 4])
    assert decades > 0
    w, consistency = residual_consistency(X, Y, U, S, 4)
    assert w.shape == (80, 12) and consistency < 1e-4
    heavy, rest = heavy_share_z(st, pairs.all)
    assert heavy >= 0 and rest >= 0
    z, kurt = gaussian_reference(4000, 50)
    assert abs(z - np.sqrt(2 / (np.pi * 4000))) < 0.003 and kurt < 0.1


def test_offdiagonal_correlation_is_unbiased_and_finds_a_shared_factor():
    rng = np.random.default_rng(11)
    N, d = 400, 30
    weights = np.vstack([np.ones(N), [np.bincount(rng.integers(0, N, N), minlength=N) for _ in range(50)]])
    independent = offdiagonal_correlation(rng.normal(size=(N, d)), weights)
    assert independent[0] < 0.02 and np.quantile(independent, 0.9) < 0.03  # no 1/sqrt(N) floor
    shared = rng.normal(size=(N, d)) + 0.5 * rng.normal(size=(N, 1))  # correlation 0.25 / 1.25 = 0.2
    assert offdiagonal_correlation(shared, weights)[0] == pytest.approx(0.2, abs=0.03)







def test_residual_nulls_summaries_against_direct_computations():
    """Scored out of sample: the bases of the pilots a seeded split fits on, the residuals of the others."""
    from lotlib.stats import split_pilots

    X = _walk()
    held, fitted = split_pilots(80, 40, np.random.default_rng(0))
    pairs = PairLayers.of(8, "test")
    nulls = residual_nulls(X, pairs, n_boot=10, seed=0)
    U, S = align_bases(*ensemble_svd(X[fitted]))
    np.testing.assert_array_equal(nulls.ensembles["model"], X[held])
    np.testing.assert_allclose(nulls.bases["model"][1], S)
    X = X[held]
    laws = nulls.laws()
    claims = {name: nulls.claims(laws, name) for name in NULL_ENSEMBLES}
    values = claim_values(claims)
    assert len(values) == 36
    assert values["r2_relative_shuffled"] is claims["shuffled pilots"].r2_relative
    table = dimensionless_table(claims)
    assert table.shape == (4, 3) and table.loc["λ·L, ln(mean variance)", "model"] == format(
        values["lambda_L_log_mean"], ".3g"
    )
    model_values = nulls.model_values(laws)
    assert model_values["lambda_per_layer_log_mean"].value * 8 == pytest.approx(values["lambda_L_log_mean"].value)
    model = nulls.resampled["model"]
    offset = np.sqrt(max(np.mean(model.offset[0][pairs.all]), 0.0))
    assert np.isclose(values["mean_offset"].value, offset)
    rho = np.log(model.trace[0] / model.spread[0][None, :])
    one = np.exp(np.mean([rho[t, t + 1] for t in range(1, 8)]))
    assert np.isclose(nulls.rho_by_tau()["1"], one)
    direct = offdiagonal_correlation(eq1_residuals(X, U, S, pairs.t_pdf, 1), np.ones((1, 40)))[0]
    assert np.isclose(values["offdiag_corr_raw"].value, direct)
    assert nulls.law_table(laws).shape == (9, 3)
    # the structureless cloud lands about as far as a map that knows nothing: rho ~ 2
    assert 1.5 < values["alpha_relative_cloud"].value < 2.5 > values["alpha_relative"].value


def test_held_out_intervals_are_the_jackknife_of_the_statistic_and_the_offsets_bootstrap():
    """Each jackknife row of `bootstrap_and_jackknife_weights` is the held-out pilots without one group: alpha_rel of that row
    equals alpha_rel recomputed from scratch on those pilots, and the interval is the t-interval of those
    values; the offset (0 when the law holds) takes the percentile interval of the bootstrap rows."""
    from scipy.stats import t

    from lotlib.lines_of_thought.residuals import resampled_pairs
    from lotlib.stats import bootstrap_and_jackknife_weights, jackknife_weights

    X, pairs = _walk(), PairLayers.of(8, "test")
    nulls = residual_nulls(X, pairs, n_boot=10, seed=0)
    held = nulls.ensembles["model"]
    n = len(held)
    weights = bootstrap_and_jackknife_weights(n, 10, 0)
    np.testing.assert_array_equal(nulls.weights, weights)
    assert weights.shape == (1 + 10 + n, n) and np.array_equal(weights[11:], jackknife_weights(n))
    U, S = nulls.bases["model"]
    Y = singular_coordinates(held, U)
    left = []
    for row in weights[11:]:
        kept = np.ones((1, int(row.sum())))
        alone = resampled_pairs(Y[row > 0], S, pairs.layers, kept, progress=False)
        left.append(np.exp(alone.log_relative_var()[0][pairs.fit].mean()))
    found = nulls.claims(nulls.laws(), "model")
    alpha = found.alpha_relative
    assert alpha.method == "jackknife"
    se = np.sqrt((n - 1) / n * np.sum((np.array(left) - np.mean(left)) ** 2))
    assert alpha.hi - alpha.lo == pytest.approx(2 * t.ppf(0.975, n - 1) * se, rel=1e-6)
    offset = found.mean_offset
    assert offset.method == "bootstrap" and offset.lo <= offset.hi


def test_the_figures_return_their_figure():
    X = _walk()
    U, S = align_bases(*ensemble_svd(X))
    pairs = PairLayers.of(8, "test")
    st = pair_statistics(singular_coordinates(X, U), S, pairs.layers, progress=False)
    fig = residual_heatmaps(st, pairs, "test")
    assert isinstance(fig, Figure) and len(fig.axes) == 6  # three panels and their colour bars
    matplotlib.pyplot.close(fig)
