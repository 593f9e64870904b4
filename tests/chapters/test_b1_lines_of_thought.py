"""Tests of `lotlib.chapters.b1_lines_of_thought`."""

import numpy as np

from lotlib.chapters.b1_lines_of_thought import (
    centered_spectrum,
    directions_for,
    principal_directions,
    variance_captured,
)
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.nulls import gaussian_cloud


def test_centered_spectrum_is_the_variance_around_the_mean_for_tall_and_wide_ensembles():
    rng = np.random.default_rng(2)
    for N, D in [(50, 8), (6, 20)]:
        x = rng.normal(size=(N, D)) * np.linspace(4.0, 0.5, D) + 10.0
        expected = np.linalg.svd(x - x.mean(0), compute_uv=False) ** 2 / N
        spectrum = centered_spectrum(x)
        assert spectrum.shape == (min(N, D),)
        np.testing.assert_allclose(
            spectrum[: len(expected)], expected, rtol=1e-9, atol=1e-9
        )
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


def test_variance_captured_out_of_sample_by_the_principal_directions_of_other_states():
    rng = np.random.default_rng(5)
    plane = np.linalg.qr(rng.normal(size=(12, 3)))[0]
    x = (
        rng.normal(size=(600, 3)) @ plane.T * 5.0
        + 0.1 * rng.normal(size=(600, 12))
        + 7.0
    )
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
    np.testing.assert_array_equal(
        pilots, np.sort(rng.choice(11, size=4, replace=False))
    )
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
    assert list(counts) == list(READINGS) and all(
        c.shape == (3,) for c in counts.values()
    )
    np.testing.assert_array_equal(
        counts["squared norm (uncentered)"], 1
    )  # the mean's direction alone
    for t in range(3):
        assert counts["variance around the mean"][t] == directions_for(
            centered_spectrum(X[:, t]), 0.9
        )
        cloud = gaussian_cloud(X[:, t], seed=1 + t)
        assert counts["structureless cloud, variance"][t] == directions_for(
            centered_spectrum(cloud), 0.9
        )


def test_held_out_share_is_one_for_states_inside_k_directions_and_summarised_per_layer():
    from lotlib.chapters.b1_lines_of_thought import (
        claim_values,
        direction_counts,
        held_out_shares,
        picture_and_halves,
        squared_norm_shares,
    )

    rng = np.random.default_rng(5)
    basis = np.linalg.qr(rng.normal(size=(12, 12)))[0][:, :3]
    X = (
        rng.normal(size=(40, 2, 3)) @ basis.T
    ) + 1.0  # every layer inside 3 directions around a mean
    _, fit, held = picture_and_halves(40, 5, seed=0)
    per_layer = held_out_shares(X, fit, held, 3, n_boot=50)
    for e in per_layer["ensemble"]:
        assert abs(e.value - 1.0) < 1e-9 and e.n == len(held)
    assert all(
        e.value < 0.9 for e in per_layer["structureless cloud"]
    )  # spread over 12 coordinates
    U, S = ensemble_svd(X)
    energy = squared_norm_shares(S[1])
    summary = claim_values(energy, direction_counts(X, S), per_layer, 1)
    assert summary["energy_top3_last_layer"] == energy[:3].sum()
    assert summary["held_out_share_quarter_d_last_layer"] is per_layer["ensemble"][1]
    assert summary["k90_centered_last_layer"] <= 3.0
    assert len(summary["held_out_share_quarter_d_by_layer_cloud"]) == 2


def test_widest_coordinates():
    from lotlib.chapters.b1_lines_of_thought import widest_coordinates

    x = np.random.default_rng(6).normal(size=(100, 6)) * np.array([1, 9, 2, 7, 0.5, 3])
    np.testing.assert_array_equal(widest_coordinates(x), [1, 3, 5])


def test_widest_paths_are_the_pilots_in_the_widest_coordinates():
    from lotlib.chapters.b1_lines_of_thought import widest_paths

    X = np.random.default_rng(0).normal(size=(20, 4, 6)) * np.array([1, 9, 1, 5, 1, 7])
    paths, dims, names = widest_paths(X, np.array([2, 5]), np.array([1, 3]))
    np.testing.assert_array_equal(dims, [1, 5, 3])
    assert names == ("x[1]", "x[5]", "x[3]") and paths.dtype == np.float64
    np.testing.assert_array_equal(paths, X[[2, 5]][:, [1, 3]][:, :, [1, 5, 3]])
