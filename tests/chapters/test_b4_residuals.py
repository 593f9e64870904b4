"""Tests of `lotlib.chapters.b4_residuals`."""

import numpy as np

from lotlib.chapters.b4_residuals import (
    gaussian_reference,
    heavy_share_z,
    law_subset_table,
    law_subsets,
    residual_consistency,
    tau1_variances,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.residuals import (
    PairLayers,
    fit_variance,
    pair_statistics,
    singular_coordinates,
)
from tests.lines_of_thought.test_residuals import _walk


def test_subset_fits_variances_and_consistency():
    X = _walk()
    U, S = align_bases(*ensemble_svd(X))
    pairs = PairLayers.of(8, "test")
    Y = singular_coordinates(X, U)
    st = pair_statistics(Y, S, pairs.layers, progress=False)
    fits = law_subsets(st, pairs)
    assert fits["log_mean", "default"] == fit_variance(st.log_mean_var(), pairs.fit)
    assert law_subset_table(fits, pairs).shape == (10, 6)
    var, decades = tau1_variances(st, pairs)
    np.testing.assert_array_equal(var[2], st.var[3, 4])
    assert decades > 0
    w, consistency = residual_consistency(X, Y, U, S, 4)
    assert w.shape == (80, 12) and consistency < 1e-4
    heavy, rest = heavy_share_z(st, pairs.all)
    assert heavy >= 0 and rest >= 0
    z, kurt = gaussian_reference(4000, 50)
    assert abs(z - np.sqrt(2 / (np.pi * 4000))) < 0.003 and kurt < 0.1
