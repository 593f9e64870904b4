"""Null tests and the last-layer diagnostic: path shapes, stalling, bootstrap over pilots,
the noise law pilot by pilot and left out one layer at a time."""
import numpy as np
import pytest
import torch

from lotlib import capture, gibberish, load_model
from lotlib.chapters.c4_null_tests import (
    PAPER_ARCH,
    ArchitectureNull,
    architecture_null,
    arrival_r2_gap,
    compare_noise_laws,
    last_layer_view,
    noise_law_summary,
    path_shapes,
    refitted_pairs,
    reinit_stalling,
    residual_law,
    separability_by_split,
    stalling,
    stalling_table,
)
from lotlib.chapters.c5_other_models import (
    cloud_summary,
    last_layer_excess,
    last_layer_normalized,
    last_layer_summary,
    loo_log_ratios,
    measure_model,
    measures_table,
    next_token_nll,
    noise_law,
    pilot_residuals,
    spectrum_decay,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.null_tests import (
    layer_separability,
    relative_steps,
    split_rows,
    step_coherence,
    step_cosines,
    step_table,
    straightness,
)
from lotlib.lines_of_thought.nulls import structureless_cloud
from lotlib.lines_of_thought.residuals import (
    fit_laws,
    fit_variance,
    pair_mask,
    pair_statistics,
    resampled_pairs,
    singular_coordinates,
)
from lotlib.models.bounds import ParameterError
from lotlib.stats import Estimate, bootstrap, resampled_estimate, resampling_weights


def separability(
    A: np.ndarray,
    B: np.ndarray,
    train_fraction: float = 0.7,
    seed: int = 0,
    classifier: str = "perceptron",
    resample: bool = False,
) -> float:
    """Test oracle: `layer_separability` of two samples A `(n_a, f)` and B `(n_b, f)`: the test accuracy of one split."""
    return float(
        layer_separability(
            A[:, None], B[:, None], train_fraction, seed, classifier, False, resample
        )[0]
    )



@pytest.mark.parametrize("classifier", ["perceptron", "logistic"])
def test_separability_is_chance_on_one_distribution_and_perfect_on_shifted_ones(classifier):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(1000, 20)), rng.normal(size=(1000, 20))
    same = separability(A, B, seed=0, classifier=classifier)
    shifted = separability(A, B + 8.0 * np.eye(20)[0], seed=0, classifier=classifier)
    assert abs(same - 0.5) < 0.06  # 600 test samples: the standard error of chance is 0.02
    assert shifted > 0.99  # a shift of 8 sigma: the best boundary errs with probability 3e-5
    assert separability(A, B, seed=0, classifier=classifier) == same  # seeded


def test_separability_rejects_unknown_classifiers():
    with pytest.raises(ValueError, match="classifier"):
        separability(np.zeros((4, 2)), np.ones((4, 2)), classifier="svm")


def test_layer_separability_follows_each_layer():
    rng = np.random.default_rng(1)
    XA, XB = rng.normal(size=(400, 3, 10)), rng.normal(size=(400, 3, 10))
    XB[:, 1, 0] += 5.0  # only layer 1 differs
    acc = layer_separability(XA, XB, progress=False)
    assert acc.shape == (3,)
    assert acc[1] > 0.98 and abs(acc[0] - 0.5) < 0.1 and abs(acc[2] - 0.5) < 0.1


def test_split_rows_draws_each_class_with_replacement_and_keeps_copies_on_one_side():
    train, test = split_rows(60, 40, 0.7, seed=0)  # the sample's split: every row once, stratified
    np.testing.assert_array_equal(np.sort(np.r_[train, test]), np.arange(100))
    assert np.sum(train < 60) == 42 and np.sum(train >= 60) == 28
    draws = [split_rows(60, 40, 0.7, seed=s, resample=True) for s in range(3)]
    for train, test in draws:
        rows = np.r_[train, test]
        assert len(rows) == 100 and np.sum(rows < 60) == 60  # each class keeps its size
        assert len(np.unique(rows)) < 90  # drawn with replacement (about 63 distinct of 100)
        assert not set(train) & set(test)  # no pseudo-sentence is both fitted and scored
        share = len(np.unique(train[train < 60])) / len(np.unique(rows[rows < 60]))
        assert share == pytest.approx(0.7, abs=0.03)  # of the distinct ones drawn
    assert not np.array_equal(np.sort(draws[0][0]), np.sort(draws[1][0]))  # repetitions draw different rows
    np.testing.assert_array_equal(split_rows(60, 40, 0.7, seed=1, resample=True)[0], draws[1][0])  # seeded


def test_separability_interval_contains_chance_on_one_distribution_and_widens_on_a_smaller_sample():
    rng = np.random.default_rng(5)
    same = {"same": (rng.normal(size=(300, 2, 6)), rng.normal(size=(300, 2, 6)))}  # t = 0 and one block
    chance = separability_by_split(same, range(3), n_boot=60, progress=False).min_over_blocks()["same"]
    assert chance.lo < 0.5 < chance.hi and chance.n == 600 and chance.unit == "pseudo-sentences"
    width = {}
    for n in (400, 100):
        A, B = rng.normal(size=(n, 2, 6)), rng.normal(size=(n, 2, 6))
        B[:, :, 0] += 1.7  # accuracy about Phi(0.85) = 0.8
        sep = separability_by_split({"shifted": (A, B)}, range(3), n_boot=60, progress=False)
        estimate = sep.min_over_blocks()["shifted"]
        assert 0.6 < estimate.value < 0.9  # a perceptron falls short of the best boundary
        width[n] = estimate.hi - estimate.lo
        assert sep.resampled["shifted"].shape == (60, 2) and sep.accuracy["shifted"].shape == (3, 2)
    assert width[100] > 1.4 * width[400]  # 1/sqrt(n): about twice as wide


def test_separability_repetitions_refit_on_the_resampled_rows():
    from sklearn.linear_model import Perceptron
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(6)
    A, B = rng.normal(size=(80, 3, 4)), rng.normal(size=(80, 3, 4)) + 0.5
    sep = separability_by_split({"p": (A, B)}, [0], n_boot=2, seed=3, progress=False)
    for r in range(2):
        train, test = split_rows(80, 80, 0.7, seed=3 + r, resample=True)
        features, labels = np.concatenate([A[:, 2], B[:, 2]]), np.repeat([0, 1], 80)
        scaler = StandardScaler().fit(features[train])
        model = Perceptron(random_state=3 + r).fit(scaler.transform(features[train]), labels[train])
        assert sep.resampled["p"][r, 2] == model.score(scaler.transform(features[test]), labels[test])
    assert sep.accuracy["p"][0, 2] == separability(A[:, 2], B[:, 2], seed=0)


def _stalled_chain(N=200, T=21, D=50, split=10, small=0.01, seed=2):
    """Random walks around a far offset, steps of length ~1 up to layer `split`, `small` after it."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=(N, T - 1, D)) / np.sqrt(D)
    steps[:, split:] *= small
    offset = np.zeros(D)
    offset[0] = 100.0
    return offset + np.concatenate([np.zeros((N, 1, D)), np.cumsum(steps, axis=1)], axis=1)


def test_step_measures_match_a_direct_computation():
    X = _stalled_chain(N=5, T=6, D=4)
    for n in range(5):
        for t in range(5):
            step = X[n, t + 1] - X[n, t]
            assert np.isclose(relative_steps(X)[n, t], np.linalg.norm(step) / np.linalg.norm(X[n, t]))
            if t >= 1:
                prev = X[n, t] - X[n, t - 1]
                cos = step @ prev / np.linalg.norm(step) / np.linalg.norm(prev)
                assert np.isclose(step_cosines(X)[n, t - 1], cos)


def test_stalling_on_a_synthetic_stalled_chain():
    result = stalling(_stalled_chain(split=10, small=0.01), split=10)
    assert result["step_ratio"] == pytest.approx(0.01, rel=0.1)
    assert result["step_before"] == pytest.approx(0.01, rel=0.1)  # steps ~1 on states of norm ~100
    assert abs(result["cos_before"]) < 0.05 and abs(result["cos_after"]) < 0.05  # random walks turn at random
    no_stall = stalling(_stalled_chain(split=10, small=1.0), split=10)
    assert no_stall["step_ratio"] == pytest.approx(1.0, rel=0.1)
    line = np.linspace(0, 1, 12)[None, :, None] * np.ones((3, 1, 8)) + 1.0  # straight paths
    assert stalling(line, split=5)["cos_before"] == pytest.approx(1.0)
    assert np.isnan(stalling(line, split=2)["cos_before"])  # one step before the split: no pair of steps


def test_straightness_of_lines_and_random_walks():
    line = np.linspace(0, 1, 12)[None, :, None] * np.arange(1, 9)[None, None, :] + 3.0
    np.testing.assert_allclose(straightness(line), 1.0)
    walk = _stalled_chain(N=400, T=101, D=200, small=1.0)
    assert np.mean(straightness(walk)) == pytest.approx(1 / np.sqrt(100), rel=0.1)


def test_step_coherence_of_parallel_and_independent_steps():
    rng = np.random.default_rng(3)
    parallel = np.cumsum(np.broadcast_to(rng.normal(size=(1, 5, 30)), (100, 5, 30)), axis=1) + rng.normal(size=(100, 1, 30))
    np.testing.assert_allclose(step_coherence(parallel), 1.0, rtol=1e-5)
    independent = step_coherence(rng.normal(size=(2000, 5, 30)))
    assert np.all(independent < 3 / np.sqrt(2000))


def test_weighted_step_coherence_is_the_coherence_of_the_resampled_pilots():
    X = _stalled_chain(N=40, T=6, D=8, small=1.0) + np.random.default_rng(4).normal(size=(40, 6, 8))
    weights = resampling_weights(40, n_boot=3, seed=5)
    rows = step_coherence(X, weights)
    assert rows.shape == (4, 5)
    np.testing.assert_allclose(rows[0], step_coherence(X), rtol=1e-5)
    indices = np.repeat(np.arange(40), weights[2].astype(int))  # the pilots of resample 2, with repeats
    np.testing.assert_allclose(rows[2], step_coherence(X[indices]), rtol=1e-5)


def test_resampling_weights_draw_what_the_bootstrap_draws():
    drawn = []
    bootstrap(lambda idx: drawn.append(np.bincount(idx, minlength=50)) or 0.0, 50, unit="units", n_boot=30, seed=7)
    weights = resampling_weights(50, n_boot=30, seed=7)
    assert weights.shape == (31, 50)
    np.testing.assert_array_equal(weights[0], 1.0)
    np.testing.assert_array_equal(weights[1:], np.array(drawn[1:]))  # drawn[0] is the sample itself


def test_resampled_estimate_has_the_standard_error_of_a_mean():
    x = np.random.default_rng(6).exponential(size=400)
    weights = resampling_weights(400, n_boot=2000, seed=7)
    estimate = resampled_estimate(weights @ x / 400, 400, unit="units")
    assert estimate.value == pytest.approx(x.mean()) and estimate.n == 400 and estimate.unit == "units"
    half = 1.96 * x.std() / np.sqrt(400)  # the textbook interval of a mean
    assert (estimate.hi - estimate.lo) / 2 == pytest.approx(half, rel=0.1)
    assert estimate.lo < x.mean() < estimate.hi
    assert np.isnan(resampled_estimate(np.array([1.0]), 1, unit="units").lo)


def _law_layers(N=4000, T=9, D=6, lam=0.3, last_scale=1.0, seed=4):
    """Independent Gaussian ensembles with variance exp(lam t): Eq. 1 residuals have variance ~ 2 exp(lam (t+tau)),
    a function of the arrival layer (the law holds exactly); the last layer optionally scaled."""
    X = np.random.default_rng(seed).normal(size=(N, T, D)) * np.exp(0.5 * lam * np.arange(T))[None, :, None]
    X[:, -1] *= last_scale
    return X


def test_pilot_residuals_give_b4s_mean_variance():
    X = _law_layers(N=300, T=6, D=5) ** 3
    U, S = ensemble_svd(X)
    residuals = pilot_residuals(X, U, S, progress=False)
    Ua, Sa = align_bases(U, S)
    stats = pair_statistics(singular_coordinates(X, Ua), Sa, np.arange(1, 6), progress=False)
    mask = pair_mask(6, 1, 5)
    np.testing.assert_allclose(residuals.log_mean_var()[mask], stats.log_mean_var()[mask], rtol=1e-4)
    assert np.isnan(residuals.log_mean_var()[~mask]).all()
    spread = np.log(X.var(0).sum(-1))
    np.testing.assert_allclose(residuals.log_relative_var()[mask], (np.log(np.mean(stats.var, -1) * 5) - spread[None])[mask],
                               rtol=1e-4)


def test_pilot_residuals_resample_like_the_exact_weighted_moments():
    X = _law_layers(N=400, T=5, D=4)
    U, S = ensemble_svd(X)
    weights = resampling_weights(400, n_boot=20, seed=3)
    cheap = pilot_residuals(X, U, S, progress=False)
    Ua, Sa = align_bases(U, S)
    exact_moments = resampled_pairs(singular_coordinates(X, Ua), Sa, np.arange(1, 5), weights, progress=False)
    mask = pair_mask(5, 1, 4)
    np.testing.assert_allclose(cheap.log_mean_var(weights)[0][mask], exact_moments.log_mean_var()[0][mask], rtol=1e-4)
    difference = cheap.log_relative_var(weights)[:, mask] - exact_moments.log_relative_var()[:, mask]
    assert np.abs(difference).max() < 0.02  # the resample's own shift of the mean: a few 1/N


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
        assert r[s] == pytest.approx(log_var[1:s, s].mean() - np.log(fit["alpha"]) - fit["lambda"] * s)


def test_a_scaled_last_layer_breaks_the_law_and_its_spread_explains_it():
    for scale in (1.0, 3.0):
        X = _law_layers(last_scale=scale)
        residuals = pilot_residuals(X, *ensemble_svd(X), progress=False)
        raw, relative = loo_log_ratios(residuals.log_mean_var()), loo_log_ratios(residuals.log_relative_var())
        assert raw[-1] == pytest.approx(2 * np.log(scale), abs=0.05)  # the variance at L is scale^2 times the law's
        assert abs(relative[-1]) < 0.05  # ... and so is the spread it is compared with
        assert fit_laws(residuals.log_mean_var(), pair_mask(9, 1, 8))["lambda"] > 0.25
    # the other layers' refits include the scaled last layer, which tilts them: they are off by up to ~1.2
    assert last_layer_excess(raw, 4) > 0.5 and last_layer_excess(relative, 4) < 0.05


def test_structureless_cloud_keeps_the_norm_growth_and_nothing_else():
    X = _law_layers(N=2000, T=4, D=3) + np.arange(3)
    X[:, :, 1] += X[:, :, 0]  # correlated coordinates, and layers that share pilots
    cloud = structureless_cloud(X, seed=1)
    np.testing.assert_allclose(cloud.mean(0), X.mean(0), atol=0.15)
    np.testing.assert_allclose(cloud.std(0), X.std(0), rtol=0.06)
    assert abs(np.corrcoef(cloud[:, 0, 0], cloud[:, 0, 1])[0, 1]) < 0.1 < np.corrcoef(X[:, 0, 0], X[:, 0, 1])[0, 1]
    np.testing.assert_array_equal(structureless_cloud(X, seed=1), cloud)


@pytest.fixture(scope="module")
def tiny_llama(tiny_llama_dir):
    model = load_model(str(tiny_llama_dir), device="cpu")
    ids = gibberish(model.view.W_E.shape[0], n_s=30, n_k=6, seed=1).ids
    return model, ids, capture(model, ids, progress=False)


def test_last_layer_normalized_applies_the_final_norm_to_the_last_layer_only(tiny_llama):
    model, _, X = tiny_llama
    U, S = ensemble_svd(X)
    Xn, Un, Sn = last_layer_normalized(model.view, X, U, S, batch_size=7)
    expected = model.view.final_norm(torch.as_tensor(X[:, -1])).numpy()
    np.testing.assert_allclose(Xn[:, -1], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(Xn[:, :-1], X[:, :-1])
    np.testing.assert_array_equal(Un[:-1], U[:-1])
    gram = Xn[:, -1].T.astype(np.float64) @ Xn[:, -1]
    np.testing.assert_allclose((Un[-1] * Sn[-1] ** 2) @ Un[-1].T, gram, rtol=1e-4, atol=1e-3)
    assert not np.allclose(X[:, -1], Xn[:, -1])  # the tiny model's last states are not already normalized


def test_next_token_nll_matches_the_models_logits(tiny_llama):
    model, ids, X = tiny_llama
    targets = ids[:, 0]
    with torch.no_grad():
        logp = model.hf(input_ids=torch.as_tensor(ids)).logits[:, -1].log_softmax(-1)
    expected = -logp[np.arange(len(ids)), targets].numpy()
    np.testing.assert_allclose(next_token_nll(model.view, X[:, -1], targets, batch_size=4), expected, rtol=1e-4)


# ----------------------------------------------------------------------------------------------
# the chapters' analyses (C4, C5)



def test_separability_by_split_summarizes_each_pair():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(200, 3, 8)), rng.normal(size=(200, 3, 8))
    B[:, 1:, 0] += 8.0  # separable from layer 1 on, not at the embedding
    sep = separability_by_split({"shifted": (A, B), "same": (A, rng.normal(size=(200, 3, 8))), "u": (A, B)}, [0, 1],
                                n_boot=4, progress=False)
    assert sep.accuracy["shifted"].shape == (2, 3) and len(sep.table()) == 3 * 2 * 3
    summary = sep.summary()
    assert summary["separability_min"].value > 0.95 and abs(summary["separability_control_min"].value - 0.5) < 0.15
    assert summary["separability_embedding"].value < 0.7 and summary["separability_min"].n == 400
    assert summary["separability_min"].value == pytest.approx(sep.accuracy["shifted"][:, 1:].min(1).mean())
    np.testing.assert_array_equal(summary["separability_by_layer"], sep.accuracy["shifted"].mean(0))


def test_path_shapes_of_straight_lines_and_their_summary():
    rng = np.random.default_rng(0)
    start, direction = rng.normal(size=(30, 1, 5)), rng.normal(size=(1, 1, 5))
    lines = (start + np.arange(6)[None, :, None] * direction).astype(np.float32)  # parallel straight lines
    walks = np.cumsum(rng.normal(size=(30, 6, 5)), axis=1).astype(np.float32)
    weights = resampling_weights(30, 20, seed=0)
    shapes = path_shapes({"lines": lines, "walks": walks}, np.arange(10), weights)
    summary = shapes.summary()
    assert summary["lines_straightness"].value == pytest.approx(1.0)
    assert summary["lines_step_coherence"].value == pytest.approx(1.0, abs=1e-5)
    assert summary["walks_straightness"].value < 0.9
    np.testing.assert_allclose(shapes.straight["walks"], straightness(walks[:, 1:]))
    assert summary["straightness_random_walk"].value == pytest.approx(1 / 2)  # L - 1 = 4 steps


def test_last_layer_view_projects_on_the_last_layers_top_directions():
    X = np.random.default_rng(0).normal(size=(40, 4, 6)).astype(np.float32)
    P = last_layer_view(X, np.arange(5))
    U, _ = ensemble_svd(X[:, -1:])
    assert P.shape == (5, 3, 3)
    np.testing.assert_allclose(P[:, -1], X[:5, -1].astype(np.float64) @ U[0][:, :3], rtol=1e-6)


def test_reinit_stalling_divides_by_the_reference_and_averages_over_seeds():
    X = np.cumsum(np.random.default_rng(0).normal(size=(20, 7, 4)), axis=1)
    stalled = X.copy()
    stalled[:, 4:] = X[:, 3:4] + 0.01 * (stalled[:, 4:] - X[:, 3:4])
    stall = stalling_table({"trained": X, "untrained": X, "a": stalled, "b": stalled}, 3)
    assert stall.loc["a", "step_after"] == stalling(stalled, 3)["step_after"]
    out = reinit_stalling(stall)
    assert out["reinit_step_ratio"].value == pytest.approx(stall.loc["a", "step_after"] / stall.loc["trained", "step_after"])
    assert out["reinit_step_ratio"].value < 0.1 and out["reinit_step_ratio"].n == 2
    skipped = reinit_stalling(stall.loc[["trained", "untrained"]], skipped="not re-initialised")
    assert skipped == dict.fromkeys(out, "not re-initialised")  # an untrained model: nothing was re-initialised


def test_step_table_has_a_row_per_pilot_and_step():
    X = np.random.default_rng(0).normal(size=(5, 6, 3))
    table = step_table({"m": X})
    steps = table.dropna(subset=["relative step"])
    assert len(steps) == 5 * 4 and len(table.dropna(subset=["cos"])) == 5 * 3
    np.testing.assert_allclose(steps["relative step"], relative_steps(X)[:, 1:].ravel())


def test_compare_noise_laws_and_its_summary_follow_the_pilot_residuals():
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(60, 6, 5)), axis=1).astype(np.float32) + 3
    Y = (X * np.linspace(1, 3, 6)[None, :, None]).astype(np.float32)
    weights = resampling_weights(60, 10, seed=0)
    law, gap = compare_noise_laws({"a": X, "b": Y}, weights, n_boot_refit=5)
    U, S = ensemble_svd(X)
    residuals = pilot_residuals(X, U, S, progress=False)
    np.testing.assert_allclose(law["a"]["log_var"], residuals.log_mean_var(), rtol=1e-4, equal_nan=True)
    np.testing.assert_allclose(law["a"]["log_rel"], residuals.log_relative_var(), rtol=1e-4, equal_nan=True)
    assert gap.value == pytest.approx(law["a"]["relative_arrival_r2"].value - law["b"]["relative_arrival_r2"].value)
    assert len(law["a"]["arrival_r2_rows"]) == 6 and np.isfinite(law["a"]["kurtosis"].lo)
    summary = noise_law_summary(law)
    assert summary["b_lambda"] == law["b"]["fit"]["lambda"] and "a_relative_arrival_r2" in summary


@pytest.mark.parametrize("N, D", [(80, 5), (12, 20)])  # more pilots than dimensions, and fewer
def test_refitted_pairs_refit_the_bases_on_each_resample(N, D):
    X = _law_layers(N=N, T=5, D=D) ** 3 + 1.0  # heavy tails, an offset
    X[:, 0] = X[:1, 0]  # the embedding layer repeats one token: rank 1, as x(0) of real pilots often is
    weights = resampling_weights(N, n_boot=2, seed=1)
    rows = refitted_pairs(X, weights, progress=False)
    mask = pair_mask(5, 1, 4)
    assert rows["trace"].shape == (3, 5, 5) and np.isnan(rows["trace"][:, ~mask]).all()
    for r in range(3):
        drawn = np.repeat(np.arange(N), weights[r].astype(int))
        if N > D:  # an independent refit: the library's SVD of the drawn pilots, repeats included
            U, S = align_bases(*ensemble_svd(X[drawn][:, 1:]))
        else:  # repeats would leave zero singular values: the SVD of the distinct ones, each sqrt(count) times
            distinct = np.flatnonzero(weights[r])
            U, S = align_bases(*ensemble_svd(X[distinct][:, 1:] * np.sqrt(weights[r][distinct])[:, None, None]))
        stats = pair_statistics(singular_coordinates(X[drawn][:, 1:], U), S, np.arange(4), progress=False)
        trace = stats.var.sum(-1)
        np.testing.assert_allclose(rows["trace"][r, 1:, 1:][mask[1:, 1:]], trace[mask[1:, 1:]], rtol=1e-3)
        n = len(drawn)  # the small-sample correction of the excess kurtosis (MATLAB's kurtosis(x, 0)), written apart
        corrected = ((n + 1) * stats.kurtosis + 6) * (n - 1) / ((n - 2) * (n - 3))
        kurtosis = (stats.var * corrected).sum(-1) / trace
        np.testing.assert_allclose(rows["kurtosis"][r, 1:, 1:][mask[1:, 1:]], kurtosis[mask[1:, 1:]], atol=1e-3)
        np.testing.assert_allclose(  # layer 0 is one point: a spread of 0 up to rounding
            rows["spread"][r], X[drawn].astype(np.float64).var(0).sum(-1), rtol=1e-6, atol=1e-12)
        assert rows["k"][r] == min(len(np.unique(drawn)), D)
    Ua, Sa = align_bases(*ensemble_svd(X))  # the sample: B4's fixed-basis moments
    fixed = resampled_pairs(singular_coordinates(X, Ua), Sa, np.arange(1, 5), weights, progress=False)
    np.testing.assert_allclose(rows["trace"][0][mask], fixed.trace[0][mask], rtol=1e-3)
    np.testing.assert_allclose(rows["kurtosis"][0][mask], fixed.kurtosis[0][mask], atol=1e-3)
    if N < D:  # with fewer pilots than dimensions a resample's bases span only its own pilots
        assert not np.allclose(rows["trace"][1][mask], fixed.trace[1][mask], rtol=1e-2)


def test_spectrum_decay_of_a_power_law():
    sigma = np.arange(1, 101, dtype=float) ** -1.5
    out = spectrum_decay(sigma)
    assert out["sigma1_over_sigma2"] == pytest.approx(2**1.5) and out["spectrum_slope"] == pytest.approx(-1.5)
    assert spectrum_decay(sigma[:12])["spectrum_slope"] is None


def test_last_layer_and_cloud_summaries_read_the_noise_law():
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(50, 8, 5)), axis=1).astype(np.float32) + 3
    weights = resampling_weights(50, 10, seed=0)
    law = noise_law(X, *ensemble_svd(X), weights)
    row = last_layer_summary(law, law, 7, 50)
    assert row["lambda_L"].value == pytest.approx(7 * row["lambda"].value)
    assert row["last_layer_excess"].value == pytest.approx(last_layer_excess(law["loo"], 3)[0])
    assert row["last_layer_excess_final_norm"].value == row["last_layer_excess"].value
    cloud = cloud_summary(law, 7, 50)
    assert cloud["last_layer_excess_cloud"].value == row["last_layer_excess"].value


def test_measures_table_formats_and_orders_the_rows():
    from lotlib.stats import Estimate

    rows = {"m": {"d_model": 64, "n_layers": 3, "lambda": Estimate(0.5, 0.4, 0.6, 10, "pilots", "bootstrap-se", 0.95),
                  "spectrum_slope": None, "top3_overlap_quarter": 1.23456}}
    table = measures_table(rows, top=3)
    assert list(table.index) == ["layers L", "width D", "log-log slope of σ_i at L", "top-3 overlap at D/4", "λ (per layer)"]
    assert table.loc["log-log slope of σ_i at L", "m"] == "—" and table.loc["top-3 overlap at D/4", "m"] == "1.235"


def test_measure_model_on_a_tiny_model(tiny_llama_dir):
    m = measure_model(str(tiny_llama_dir), n_s=140, n_kl=20, ks=[1, 4], n_s_gibberish=40, n_bos=0, n_boot=5,
                      cloud=True, device="cpu")
    assert m.row["n_layers"] == 3 and m.row["d_model"] == 64 and m.row["n_s"] == 140
    assert m.row["n_scored"] == 70 and m.row["lambda"].n == 70  # bases on one half, the law on the other
    with pytest.raises(ParameterError, match="n_s"):
        measure_model(str(tiny_llama_dir), n_s=100, device="cpu")  # 50 fitted pilots cannot span D = 64
    assert m.cloud is not None and "last_layer_excess_cloud" in m.row and "nll_bos" not in m.row
    assert m.separable.shape == (4,) and m.spectrum[0] == 1.0
    assert m.row["kl_at_quarter"] is not None and list(m.curve["K / D"]) == [1 / 64, 4 / 64, 16 / 64, 1.0]


def test_separability_gap_is_the_split_by_split_difference_of_minima():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(200, 3, 8)), rng.normal(size=(200, 3, 8))
    B[:, 1:, 0] += 8.0
    pairs = {"trained": (A, B), "halves": (A, A[::-1]), "untrained": (A, rng.normal(size=(200, 3, 8)))}
    sep = separability_by_split(pairs, [0, 1, 2], n_boot=10, progress=False)
    lowest = {name: acc[:, 1:].min(1) for name, acc in sep.accuracy.items()}
    gap = sep.summary()["untrained_separability_gap"]
    assert gap.value == pytest.approx(np.mean(lowest["untrained"] - lowest["trained"])) and gap.n == 400
    assert gap.hi < 0  # random states separate less than a shift of 8 sigma
    # pairs of the same sizes are resampled on the same rows with the same classifier seeds: paired
    same = separability_by_split({"a": (A, B), "b": (A, B), "c": (A, B)}, [0], n_boot=5, progress=False)
    assert same.gap("a", "c") == Estimate(0.0, 0.0, 0.0, 400, "pseudo-sentences", "bootstrap (centered)")


def test_side_word_reads_the_whole_interval():
    from lotlib.stats import Estimate, side_word

    def word(lo, hi):
        return side_word(Estimate((lo + hi) / 2, lo, hi, 5, "seeds"), ("less", "as much", "more"))

    assert (word(-0.3, -0.1), word(-0.1, 0.2), word(0.1, 0.3)) == ("less", "as much", "more")
    assert side_word(Estimate(1.2, 1.1, 1.3, 5, "seeds"), than=1.0) == "above"


def test_residual_law_is_compare_noise_laws_for_one_model():
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(40, 5, 4)), axis=1).astype(np.float32) + 3
    weights = resampling_weights(40, 6, seed=0)
    law, _ = compare_noise_laws({"a": X, "b": X}, weights, n_boot_refit=3)
    alone = residual_law(X, weights, n_boot_refit=3)
    assert alone["kurtosis"] == law["b"]["kurtosis"]
    np.testing.assert_array_equal(alone["arrival_r2_rows"], law["a"]["arrival_r2_rows"])
    assert arrival_r2_gap(alone, law["a"]).value == 0.0


def test_architecture_null_on_a_tiny_published_architecture(monkeypatch):
    from lotlib import trajectories, walden
    from lotlib.models import sources

    monkeypatch.setitem(sources.PUBLISHED, "gpt2", {"n_layer": 3, "n_embd": 32, "n_head": 4})
    rng = np.random.default_rng(0)
    trained = residual_law(np.cumsum(rng.normal(size=(25, 5, 4)), axis=1).astype(np.float32) + 3,
                           resampling_weights(25, 8, seed=0), n_boot_refit=4)  # fewer pilots: independent resamples
    null = architecture_null("gpt2", trained, n_k=8, n_s=30, n_pilots=6, n_boot=8, device="cpu")
    lm = load_model("untrained:gpt2", seed=0, device="cpu")
    X = trajectories(lm, walden(lm.tokenizer, n_k=8, n_s=30), progress=False)  # the same seeded draw
    summary = null.summary()
    assert set(summary) == {f"{k}{PAPER_ARCH}" for k in ArchitectureNull.KEYS}
    assert (summary["n_layers_paper_arch"], summary["d_model_paper_arch"], summary["n_s_paper_arch"]) == (3, 32, 30)
    assert summary["untrained_straightness_paper_arch"].value == pytest.approx(straightness(X[:, 1:]).mean(), rel=1e-5)
    assert summary["straightness_random_walk_paper_arch"].value == pytest.approx(1 / np.sqrt(2))
    assert summary["untrained_arrival_r2_gap_paper_arch"].value == pytest.approx(
        trained["relative_arrival_r2"].value - summary["untrained_relative_arrival_r2_paper_arch"].value)
    assert np.isfinite(summary["untrained_kurtosis_paper_arch"].lo)  # bootstrapped, 4 refits as the trained law
    assert len(null.law["arrival_r2_rows"]) == 5 and null.shapes.coherence["untrained"].shape[0] == 9
    assert null.view.shape == (6, 3, 3) and list(null.views(0)) == ["untrained gpt2 (seed 0), L = 3, D = 32"]
    words = null.words()
    straight = summary["untrained_straightness_paper_arch"]
    walk = summary["straightness_random_walk_paper_arch"].value
    assert words["paper_straight_word"] == ("above" if straight.lo > walk else "below" if straight.hi < walk else "across")
    assert set(words) == {f"paper_{k}_word" for k in ("straight", "parallel", "kurtosis", "arrival")}
    skipped = architecture_null("", trained, 8, 30, 6, 8)
    assert skipped.views(0) == {} and set(skipped.summary().values()) == {None}
    assert set(skipped.words().values()) == {"not measured"}
