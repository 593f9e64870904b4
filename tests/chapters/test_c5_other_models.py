"""Tests of `lotlib.chapters.c5_other_models`."""

import numpy as np
import pytest
import torch

from lotlib.chapters.c5_other_models import (
    MeasurementProtocol,
    cloud_summary,
    last_layer_excess,
    last_layer_normalized,
    last_layer_summary,
    loo_log_ratios,
    measure_model,
    measures_table,
    next_token_nll,
    noise_law,
    spectrum_decay,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.pilot_residuals import pilot_residuals
from lotlib.lines_of_thought.residuals import (
    fit_laws,
    fit_variance,
    pair_mask,
    pair_statistics,
    resampled_pairs,
    singular_coordinates,
)
from lotlib.models.bounds import ParameterError
from lotlib.stats import Estimate, resampling_weights
from tests.lines_of_thought.test_null_tests import (
    _law_layers,
)


def test_pilot_residuals_give_b4s_mean_variance():
    X = _law_layers(N=300, T=6, D=5) ** 3
    U, S = ensemble_svd(X)
    residuals = pilot_residuals(X, U, S, progress=False)
    Ua, Sa = align_bases(U, S)
    stats = pair_statistics(
        singular_coordinates(X, Ua), Sa, np.arange(1, 6), progress=False
    )
    mask = pair_mask(6, 1, 5)
    np.testing.assert_allclose(
        residuals.log_mean_var()[mask], stats.log_mean_var()[mask], rtol=1e-4
    )
    assert np.isnan(residuals.log_mean_var()[~mask]).all()
    spread = np.log(X.var(0).sum(-1))
    np.testing.assert_allclose(
        residuals.log_relative_var()[mask],
        (np.log(np.mean(stats.var, -1) * 5) - spread[None])[mask],
        rtol=1e-4,
    )


def test_pilot_residuals_resample_like_the_exact_weighted_moments():
    X = _law_layers(N=400, T=5, D=4)
    U, S = ensemble_svd(X)
    weights = resampling_weights(400, n_boot=20, seed=3)
    cheap = pilot_residuals(X, U, S, progress=False)
    Ua, Sa = align_bases(U, S)
    exact_moments = resampled_pairs(
        singular_coordinates(X, Ua), Sa, np.arange(1, 5), weights, progress=False
    )
    mask = pair_mask(5, 1, 4)
    np.testing.assert_allclose(
        cheap.log_mean_var(weights)[0][mask],
        exact_moments.log_mean_var()[0][mask],
        rtol=1e-4,
    )
    difference = (
        cheap.log_relative_var(weights)[:, mask]
        - exact_moments.log_relative_var()[:, mask]
    )
    assert (
        np.abs(difference).max() < 0.02
    )  # the resample's own shift of the mean: a few 1/N


def test_resampled_means_follow_the_weights():
    X = _law_layers(N=100, T=5, D=4)
    residuals = pilot_residuals(X, *ensemble_svd(X), progress=False)
    weights = resampling_weights(100, n_boot=2, seed=0)
    energy, spread = residuals.means(weights)
    assert energy.shape == (3, 5, 5) and spread.shape == (3, 5)
    np.testing.assert_allclose(energy[0], residuals.means()[0])
    np.testing.assert_allclose(spread[1], weights[1] @ residuals.spread / 100)


def test_leave_one_out_matches_a_refit_without_the_layer():
    T = 8
    log_var = np.random.default_rng(9).normal(size=(T, T)) + 0.3 * np.arange(T)
    r = loo_log_ratios(log_var)
    assert np.isnan(r[:2]).all()
    mask = pair_mask(T, 1, T - 1)
    for s in range(2, T):
        without = mask.copy()
        without[s, :] = without[:, s] = False
        fit = fit_variance(log_var, without)
        assert r[s] == pytest.approx(
            log_var[1:s, s].mean() - np.log(fit["alpha"]) - fit["lambda"] * s
        )


def test_a_scaled_last_layer_breaks_the_law_and_its_spread_explains_it():
    for scale in (1.0, 3.0):
        X = _law_layers(last_scale=scale)
        residuals = pilot_residuals(X, *ensemble_svd(X), progress=False)
        raw, relative = (
            loo_log_ratios(residuals.log_mean_var()),
            loo_log_ratios(residuals.log_relative_var()),
        )
        assert raw[-1] == pytest.approx(
            2 * np.log(scale), abs=0.05
        )  # the variance at L is scale^2 times the law's
        assert abs(relative[-1]) < 0.05  # ... and so is the spread it is compared with
        assert fit_laws(residuals.log_mean_var(), pair_mask(9, 1, 8))["lambda"] > 0.25
    # the other layers' refits include the scaled last layer, which tilts them: they are off by up to ~1.2
    assert last_layer_excess(raw, 4) > 0.5 and last_layer_excess(relative, 4) < 0.05


def test_last_layer_normalized_applies_the_final_norm_to_the_last_layer_only(
    tiny_llama,
):
    model, _, X = tiny_llama
    U, S = ensemble_svd(X)
    Xn, Un, Sn = last_layer_normalized(model.view, X, U, S, batch_size=7)
    expected = model.view.final_norm(torch.as_tensor(X[:, -1])).numpy()
    np.testing.assert_allclose(Xn[:, -1], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(Xn[:, :-1], X[:, :-1])
    np.testing.assert_array_equal(Un[:-1], U[:-1])
    gram = Xn[:, -1].T.astype(np.float64) @ Xn[:, -1]
    np.testing.assert_allclose(
        (Un[-1] * Sn[-1] ** 2) @ Un[-1].T, gram, rtol=1e-4, atol=1e-3
    )
    assert not np.allclose(
        X[:, -1], Xn[:, -1]
    )  # the tiny model's last states are not already normalized


def test_next_token_nll_matches_the_models_logits(tiny_llama):
    model, ids, X = tiny_llama
    targets = ids[:, 0]
    with torch.no_grad():
        logp = model.hf(input_ids=torch.as_tensor(ids)).logits[:, -1].log_softmax(-1)
    expected = -logp[np.arange(len(ids)), targets].numpy()
    np.testing.assert_allclose(
        next_token_nll(model.view, X[:, -1], targets, batch_size=4), expected, rtol=1e-4
    )


def test_spectrum_decay_of_a_power_law():
    sigma = np.arange(1, 101, dtype=float) ** -1.5
    out = spectrum_decay(sigma)
    assert out["sigma1_over_sigma2"] == pytest.approx(2**1.5) and out[
        "spectrum_slope"
    ] == pytest.approx(-1.5)
    assert spectrum_decay(sigma[:12])["spectrum_slope"] is None


def test_last_layer_and_cloud_summaries_read_the_noise_law():
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(50, 8, 5)), axis=1).astype(np.float32) + 3
    weights = resampling_weights(50, 10, seed=0)
    law = noise_law(X, *ensemble_svd(X), weights)
    row = last_layer_summary(law, law, 7, 50)
    assert row["lambda_L"].value == pytest.approx(7 * row["lambda"].value)
    assert row["last_layer_excess"].value == pytest.approx(
        last_layer_excess(law["loo"], 3)[0]
    )
    assert row["last_layer_excess_final_norm"].value == row["last_layer_excess"].value
    cloud = cloud_summary(law, 7, 50)
    assert cloud["last_layer_excess_cloud"].value == row["last_layer_excess"].value


def test_measures_table_formats_and_orders_the_rows():

    rows = {
        "m": {
            "d_model": 64,
            "n_layers": 3,
            "lambda": Estimate(0.5, 0.4, 0.6, 10, "pilots", "bootstrap-se", 0.95),
            "spectrum_slope": None,
            "top3_overlap_quarter": 1.23456,
        }
    }
    table = measures_table(rows, top=3)
    assert list(table.index) == [
        "layers L",
        "width D",
        "log-log slope of σ_i at L",
        "top-3 overlap at D/4",
        "λ (per layer)",
    ]
    assert (
        table.loc["log-log slope of σ_i at L", "m"] == "—"
        and table.loc["top-3 overlap at D/4", "m"] == "1.235"
    )


def test_measure_model_on_a_tiny_model(tiny_llama_dir):
    protocol = MeasurementProtocol(
        n_s=140, n_kl=20, ks=[1, 4], n_s_gibberish=40, n_bos=0, n_boot=5
    )
    m = measure_model(str(tiny_llama_dir), protocol, cloud=True, device="cpu")
    assert m.row["n_layers"] == 3 and m.row["d_model"] == 64 and m.row["n_s"] == 140
    assert (
        m.row["n_scored"] == 70 and m.row["lambda"].n == 70
    )  # bases on one half, the law on the other
    with pytest.raises(ParameterError, match="n_s"):
        measure_model(
            str(tiny_llama_dir), MeasurementProtocol(n_s=100), device="cpu"
        )  # 50 fitted pilots cannot span D = 64
    assert (
        m.cloud is not None
        and "last_layer_excess_cloud" in m.row
        and "nll_bos" not in m.row
    )
    assert m.separable.shape == (4,) and m.spectrum[0] == 1.0
    assert m.row["kl_at_quarter"] is not None and list(m.curve["K / D"]) == [
        1 / 64,
        4 / 64,
        16 / 64,
        1.0,
    ]
