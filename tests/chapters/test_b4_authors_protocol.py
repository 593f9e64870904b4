"""Tests of `lotlib.chapters.b4_authors_protocol`."""

import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
from scipy.linalg import expm

from benchmarks.coverage_cases import GaussianCloud
from lotlib.chapters import b4_authors_protocol
from lotlib.chapters.b4_authors_protocol import (
    ENSEMBLES,
    AuthorsProtocol,
    PaperProtocol,
    authors_ensembles,
    authors_heatmaps,
    authors_residual_statistics,
    authors_summary,
    authors_trajectories,
    gaussian_floor,
)
from lotlib.lines_of_thought.authors_protocol import authors_pairs
from lotlib.lines_of_thought.ensemble import Ensemble
from lotlib.lines_of_thought.residuals import PairLayers, pair_frame
from lotlib.stats import resampling_weights

matplotlib.use("Agg")


def test_the_authors_heatmaps_draw_the_papers_three_panels_on_its_scales():
    """One row per ensemble, three panels (mean abs z, log10 mean variance, mean abs kurtosis - 3), each the
    sample's `(T, T)` pair statistic as `pair_frame` lays it out, on Fig. 4's colour scales."""
    import matplotlib.pyplot as plt

    L = 6
    layers = PairLayers.of(L, "test")
    rng = np.random.default_rng(0)
    pairs = {
        name: SimpleNamespace(
            **{
                a: rng.uniform(1.0, 4.0, size=(3, L + 1, L + 1))
                for a in ("mean_abs_z", "mean_var", "mean_abs_kurtosis")
            }
        )
        for name in ("model", "cloud")
    }
    axes = authors_heatmaps(pairs, layers, "test").axes
    heatmaps = [ax for ax in axes if ax.collections and ax.get_title()]
    assert [ax.get_title() for ax in heatmaps] == [
        f"{label}, {name}"
        for name in pairs
        for label in ("⟨|μ/σ|⟩", "log10 ⟨σ²⟩", "⟨|κ|⟩ − 3")
    ]
    # the model's variance: log10 of the sample's row (row 0), not a resample's
    mesh = heatmaps[1].collections[0]
    expected = pair_frame(np.log10(pairs["model"].mean_var[0]), layers).to_numpy()
    np.testing.assert_allclose(
        np.ma.filled(mesh.get_array(), np.nan).ravel(), expected.ravel(), equal_nan=True
    )
    assert heatmaps[0].collections[0].get_clim() == (0.0, 0.5)  # the paper's scales
    assert heatmaps[2].collections[0].get_clim() == (0.0, 0.8)
    plt.close("all")


def test_the_paper_zero_mean_verdict_holds_on_a_zero_mean_cloud():
    """A zero-mean Gaussian cloud (D = 64, N = 3 D, independent layers) has residuals of zero mean: its
    mean abs(m) / sqrt(v) must meet the band of the paper's "~0" (0 to the same statistic on Gaussian samples of
    this size, as the report sets it). Resampling adds noise to the mean, so the resamples' own percentile
    interval lies above the band here; the interval the protocol reports is moved to the sample's value."""
    from lotlib.verdicts import band

    D, n = 64, 192
    floor = gaussian_floor(n, D).mean_abs_z
    low, high = band("~0", "share", (floor.lo, floor.hi))
    X = GaussianCloud(D=D, L=4, decay=0.97).sample(n, 7)[:, 1:]
    weights = resampling_weights(n, 30, 0)
    pairs = authors_pairs(X, weights, progress=False)[0]
    got = authors_summary(pairs, PairLayers(4, 1, 4, 1, 2)).mean_abs_z
    assert got.lo <= high and got.hi >= low
    resampled = np.nanmean(pairs.mean_abs_z[1:, 1:, 1:], axis=(1, 2))
    # the unmoved interval would read "differs"
    assert np.quantile(resampled, 0.025) > high


def _growing_noise(N=600, T=7, D=5, lam=0.3, alpha=0.5, seed=0):
    """x(t) = e^(lam t / 2) Q_t z + noise of variance alpha e^(lam t) per coordinate: the signal and the noise
    grow alike, Eq. 1 carries x(t) onto x(s) with Lambda = e^(lam (s - t) / 2) and the residual variance is
    2 alpha e^(lam s) per coordinate (the arrival's noise plus the departure's carried), up to basis errors
    that scale the same way. Q_t turns a little from one layer to the next (Eq. 1 assumes slowly turning
    directions)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(N, D)) * np.array([40.0, 25.0, 15.0, 9.0, 5.0])[:D] + 3.0
    X, q = np.empty((N, T, D)), np.eye(D)
    for t in range(T):
        a = rng.normal(size=(D, D))
        q = q @ expm(0.1 * (a - a.T))  # a small rotation
        scale = math.exp(lam * (t + 1) / 2)
        X[:, t] = scale * (z @ q.T + rng.normal(size=(N, D)) * math.sqrt(alpha))
    return X


def test_a_built_in_exponential_law_is_recovered_within_its_interval():
    lam = 0.3
    est = authors_residual_statistics(
        _growing_noise(lam=lam), n_boot=60, seed=1, progress=False
    )
    for e in (est.lambda_log_mean, est.lambda_mean_log):
        assert e.lo <= lam <= e.hi, e
        assert e.hi - e.lo < 0.1 and e.n == 600 and e.unit == "pilots"
    assert 0.8 < est.alpha_log_mean.value < 1.6  # 2 alpha, plus the basis errors
    # Gaussian residuals: mean |k| - 3 about 0
    assert abs(est.kurtosis_late.value) < 0.5
    assert est.mean_abs_z.value < 0.15


def test_fit_and_late_pairs_follow_their_parameters():
    X = _growing_noise(N=200, T=6)
    full = authors_residual_statistics(X, n_boot=0, progress=False)
    part = authors_residual_statistics(
        X, PairLayers(6, 2, 5, 3, 3), n_boot=0, progress=False
    )
    assert full.lambda_log_mean.value != part.lambda_log_mean.value
    assert full.kurtosis_late.value != part.kurtosis_late.value
    with pytest.raises(ValueError, match="fit_last"):
        authors_residual_statistics(
            X, PairLayers(6, 1, 7, 1, 3), n_boot=0, progress=False
        )


def test_authors_trajectories_drop_the_embedding_and_read_the_last_layer_after_the_norm():
    X = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3) + 1.0
    view = SimpleNamespace(
        device="cpu", final_norm=lambda x: x / x.norm(dim=-1, keepdim=True)
    )
    before, after = authors_trajectories(X), authors_trajectories(X, view, batch_size=1)
    np.testing.assert_array_equal(before, X[:, 1:])
    np.testing.assert_array_equal(after[:, :-1], X[:, 1:-1])
    np.testing.assert_allclose(
        after[:, -1], X[:, -1] / np.linalg.norm(X[:, -1], axis=-1, keepdims=True)
    )


def test_gaussian_floor_is_the_sampling_level_of_the_statistics():
    floor = gaussian_floor(400, 50, n_draws=100, seed=0)
    z, k = floor.mean_abs_z, floor.kurtosis
    assert z.value == pytest.approx(math.sqrt(2 / math.pi) / math.sqrt(400), rel=0.05)
    assert 0 < z.lo < z.value < z.hi and z.unit == "Gaussian samples"
    assert k.lo < 0 < k.hi and k.hi < 3 * math.sqrt(
        24 / 400 / 50
    )  # |k| = k > 0: mean |k| - 3 about 0


def test_authors_ensembles_share_resamples_and_read_x_l_after_the_norm():
    X = _growing_noise(N=120, T=5)
    X = np.concatenate(
        [np.zeros_like(X[:, :1]), X], axis=1
    )  # x(0): an embedding row, dropped
    view = SimpleNamespace(
        device="cpu", final_norm=lambda x: 3 * x / x.norm(dim=-1, keepdim=True)
    )
    runs = authors_ensembles(X, view, n_boot=3, seed=0, progress=False)
    assert list(runs) == list(ENSEMBLES) and runs["model"].mean_var.shape == (4, 6, 6)
    normed = np.concatenate(
        [X[:, 1:-1], 3 * X[:, -1:] / np.linalg.norm(X[:, -1:], axis=-1, keepdims=True)],
        axis=1,
    )
    alone = authors_pairs(normed, resampling_weights(120, 3, 0), progress=False)[0]
    np.testing.assert_allclose(
        runs["after the final norm"].mean_var, alone.mean_var, rtol=2e-3
    )
    model, cloud = runs["model"].mean_var, runs["structureless cloud"].mean_var
    assert not np.allclose(model[0, 1:, 1:], cloud[0, 1:, 1:], equal_nan=True)


def test_every_pilot_read_is_not_run_again_when_the_paper_took_them_all(monkeypatch):
    """Where the corpus ran out before the paper's count, the paper's pilots are every pilot: the law at every
    pilot is the model's run's sample row, not a second run, and equals what that run would give."""
    runs = []

    def counted(X, weights, *args, **kwargs):
        runs.append(len(weights))
        return authors_pairs(X, weights, *args, **kwargs)

    monkeypatch.setattr(b4_authors_protocol, "authors_pairs", counted)
    X = _growing_noise(N=60, T=5)
    X = np.concatenate([np.zeros_like(X[:, :1]), X], axis=1)
    view = SimpleNamespace(
        device="cpu", final_norm=lambda x: 3 * x / x.norm(dim=-1, keepdim=True)
    )
    lm = SimpleNamespace(name="tiny", view=view, device="cpu")
    ens = Ensemble(lm, None, X)
    layers = PairLayers.of(ens.L, "tiny")
    found = AuthorsProtocol.run(ens, layers, PaperProtocol(1000, 2, 0, cap=None))
    assert found.n_s == 60 and runs == [3, 3, 1]  # model and norm, cloud, at D
    again = authors_residual_statistics(X[:, 1:], layers, 0, progress=False)
    assert found.at_every_pilot == again
