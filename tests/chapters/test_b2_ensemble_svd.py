"""Tests of `lotlib.chapters.b2_ensemble_svd`."""

import numpy as np
import pytest
import torch

from lotlib import capture, gibberish, load_model
from lotlib.chapters.b2_ensemble_svd import consecutive_kl
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.truncation import (
    kl,
    next_token_logprobs,
    truncation_scores,
)


def test_basis_turning_reads_angles_and_ranks_of_aligned_directions():
    from lotlib.chapters.b2_ensemble_svd import turning_summary
    from lotlib.lines_of_thought.ensemble import basis_turning

    rng = np.random.default_rng(7)
    D, T = 6, 5
    Q = np.linalg.qr(rng.normal(size=(D, D)))[0]
    U = np.stack([Q] * T)
    theta = np.radians(
        30.0
    )  # u1 turns by 30 degrees in the (u1, u2) plane at the last step only
    U[-1][:, 0] = np.cos(theta) * Q[:, 0] + np.sin(theta) * Q[:, 1]
    U[-1][:, 1] = -np.sin(theta) * Q[:, 0] + np.cos(theta) * Q[:, 1]
    S = np.tile(np.arange(D, 0, -1.0), (T, 1))
    turning = basis_turning(U, S, S, n=4)
    assert turning.angles.shape == (4, T, T)
    np.testing.assert_allclose(turning.last_step[:2], 30.0, atol=1e-8)
    np.testing.assert_allclose(turning.step[:, :-1], 0.0, atol=1e-5)
    np.testing.assert_array_equal(turning.top, [1, 2, 3, 4])
    summary = turning_summary(turning)
    assert (
        summary["max_rank_u1_to_u4"] == 4
        and abs(summary["angle_u1_last_step"] - 30.0) < 1e-8
    )


def test_spectrum_slopes_recover_a_power_law():
    from lotlib.chapters.b2_ensemble_svd import spectrum_slopes

    i = np.arange(1, 101)
    S = np.stack([3.0 * i**-0.5, 2.0 * i**-1.5])
    np.testing.assert_allclose(spectrum_slopes(S), [-0.5, -1.5], atol=1e-10)


def test_consecutive_kl_across_batch_borders(tiny):
    model, _, X = tiny
    logp = next_token_logprobs(model.view, torch.as_tensor(X[:, -1]))
    expected = kl(logp[1:], logp[:-1]).numpy()
    np.testing.assert_allclose(
        consecutive_kl(model.view, X[:, -1], batch_size=6, progress=False),
        expected,
        rtol=1e-4,
        atol=1e-6,
    )


def test_truncation_grid_and_random_directions():
    from lotlib.chapters.b2_ensemble_svd import random_orthonormal
    from lotlib.lines_of_thought.truncation import truncation_grid

    assert truncation_grid(64) == [1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64]
    Q = random_orthonormal(8, seed=3)
    np.testing.assert_allclose(Q.T @ Q, np.eye(8), atol=1e-12)


def test_criteria_on_known_scores_and_weights_as_repeated_pilots():
    from lotlib.chapters.b2_ensemble_svd import criteria
    from lotlib.lines_of_thought.truncation import Truncation

    ks = [1, 2, 4, 8, 16]  # d = 16, d/4 = 4
    kl_curve = np.array([10.0, 5.0, 2.0, 0.5, 0.0])
    result = Truncation(
        ks,
        np.tile(kl_curve[:, None], (1, 6)),
        np.tile(np.arange(5.0)[:, None], (1, 6)),
        5,
    )
    found = criteria(result, 16)
    assert found["kl_drop"] == pytest.approx(0.2)
    assert found["kl_quarter_d"] == pytest.approx(2.0)
    assert found["overlap_quarter_d"] == pytest.approx(2.0)
    assert found["k0_over_d"] == pytest.approx(
        8 / 16
    )  # the first K with KL <= 0.1 x KL(1)
    assert "k0_over_d" not in criteria(
        Truncation([1, 4], result.kl[[0, 2]], result.overlap[[0, 2]], 5), 16, k0=False
    )
    rng = np.random.default_rng(0)
    varied = Truncation(
        ks,
        rng.exponential(size=(5, 6)),
        rng.integers(0, 6, size=(5, 6)).astype(float),
        5,
    )
    w = np.array([2, 1, 0, 3, 1, 1])
    repeated = Truncation(
        ks, np.repeat(varied.kl, w, axis=1), np.repeat(varied.overlap, w, axis=1), 5
    )
    assert criteria(varied, 16, w) == pytest.approx(criteria(repeated, 16))


def test_resampled_truncation_fits_the_bases_on_the_n_s_pilots_it_is_given(
    tiny_gpt2_dir, monkeypatch
):
    from lotlib.chapters import b2_ensemble_svd as truncation
    from lotlib.chapters.b2_ensemble_svd import (
        ScoredPilots,
        TruncationStudy,
        criteria,
        resampled_truncation,
    )
    from lotlib.lines_of_thought.ensemble import authors_pilots

    model = load_model(str(tiny_gpt2_dir))
    ids = gibberish(model.view.W_E.shape[0], n_s=180, n_k=6, seed=2).ids
    X = capture(model, ids, progress=False)
    D = X.shape[2]
    P = authors_pilots(
        len(X), D, n_s=179, cap=None
    )  # a seeded subset, as the paper's N_s = 2.8 D is
    fitted = []
    weighted_svd = truncation.weighted_svd
    monkeypatch.setattr(
        truncation,
        "weighted_svd",
        lambda Y, c: fitted.append((len(Y), c.sum())) or weighted_svd(Y, c),
    )
    ks = [1, 4, D // 4, D]
    picked, sub = np.arange(0, 179, 9), np.arange(3)
    study = TruncationStudy(ks, n_rep=1, seed=1)
    result = resampled_truncation(model, ids[P], X[P], ScoredPilots(picked, sub), study)
    assert (
        result.n_s == 179
        and len(fitted) == 2
        and all(total == 179 for _, total in fitted)
    )
    assert fitted[0][0] == 179 and all(
        distinct < 179 for distinct, _ in fitted[1:]
    )  # draws repeat pilots
    U, _ = ensemble_svd(X[P])
    direct = truncation_scores(model.view, X[P][picked, -1], U[-1], ks, progress=False)
    np.testing.assert_allclose(result.protocols["last layer"].kl, direct.kl, atol=1e-4)
    value = result.found["last layer"]["kl_quarter_d"]
    assert (
        value.value == pytest.approx(criteria(direct, D)["kl_quarter_d"], rel=1e-4)
        and value.n == 179
    )
    assert result.curves["last layer"].shape == (1, 2, len(ks)) and result.protocols[
        "every layer"
    ].kl.shape == (len(ks), 3)
    summary = result.summary(paper=True)
    assert summary["kl_quarter_d_last_layer_paper_ns"] is value
    assert set(result.found) == {"last layer", "every layer", "random directions"}
    assert (
        "k0_over_d_random_directions_paper_ns" not in summary
        and "k0_over_d_every_layer_paper_ns" in summary
    )


def test_truncation_protocols_run_both_readings(tiny):
    from lotlib.chapters.b2_ensemble_svd import (
        ScoredPilots,
        TruncationStudy,
        truncation_protocols,
    )

    model, ids, X = tiny
    U, _ = ensemble_svd(X)
    D = X.shape[2]
    picked, sub = np.arange(10), np.arange(3)
    study = TruncationStudy([1, D], n_rep=0)
    both = truncation_protocols(
        model, ids, X[:, -1], U, ScoredPilots(picked, sub), study
    )
    np.testing.assert_allclose(
        both["last layer"].kl,
        truncation_scores(model.view, X[picked, -1], U[-1], [1, D], progress=False).kl,
    )
    assert both["every layer"].kl.shape == (2, 3)
    assert list(
        truncation_protocols(
            model, ids, X[:, -1], U, ScoredPilots(picked, sub[:1]), study
        )
    ) == ["last layer"]


def test_truncation_protocols_score_the_random_null_on_the_last_layer_reading_of_p(
    tiny, p_reads
):
    """With random directions the null scores as `truncation_scores` scores it alone, bit for bit, and p is read
    once per batch of the last-layer pilots for both (the every-layer protocol reads its own)."""
    from lotlib.chapters.b2_ensemble_svd import (
        RANDOM,
        ScoredPilots,
        TruncationStudy,
        random_orthonormal,
        truncation_protocols,
    )

    model, ids, X = tiny
    U, _ = ensemble_svd(X)
    D = X.shape[2]
    directions = random_orthonormal(D, seed=5)
    scored, study = (
        ScoredPilots(np.arange(0, 40, 2), np.arange(1)),
        TruncationStudy([1, 4, D // 4, D], 0),
    )
    alone = truncation_scores(
        model.view, X[scored.last, -1], directions, [1, D // 4], progress=False
    )
    calls = p_reads
    calls.clear()  # only the readings below count
    found = truncation_protocols(model, ids, X[:, -1], U, scored, study, directions)
    assert list(found) == ["last layer", RANDOM] and calls == [20]
    np.testing.assert_array_equal(found[RANDOM].kl, alone.kl)
    np.testing.assert_array_equal(found[RANDOM].overlap, alone.overlap)
    last = truncation_scores(
        model.view, X[scored.last, -1], U[-1], study.ks, progress=False
    )
    np.testing.assert_array_equal(found["last layer"].kl, last.kl)
