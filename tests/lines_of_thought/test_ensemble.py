"""Ensemble SVD (uncentered) and alignment of singular vectors across layers."""
import numpy as np

from lotlib.chapters.b1_lines_of_thought import (
    centered_spectrum,
    directions_for,
    principal_directions,
    variance_captured,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.nulls import gaussian_cloud


def test_uncentered_svd_reconstructs_each_layer():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3, 8)) + 5.0  # a large common offset: the uncentered u1 follows the mean
    U, S = ensemble_svd(X)
    assert U.shape == (3, 8, 8) and S.shape == (3, 8)
    for t in range(3):
        coords = X[:, t] @ U[t]
        np.testing.assert_allclose(coords @ U[t].T, X[:, t], atol=1e-10)
        np.testing.assert_allclose(np.linalg.norm(coords, axis=0), S[t], atol=1e-10)
        mean_dir = X[:, t].mean(0) / np.linalg.norm(X[:, t].mean(0))
        assert abs(U[t][:, 0] @ mean_dir) > 0.99


def test_alignment_undoes_permutations_and_sign_flips():
    rng = np.random.default_rng(1)
    Q = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    perm = [2, 0, 1, 5, 3, 4]
    signs = np.array([1, -1, -1, 1, -1, 1])
    U = np.stack([Q, Q[:, perm] * signs])
    S = np.stack([np.arange(6.0, 0, -1), np.arange(6.0, 0, -1)[perm]])
    Ua, Sa = align_bases(U, S)
    np.testing.assert_allclose(Ua[1], Q, atol=1e-12)
    np.testing.assert_allclose(Sa[1], S[0])


def test_centered_spectrum_is_the_variance_around_the_mean_for_tall_and_wide_ensembles():
    rng = np.random.default_rng(2)
    for N, D in [(50, 8), (6, 20)]:
        x = rng.normal(size=(N, D)) * np.linspace(4.0, 0.5, D) + 10.0
        expected = np.linalg.svd(x - x.mean(0), compute_uv=False) ** 2 / N
        spectrum = centered_spectrum(x)
        assert spectrum.shape == (min(N, D),)
        np.testing.assert_allclose(spectrum[:len(expected)], expected, rtol=1e-9, atol=1e-9)
        assert np.all(np.diff(spectrum) <= 1e-12)


def test_directions_for_a_share():
    assert directions_for(np.array([5.0, 3.0, 1.0, 1.0]), 0.8) == 2
    assert directions_for(np.array([5.0, 3.0, 1.0, 1.0]), 0.81) == 3
    assert directions_for(np.ones(10), 0.9) == 9


def test_a_structured_ensemble_needs_fewer_directions_than_its_structureless_cloud():
    """Points on a 2-plane with a large offset: two directions around the mean, while the cloud with the same
    mean and per-coordinate variance (correlations removed) spreads over every coordinate."""
    rng = np.random.default_rng(3)
    plane = np.linalg.qr(rng.normal(size=(30, 2)))[0]
    x = rng.normal(size=(400, 2)) @ plane.T * 3.0 + 20.0
    cloud = gaussian_cloud(x, seed=0)
    np.testing.assert_allclose(cloud.mean(0), x.mean(0), atol=0.5)
    np.testing.assert_allclose(cloud.std(0), x.std(0), rtol=0.15)
    assert directions_for(centered_spectrum(x)) == 2
    assert directions_for(centered_spectrum(cloud)) > 15
    np.testing.assert_array_equal(gaussian_cloud(x, seed=0), cloud)


def test_correlated_cloud_keeps_the_covariance():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 5)) + 3.0
    cloud = gaussian_cloud(x, n=20000, seed=1, correlated=True)
    np.testing.assert_allclose(np.cov(cloud.T, bias=True), np.cov(x.T, bias=True), atol=0.25)
    np.testing.assert_allclose(cloud.mean(0), x.mean(0), atol=0.1)


def test_variance_captured_out_of_sample_by_the_principal_directions_of_other_states():
    rng = np.random.default_rng(5)
    plane = np.linalg.qr(rng.normal(size=(12, 3)))[0]
    x = rng.normal(size=(600, 3)) @ plane.T * 5.0 + 0.1 * rng.normal(size=(600, 12)) + 7.0
    mean, directions = principal_directions(x[:300], 3)
    assert directions.shape == (12, 3)
    np.testing.assert_allclose(directions.T @ directions, np.eye(3), atol=1e-10)
    captured, total = variance_captured(x[300:], mean, directions)
    assert 0.98 < captured.sum() / total.sum() < 1.0
    assert np.all(captured <= total + 1e-12)
    cloud = gaussian_cloud(x, seed=2)
    mean, directions = principal_directions(cloud[:300], 3)
    captured, total = variance_captured(cloud[300:], mean, directions)
    assert captured.sum() / total.sum() < 0.5


def test_picture_and_halves_draws_pilots_then_splits_all_pilots_in_two_halves():
    from lotlib.chapters.b1_lines_of_thought import picture_and_halves

    pilots, fit, held = picture_and_halves(11, 4, seed=3)
    rng = np.random.default_rng(3)
    np.testing.assert_array_equal(pilots, np.sort(rng.choice(11, size=4, replace=False)))
    assert len(fit) == 5 and len(held) == 6
    np.testing.assert_array_equal(np.sort(np.concatenate([fit, held])), np.arange(11))
    assert len(picture_and_halves(3, 10)[0]) == 3


def test_direction_counts_follow_each_reading():
    from lotlib.chapters.b1_lines_of_thought import (
        READINGS,
        direction_counts,
        squared_norm_shares,
    )
    from lotlib.lines_of_thought.nulls import gaussian_cloud

    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3, 10)) * np.linspace(5.0, 0.1, 10) + 20.0  # a large mean
    U, S = ensemble_svd(X)
    np.testing.assert_allclose(squared_norm_shares(S[0]).sum(), 1.0)
    counts = direction_counts(X, S, share=0.9, seed=1)
    assert list(counts) == list(READINGS) and all(c.shape == (3,) for c in counts.values())
    np.testing.assert_array_equal(counts["squared norm (uncentered)"], 1)  # the mean's direction alone
    for t in range(3):
        assert counts["variance around the mean"][t] == directions_for(centered_spectrum(X[:, t]), 0.9)
        cloud = gaussian_cloud(X[:, t], seed=1 + t)
        assert counts["structureless cloud, variance"][t] == directions_for(centered_spectrum(cloud), 0.9)


def test_held_out_share_is_one_for_states_inside_k_directions_and_summarised_per_layer():
    from lotlib.chapters.b1_lines_of_thought import (
        dimension_summary,
        direction_counts,
        held_out_shares,
        picture_and_halves,
    )

    rng = np.random.default_rng(5)
    basis = np.linalg.qr(rng.normal(size=(12, 12)))[0][:, :3]
    X = (rng.normal(size=(40, 2, 3)) @ basis.T) + 1.0  # every layer inside 3 directions around a mean
    _, fit, held = picture_and_halves(40, 5, seed=0)
    per_layer = held_out_shares(X, fit, held, 3, n_boot=50)
    for e in per_layer["ensemble"]:
        assert abs(e.value - 1.0) < 1e-9 and e.n == len(held)
    assert all(e.value < 0.9 for e in per_layer["structureless cloud"])  # spread over 12 coordinates
    summary = dimension_summary(direction_counts(X, ensemble_svd(X)[1]), per_layer, 1)
    assert summary["held_out_share_quarter_d_last_layer"] is per_layer["ensemble"][1]
    assert summary["k90_centered_last_layer"] <= 3.0
    assert len(summary["held_out_share_quarter_d_by_layer_cloud"]) == 2


def test_widest_coordinates():
    from lotlib.chapters.b1_lines_of_thought import widest_coordinates

    x = np.random.default_rng(6).normal(size=(100, 6)) * np.array([1, 9, 2, 7, 0.5, 3])
    np.testing.assert_array_equal(widest_coordinates(x), [1, 3, 5])


def test_basis_turning_reads_angles_and_ranks_of_aligned_directions():
    from lotlib.chapters.b2_ensemble_svd import turning_summary
    from lotlib.lines_of_thought.ensemble import basis_turning

    rng = np.random.default_rng(7)
    D, T = 6, 5
    Q = np.linalg.qr(rng.normal(size=(D, D)))[0]
    U = np.stack([Q] * T)
    theta = np.radians(30.0)  # u1 turns by 30 degrees in the (u1, u2) plane at the last step only
    U[-1][:, 0] = np.cos(theta) * Q[:, 0] + np.sin(theta) * Q[:, 1]
    U[-1][:, 1] = -np.sin(theta) * Q[:, 0] + np.cos(theta) * Q[:, 1]
    S = np.tile(np.arange(D, 0, -1.0), (T, 1))
    turning = basis_turning(U, S, S, n=4)
    assert turning.angles.shape == (4, T, T)
    np.testing.assert_allclose(turning.last_step[:2], 30.0, atol=1e-8)
    np.testing.assert_allclose(turning.step[:, :-1], 0.0, atol=1e-5)
    np.testing.assert_array_equal(turning.top, [1, 2, 3, 4])
    summary = turning_summary(turning)
    assert summary["max_rank_u1_to_u4"] == 4 and abs(summary["angle_u1_last_step"] - 30.0) < 1e-8


def test_spectrum_slopes_recover_a_power_law():
    from lotlib.chapters.b2_ensemble_svd import spectrum_slopes

    i = np.arange(1, 101)
    S = np.stack([3.0 * i**-0.5, 2.0 * i**-1.5])
    np.testing.assert_allclose(spectrum_slopes(S), [-0.5, -1.5], atol=1e-10)
