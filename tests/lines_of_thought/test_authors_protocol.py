"""The authors' statistic for Fig. B4 and Eq. 2 (`dx_calculate.m`): raw-coordinate residual moments and a
bootstrap that refits the bases (the protocol and its fits: tests/chapters/test_b4_authors_protocol.py)."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from lotlib.lines_of_thought.authors_protocol import (
    SUMMARIES,
    authors_pairs,
    coordinate_summaries,
    pair_moments,
    weighted_bases,
)
from lotlib.lines_of_thought.ensemble import (
    align_bases,
    authors_pilots,
    authors_pilots_label,
    ensemble_svd,
)
from lotlib.lines_of_thought.extrapolation import eq1_residuals

ROOT = Path(__file__).resolve().parents[2]
from lotlib.models.bounds import ParameterError


def _direct_summaries(X: np.ndarray) -> dict[str, np.ndarray]:
    """`dx_calculate.m` and the figure's averages, pair by pair, in float64 with the library's SVD."""
    T = X.shape[1]
    U, S = align_bases(*ensemble_svd(X))
    out = {name: np.full((T + 1, T + 1), np.nan) for name in SUMMARIES}
    for t in range(T):
        for s in range(t + 1, T):
            # x(s) - U(s) S(s) S(t)^-1 U(t)^T x(t)
            dx = eq1_residuals(X, U, S, t, s - t)
            m, v = dx.mean(0), dx.var(0, ddof=1)
            k = stats.kurtosis(
                dx, axis=0, fisher=False, bias=False
            )  # MATLAB kurtosis(x, 0)
            excess = np.maximum(k - 3, -2.0)
            n = len(dx)
            values = {
                "mean_abs_z": np.abs(m) / np.sqrt(v),
                "mean_abs_m_over_v": np.abs(m / v),
                "mean_var": v,
                "mean_log_var": np.log(v) + (2 / (n - 1) + excess / n) / 2,
                "mean_abs_kurtosis": np.abs(k),
            }
            for name, value in values.items():
                out[name][t + 1, s + 1] = value.mean()
    return out


@pytest.mark.parametrize(
    "N, D", [(60, 6), (7, 9)]
)  # a full basis (N >= D) and a thin one
def test_pairs_equal_the_direct_eq1_residual_moments(N, D):
    rng = np.random.default_rng(0)
    X = rng.standard_t(df=6, size=(N, 4, D)) * np.linspace(1, 3, D) + 1.5
    got = authors_pairs(X, np.ones((1, N)), progress=False)[0]
    want = _direct_summaries(X)
    for name in SUMMARIES:
        np.testing.assert_allclose(
            getattr(got, name)[0], want[name], rtol=2e-3, atol=1e-6, err_msg=name
        )
    assert (
        got.T == 4
        and np.isnan(got.mean_var[0, 2, 1])
        and np.isnan(got.mean_var[0, 0, 1])
    )


def test_the_mean_log_variance_is_corrected_for_its_small_sample_bias():
    """On Gaussian coordinates of variance 1, ln of the ddof-1 variance of n draws is -1/(n-1) too low on
    average (Jensen; -0.0526 at n = 20): the corrected mean of ln v is unbiased to second order, the plain
    one is not. 4,000 draws of 25 coordinates: standard error of the mean about 0.0015."""
    rng = np.random.default_rng(3)
    n, d, draws = 20, 25, 4000
    z = torch.from_numpy(rng.standard_normal((draws, n, d)))
    mean = z.mean(1)
    sq = (z - mean[:, None]) ** 2
    got = coordinate_summaries(mean, sq.mean(1), (sq**2).mean(1), n)["mean_log_var"]
    plain = torch.log(sq.sum(1) / (n - 1)).mean(-1)
    assert abs(float(got.mean())) < 0.006
    assert float(plain.mean()) < -0.045


def test_kurtosis_is_matlabs_bias_corrected_non_excess():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2, 3)).astype(np.float32)
    X[:, 1] += 4 * rng.exponential(size=(200, 3))  # heavy-tailed arrival
    Xt = torch.as_tensor(X.transpose(1, 0, 2))
    U, S = align_bases(*weighted_bases(Xt, torch.ones(200)))
    got = pair_moments(Xt, U, S, torch.ones(200), 200)["mean_abs_kurtosis"][0, 1]
    dx = eq1_residuals(X, U.astype(np.float64), S, 0, 1)
    want = np.mean(np.abs(stats.kurtosis(dx, axis=0, fisher=False, bias=False)))
    assert got == pytest.approx(want, rel=1e-4)
    assert want > 3.5  # exponential tails: well above the Gaussian's 3


def test_weighted_bases_are_the_svd_of_the_repeated_matrix():
    rng = np.random.default_rng(2)
    for N, D in ((30, 5), (4, 7)):
        X = rng.normal(size=(N, 2, D)) + 1.0
        counts = rng.integers(1, 4, size=N)
        U, S = weighted_bases(
            torch.as_tensor(X.transpose(1, 0, 2)), torch.as_tensor(counts)
        )
        repeated = np.repeat(X, counts, axis=0)
        for t in range(2):
            u, s, _ = np.linalg.svd(repeated[:, t].T, full_matrices=False)
            np.testing.assert_allclose(S[t], s[: min(N, D)], rtol=1e-6)
            np.testing.assert_allclose(
                np.abs(U[t].T @ u[:, : min(N, D)]), np.eye(min(N, D)), atol=1e-4
            )


def test_a_resample_refits_the_bases_on_its_own_pilots():
    rng = np.random.default_rng(3)
    X = rng.standard_t(df=5, size=(40, 4, 5)) * np.arange(1, 6) + 1.0
    counts = rng.integers(0, 3, size=40)
    counts[0] = 2  # some pilot drawn twice
    resample = authors_pairs(X, np.vstack([np.ones(40), counts]), progress=False)[0]
    repeated = authors_pairs(
        np.repeat(X, counts, axis=0), np.ones((1, counts.sum())), progress=False
    )[0]
    sample_bases = align_bases(*ensemble_svd(X))
    drawn = np.flatnonzero(counts)
    fixed = pair_moments(
        torch.as_tensor(X[drawn].transpose(1, 0, 2), dtype=torch.float32),
        sample_bases[0].astype(np.float32),
        sample_bases[1],
        torch.as_tensor(counts[drawn], dtype=torch.float64),
        int(counts.sum()),
    )
    for name in SUMMARIES:
        np.testing.assert_allclose(
            getattr(resample, name)[1], getattr(repeated, name)[0], rtol=2e-3
        )
    # with the sample's bases held fixed, the resample's residuals would differ
    assert not np.allclose(
        resample.mean_var[1][1:, 1:], fixed["mean_var"], rtol=1e-3, equal_nan=True
    )
    assert not np.allclose(
        resample.mean_var[1], resample.mean_var[0], rtol=1e-3, equal_nan=True
    )


def test_another_reading_of_the_last_layer_equals_a_separate_run():
    rng = np.random.default_rng(4)
    X = rng.standard_t(df=5, size=(50, 5, 4)) * np.arange(1, 5) + 1.0
    last = X[:, -1] / np.linalg.norm(X[:, -1], axis=1, keepdims=True)
    weights = np.vstack(
        [np.ones(50), np.bincount(rng.integers(0, 50, 50), minlength=50)]
    )
    before, after = authors_pairs(X, weights, progress=False, last_readings=(last,))
    alone = authors_pairs(
        np.concatenate([X[:, :-1], last[:, None]], axis=1), weights, progress=False
    )[0]
    for name in SUMMARIES:
        np.testing.assert_allclose(
            getattr(after, name), getattr(alone, name), rtol=2e-3, err_msg=name
        )
    np.testing.assert_allclose(before.mean_var[:, :, :5], after.mean_var[:, :, :5])
    assert not np.allclose(before.mean_var[:, 1:5, 5], after.mean_var[:, 1:5, 5])


def test_authors_pilots_is_a_seeded_subset_of_the_papers_size():
    picked = authors_pilots(3000, 1024, cap=None)
    assert len(picked) == math.ceil(2.8 * 1024) and np.all(np.diff(picked) > 0)
    np.testing.assert_array_equal(picked, authors_pilots(3000, 1024, cap=None))
    assert not np.array_equal(picked, authors_pilots(3000, 1024, seed=1, cap=None))
    assert len(authors_pilots(100, 10, n_s=50, cap=100)) == 50
    assert authors_pilots_label(len(picked), 1024) == "2.8 D = 2,868 pilots"
    # a corpus that ran out before 2.8 D (all of it read, or less than the chapter's cap): all of it, as the
    # paper's widest models read all of Walden; the label says so
    for cap in (None, "2.8D", 5000):
        np.testing.assert_array_equal(
            authors_pilots(2000, 1024, cap=cap), np.arange(2000)
        )
    assert authors_pilots_label(2000, 1024).startswith(
        "2,000 pilots, all of Walden (2.8 D = 2,868 is more"
    )
    # the chapter capped its pilots below 2.8 D
    with pytest.raises(ParameterError, match="n_s_paper"):
        authors_pilots(2000, 1024, cap=2000)
    # all of the corpus, but fewer than D
    with pytest.raises(ParameterError, match="n_s_paper"):
        authors_pilots(1000, 1024, cap=None)


def test_the_papers_pilot_count_is_checked_against_n_s_before_any_model_work(
    tiny_gpt2_dir,
):
    """`n_s_paper` ("PaperPilots") fits the model (at least D) and the chapter's own pilots (at most n_s) at
    preflight, from the config alone."""
    from lotlib.book.parameters import ParameterError, check_parameters
    from lotlib.book.spec import read_spec

    spec = read_spec(ROOT / "notebooks" / "b2_ensemble_svd.py")
    model = str(tiny_gpt2_dir)  # D = 64: 2.8 D = 180 pilots (rounded up)
    check_parameters(
        spec.parameters, {"model": model, "n_s": "3D", "n_s_paper": "2.8D"}, "b2"
    )
    check_parameters(
        spec.parameters, {"model": model, "n_s": None}, "b2"
    )  # all of the corpus: checked on cutting
    with pytest.raises(
        ParameterError,
        match=r"n_s_paper = '2.8D' asks for 180 pilots .* n_s = 'D' draws 64",
    ):
        check_parameters(spec.parameters, {"model": model, "n_s": "D"}, "b2")
    with pytest.raises(ParameterError, match="n_s_paper = 10 is below D = 64"):
        check_parameters(spec.parameters, {"model": model, "n_s_paper": 10}, "b2")


def test_the_sample_row_is_the_run_on_the_sample_alone():
    """`AuthorsPairs.sample` of a run with resamples is, bit for bit, the run with only the weights' first row."""
    rng = np.random.default_rng(5)
    X = rng.standard_t(df=5, size=(40, 4, 5)) * np.arange(1, 6) + 1.0
    weights = np.vstack(
        [np.ones(40), np.bincount(rng.integers(0, 40, 40), minlength=40)]
    )
    run = authors_pairs(X, weights, progress=False)[0].sample()
    alone = authors_pairs(X, weights[:1], progress=False)[0]
    assert run.n == alone.n == 40
    for name in SUMMARIES:
        assert getattr(run, name).shape == (1, 5, 5)
        np.testing.assert_array_equal(
            getattr(run, name), getattr(alone, name), err_msg=name
        )
