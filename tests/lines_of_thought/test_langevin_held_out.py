"""The Langevin model fitted on a share of the pilots and scored on the held-out others."""

import numpy as np
import pytest

from lotlib.lines_of_thought.langevin import energy_distance, pilot_distances
from lotlib.lines_of_thought.langevin_held_out import (
    ENERGY_COLUMNS,
    FP_STATS,
    LangevinProtocol,
    _weighted_energy,
    energy_margins,
    fp_stats,
    held_out_langevin,
    total_variance,
)


def _walks(N=80, T=7, D=6, seed=0):
    rng = np.random.default_rng(seed)
    return (np.cumsum(rng.normal(size=(N, T, D)), axis=1) + 5).astype(np.float32)


def test_held_out_langevin_refuses_too_few_pilots_and_matches_the_constant_noise():
    from lotlib.models.bounds import ParameterError

    with pytest.raises(ParameterError):
        held_out_langevin(_walks(N=7), LangevinProtocol(2))
    sde = held_out_langevin(_walks(), LangevinProtocol(2, seed=1))
    assert sde.t0 == 3 and len(sde.held) == 20
    final = {name: np.trace(c[-1]) for name, c in sde.noise_cov.items()}
    assert final["constant"] == pytest.approx(final["eq2"]) and final["noiseless"] == 0
    assert len(sde.fitted) == 60


def _half_mean_square_between_pilots(Z: np.ndarray, copies: np.ndarray) -> float:
    """Half the mean of |z - z'|^2 over pairs of points of two distinct drawn copies of different pilots,
    by brute force over the explicit copies (pilot i repeated copies[i] times)."""
    pilot = np.repeat(np.arange(len(Z)), copies)
    points = np.repeat(Z, copies, axis=0)  # (m, samples, f)
    total, count = 0.0, 0
    for a in range(len(points)):
        for b in range(len(points)):
            if pilot[a] != pilot[b]:
                d = points[a][:, None] - points[b][None]
                total += np.sum(d**2) / 2
                count += d.shape[0] * d.shape[1]
    return total / count


def test_total_variance_is_half_the_mean_square_between_points_of_distinct_pilots():
    """On the sample, one point per pilot: the variance with ddof 1. With samples per pilot and under a
    resample with repeated pilots: the brute-force mean over pairs of points of distinct pilots (copies of one
    pilot make no pair, so the repeats do not shrink the spread between pilots)."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(12, 3, 4))
    weights = np.vstack([np.ones(12), rng.integers(0, 3, size=12)])
    one = Z[:, :1]
    assert total_variance(one, weights[:1])[0] == pytest.approx(
        np.sum(one[:, 0].var(0, ddof=1))
    )
    for row in weights:
        assert total_variance(Z, row[None])[0] == pytest.approx(
            _half_mean_square_between_pilots(Z, row.astype(int))
        )


def test_a_bootstrap_of_the_variance_ratio_is_centred_on_the_sample_value():
    """The pilots carry several noisy samples each: a plug-in variance of a resample shrinks the spread
    between pilots but not the noise within them, so a ratio of predicted to true variance drifts up under
    resampling (2.3% here); from pairs of distinct pilots it drifts less than half as much (what is left is
    the ratio's own curvature)."""
    from lotlib.stats import resampling_weights

    def plug_in(Z, w):  # the pooled variance of the points drawn
        count = w.sum(1) * Z.shape[1]
        mean = w @ Z.sum(1) / count[:, None]
        return w @ np.sum(Z**2, axis=(1, 2)) / count - np.sum(mean**2, 1)

    rng = np.random.default_rng(3)
    true = rng.normal(size=(30, 1, 6))
    predicted = true + rng.normal(
        size=(30, 8, 6)
    )  # the same pilots plus noise within each
    w = resampling_weights(30, 2000, seed=1)
    drift = {}
    for name, variance in (("distinct", total_variance), ("plug-in", plug_in)):
        ratio = variance(predicted, w) / variance(true, w)
        drift[name] = np.mean(ratio[1:]) / ratio[0] - 1
    assert drift["plug-in"] > 0.02
    assert abs(drift["distinct"]) < min(0.015, drift["plug-in"] / 2)


def test_fp_stats_score_a_perfect_prediction_as_perfect():
    true = np.random.default_rng(0).normal(size=(200, 5))
    stats = fp_stats(true, true, np.eye(5), np.zeros((5, 5)), np.ones((1, 200)))
    assert stats[FP_STATS[0]][0] == 0 and stats[FP_STATS[2]][0] == pytest.approx(1.0)
    assert stats[FP_STATS[1]][0] < 0.05


def test_weighted_energy_is_the_energy_distance_of_the_drawn_points():
    """Pilot j drawn w[j] times, with its points: the energy distance of the explicitly repeated samples."""
    rng = np.random.default_rng(1)
    P, T = rng.normal(size=(7, 3, 4)), rng.normal(0.5, 1.0, size=(7, 1, 4))
    sums = (pilot_distances(P, T), pilot_distances(P, P), pilot_distances(T, T))
    for w in (np.ones(7), np.array([2.0, 0, 1, 3, 0, 1, 0])):
        drawn = lambda Z, w=w: np.repeat(Z, w.astype(int), axis=0).reshape(-1, 4)
        direct = energy_distance(drawn(P), drawn(T), n=10_000)
        assert _weighted_energy(*sums, w, 3) == pytest.approx(direct)


def test_energy_margins_on_the_sample_and_their_bootstrap_interval():
    sde = held_out_langevin(_walks(), LangevinProtocol(2, seed=0))
    margins = energy_margins(sde, n_samples=3, n_points=50, n_boot=40, seed=0)
    assert margins.n == min(50, len(sde.held))
    assert set(margins.margins) == {
        ENERGY_COLUMNS["constant"],
        ENERGY_COLUMNS["linear"],
    }
    assert all(len(m) == 41 and np.isfinite(m).all() for m in margins.margins.values())
    estimate = margins.estimate(ENERGY_COLUMNS["linear"])
    assert (
        estimate.value == margins.margins[ENERGY_COLUMNS["linear"]][0]
        and estimate.lo < estimate.hi
    )
    again = energy_margins(sde, n_samples=3, n_points=50, n_boot=40, seed=0)
    np.testing.assert_array_equal(
        again.margins[ENERGY_COLUMNS["linear"]],
        margins.margins[ENERGY_COLUMNS["linear"]],
    )
