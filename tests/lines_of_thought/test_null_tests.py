"""Null tests and the last-layer diagnostic: path shapes, stalling, bootstrap over pilots,
the noise law pilot by pilot and left out one layer at a time."""

import numpy as np
import pytest

from lotlib import capture, gibberish, load_model
from lotlib.chapters.c4_null_tests import noise_law_summary
from lotlib.lines_of_thought.ensemble import ensemble_svd
from lotlib.lines_of_thought.null_tests import (
    compare_noise_laws,
    last_layer_view,
    layer_separability,
    relative_steps,
    split_rows,
    step_coherence,
    step_cosines,
    step_table,
    straightness,
)
from lotlib.lines_of_thought.nulls import structureless_cloud
from lotlib.lines_of_thought.pilot_residuals import pilot_residuals
from lotlib.stats import resampling_weights


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
def test_separability_is_chance_on_one_distribution_and_perfect_on_shifted_ones(
    classifier,
):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(1000, 20)), rng.normal(size=(1000, 20))
    same = separability(A, B, seed=0, classifier=classifier)
    shifted = separability(A, B + 8.0 * np.eye(20)[0], seed=0, classifier=classifier)
    assert (
        abs(same - 0.5) < 0.06
    )  # 600 test samples: the standard error of chance is 0.02
    assert (
        shifted > 0.99
    )  # a shift of 8 sigma: the best boundary errs with probability 3e-5
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
    train, test = split_rows(
        60, 40, 0.7, seed=0
    )  # the sample's split: every row once, stratified
    np.testing.assert_array_equal(np.sort(np.r_[train, test]), np.arange(100))
    assert np.sum(train < 60) == 42 and np.sum(train >= 60) == 28
    draws = [split_rows(60, 40, 0.7, seed=s, resample=True) for s in range(3)]
    for train, test in draws:
        rows = np.r_[train, test]
        assert len(rows) == 100 and np.sum(rows < 60) == 60  # each class keeps its size
        assert (
            len(np.unique(rows)) < 90
        )  # drawn with replacement (about 63 distinct of 100)
        assert not set(train) & set(
            test
        )  # no pseudo-sentence is both fitted and scored
        share = len(np.unique(train[train < 60])) / len(np.unique(rows[rows < 60]))
        assert share == pytest.approx(0.7, abs=0.03)  # of the distinct ones drawn
    assert not np.array_equal(
        np.sort(draws[0][0]), np.sort(draws[1][0])
    )  # repetitions draw different rows
    np.testing.assert_array_equal(
        split_rows(60, 40, 0.7, seed=1, resample=True)[0], draws[1][0]
    )  # seeded


def _stalled_chain(N=200, T=21, D=50, split=10, small=0.01, seed=2):
    """Random walks around a far offset, steps of length ~1 up to layer `split`, `small` after it."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=(N, T - 1, D)) / np.sqrt(D)
    steps[:, split:] *= small
    offset = np.zeros(D)
    offset[0] = 100.0
    return offset + np.concatenate(
        [np.zeros((N, 1, D)), np.cumsum(steps, axis=1)], axis=1
    )


def test_step_measures_match_a_direct_computation():
    X = _stalled_chain(N=5, T=6, D=4)
    for n in range(5):
        for t in range(5):
            step = X[n, t + 1] - X[n, t]
            assert np.isclose(
                relative_steps(X)[n, t], np.linalg.norm(step) / np.linalg.norm(X[n, t])
            )
            if t >= 1:
                prev = X[n, t] - X[n, t - 1]
                cos = step @ prev / np.linalg.norm(step) / np.linalg.norm(prev)
                assert np.isclose(step_cosines(X)[n, t - 1], cos)


def test_straightness_of_lines_and_random_walks():
    line = np.linspace(0, 1, 12)[None, :, None] * np.arange(1, 9)[None, None, :] + 3.0
    np.testing.assert_allclose(straightness(line), 1.0)
    walk = _stalled_chain(N=400, T=101, D=200, small=1.0)
    assert np.mean(straightness(walk)) == pytest.approx(1 / np.sqrt(100), rel=0.1)


def test_step_coherence_of_parallel_and_independent_steps():
    rng = np.random.default_rng(3)
    parallel = np.cumsum(
        np.broadcast_to(rng.normal(size=(1, 5, 30)), (100, 5, 30)), axis=1
    ) + rng.normal(size=(100, 1, 30))
    np.testing.assert_allclose(step_coherence(parallel), 1.0, rtol=1e-5)
    independent = step_coherence(rng.normal(size=(2000, 5, 30)))
    assert np.all(independent < 3 / np.sqrt(2000))


def test_weighted_step_coherence_is_the_coherence_of_the_resampled_pilots():
    X = _stalled_chain(N=40, T=6, D=8, small=1.0) + np.random.default_rng(4).normal(
        size=(40, 6, 8)
    )
    weights = resampling_weights(40, n_boot=3, seed=5)
    rows = step_coherence(X, weights)
    assert rows.shape == (4, 5)
    np.testing.assert_allclose(rows[0], step_coherence(X), rtol=1e-5)
    indices = np.repeat(
        np.arange(40), weights[2].astype(int)
    )  # the pilots of resample 2, with repeats
    np.testing.assert_allclose(rows[2], step_coherence(X[indices]), rtol=1e-5)


def _law_layers(N=4000, T=9, D=6, lam=0.3, last_scale=1.0, seed=4):
    """Independent Gaussian ensembles with variance exp(lam t): Eq. 1 residuals have variance ~ 2 exp(lam (t+tau)),
    a function of the arrival layer (the law holds exactly); the last layer optionally scaled."""
    X = (
        np.random.default_rng(seed).normal(size=(N, T, D))
        * np.exp(0.5 * lam * np.arange(T))[None, :, None]
    )
    X[:, -1] *= last_scale
    return X


def test_structureless_cloud_keeps_the_norm_growth_and_nothing_else():
    X = _law_layers(N=2000, T=4, D=3) + np.arange(3)
    X[:, :, 1] += X[:, :, 0]  # correlated coordinates, and layers that share pilots
    cloud = structureless_cloud(X, seed=1)
    np.testing.assert_allclose(cloud.mean(0), X.mean(0), atol=0.15)
    np.testing.assert_allclose(cloud.std(0), X.std(0), rtol=0.06)
    assert (
        abs(np.corrcoef(cloud[:, 0, 0], cloud[:, 0, 1])[0, 1])
        < 0.1
        < np.corrcoef(X[:, 0, 0], X[:, 0, 1])[0, 1]
    )
    np.testing.assert_array_equal(structureless_cloud(X, seed=1), cloud)


@pytest.fixture(scope="module")
def tiny_llama(tiny_llama_dir):
    model = load_model(str(tiny_llama_dir), device="cpu")
    ids = gibberish(model.view.W_E.shape[0], n_s=30, n_k=6, seed=1).ids
    return model, ids, capture(model, ids, progress=False)


# ----------------------------------------------------------------------------------------------
# the chapters' analyses (C4, C5)


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
    law, gap = compare_noise_laws(
        {"trained": X, "untrained": Y}, weights, n_boot_refit=5
    )
    U, S = ensemble_svd(X)
    residuals = pilot_residuals(X, U, S, progress=False)
    np.testing.assert_allclose(
        law["trained"]["log_var"], residuals.log_mean_var(), rtol=1e-4, equal_nan=True
    )
    np.testing.assert_allclose(
        law["trained"]["log_rel"],
        residuals.log_relative_var(),
        rtol=1e-4,
        equal_nan=True,
    )
    assert gap.value == pytest.approx(
        law["trained"]["relative_arrival_r2"].value
        - law["untrained"]["relative_arrival_r2"].value
    )
    assert len(law["trained"]["arrival_r2_rows"]) == 6 and np.isfinite(
        law["trained"]["kurtosis"].lo
    )
    summary = noise_law_summary(law)
    assert summary["untrained_lambda"] == law["untrained"]["fit"]["lambda"]
    assert "trained_relative_arrival_r2" in summary


def pipeline_layer_separability(
    XA, XB, train_fraction=0.7, seed=0, classifier="perceptron", resample=False
):
    """Test oracle: `layer_separability` as a `StandardScaler` + classifier pipeline fitted layer by layer
    computes it, `(T,)`."""
    from sklearn.linear_model import LogisticRegression, Perceptron
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train, test = split_rows(len(XA), len(XB), train_fraction, seed, resample)
    labels = np.repeat([0, 1], [len(XA), len(XB)])
    accuracy = np.empty(XA.shape[1])
    for t in range(XA.shape[1]):
        features = np.concatenate([XA[:, t], XB[:, t]]).astype(np.float64)
        model = (
            Perceptron(random_state=seed)
            if classifier == "perceptron"
            else LogisticRegression(C=1.0, max_iter=2000)
        )
        accuracy[t] = (
            make_pipeline(StandardScaler(), model)
            .fit(features[train], labels[train])
            .score(features[test], labels[test])
        )
    return accuracy


def test_standardized_equals_standard_scaler_on_every_layer():
    """Mean, population std and constant columns (scaled by 1) as sklearn's, for all layers at once; the
    training rows repeat, as a bootstrap draw's do."""
    from sklearn.preprocessing import StandardScaler

    from lotlib.lines_of_thought.null_tests import standardized

    rng = np.random.default_rng(3)
    X = (
        rng.normal(size=(120, 4, 7)) * rng.uniform(0.01, 100, size=(4, 7))
        + rng.normal(size=(4, 7)) * 1e3
    )
    X[:, 1, 2] = 5.0  # a constant column
    X[:, 2, 3] = 1e6 + 1e-9 * rng.normal(
        size=120
    )  # constant to sklearn's test, not exactly
    train = rng.integers(0, 120, size=90)
    ours = standardized(X.copy(), train)
    for t in range(4):
        expected = StandardScaler().fit(X[train, t]).transform(X[:, t])
        np.testing.assert_allclose(ours[:, t], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ours[:, 1, 2], 0.0)
    assert (
        StandardScaler().fit(X[train, 2]).scale_[3] == 1.0
    )  # the near-constant column is only centered
    assert np.abs(ours[:, 2, 3]).max() < 1e-8


@pytest.mark.parametrize("classifier", ["perceptron", "logistic"])
@pytest.mark.parametrize("resample", [False, True])
def test_layer_separability_equals_the_pipeline_layer_by_layer(
    classifier, resample, monkeypatch
):
    """The accuracy of every layer as a scaler + classifier pipeline refitted per layer gives it, with the
    layers standardized one at a time and several at once."""
    from lotlib.lines_of_thought import null_tests

    rng = np.random.default_rng(4)
    XA, XB = (
        rng.normal(size=(150, 5, 12)),
        rng.normal(size=(130, 5, 12)) + 0.2 * np.arange(5)[:, None],
    )
    expected = pipeline_layer_separability(
        XA, XB, seed=2, classifier=classifier, resample=resample
    )
    for at_once in (
        1,
        2 * 280 * 12,
        10**9,
    ):  # one layer, two layers, all five per chunk
        monkeypatch.setattr(null_tests, "STANDARDIZED_AT_ONCE", at_once)
        ours = layer_separability(
            XA, XB, seed=2, classifier=classifier, progress=False, resample=resample
        )
        np.testing.assert_array_equal(ours, expected)


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A fresh lotlib cache folder for this test; returns a function that switches to another fresh one."""
    folders = iter(range(100))

    def fresh():
        monkeypatch.setenv("LOTLIB_CACHE_DIR", str(tmp_path / f"cache-{next(folders)}"))

    fresh()
    return fresh


def _counting(monkeypatch, module, name: str) -> list:
    """Replace `module.name` by a wrapper that records each call; returns the list of calls."""
    calls, original = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_pair_of_ensembles_is_fitted_once_per_content(empty_cache, monkeypatch):
    """A pair seen before (in the same call, as a null book's two untrained pairs, or in an earlier call, as the
    model book's untrained pair) is read back; its values are those of the fits themselves."""
    from lotlib.lines_of_thought import null_tests

    rng = np.random.default_rng(7)
    A, B, C = (rng.normal(size=(60, 3, 4)) + shift for shift in (0.0, 0.8, 0.0))
    pairs = {"x": (A, B), "halves": (A, C), "same as x": (A.copy(), B.copy())}
    fits = _counting(monkeypatch, null_tests, "layer_separability")
    sep = null_tests.separability_by_split(
        pairs, [0, 1], n_boot=2, seed=3, progress=False
    )
    assert len(fits) == 2 * 4  # two distinct pairs, four jobs each
    jobs = [(0, False), (1, False), (3, True), (4, True)]
    oracle = np.array(
        [
            layer_separability(A, B, 0.7, s, "perceptron", False, resample)
            for s, resample in jobs
        ]
    )
    for name in ("x", "same as x"):
        np.testing.assert_array_equal(
            np.r_[sep.accuracy[name], sep.resampled[name]], oracle
        )
    fits.clear()
    again = null_tests.separability_by_split(
        pairs, [0, 1], n_boot=2, seed=3, progress=False
    )
    assert fits == []
    for name in pairs:
        np.testing.assert_array_equal(again.accuracy[name], sep.accuracy[name])
        np.testing.assert_array_equal(again.resampled[name], sep.resampled[name])
    B[0, 1, 2] += 1e-9  # one value of one pilot
    null_tests.separability_by_split(
        {"x": (A, B)}, [0, 1], n_boot=2, seed=3, progress=False
    )
    null_tests.separability_by_split(
        {"x": pairs["x"]},
        [0, 1],
        n_boot=2,
        seed=3,
        progress=False,
        classifier="logistic",
    )
    assert len(fits) == 2 * 4


def test_a_residual_law_is_refitted_once_per_content(empty_cache, monkeypatch):
    """A null book's "trained" and "untrained" columns are one model: their residual laws are refitted once, and
    equal a refit in an empty cache."""
    from lotlib.lines_of_thought import null_tests

    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(40, 5, 4)), axis=1).astype(np.float32) + 3
    weights = resampling_weights(40, 6, seed=0)
    refits = _counting(monkeypatch, null_tests, "refitted_pairs")
    law, gap = compare_noise_laws(
        {"trained": X, "untrained": X.copy()}, weights, n_boot_refit=3
    )
    assert len(refits) == 1 and gap.value == 0.0
    empty_cache()
    alone = null_tests.residual_law(X, weights, n_boot_refit=3)
    assert len(refits) == 2
    for name in ("trained", "untrained"):
        assert (
            law[name]["kurtosis"] == alone["kurtosis"]
            and law[name]["fit"] == alone["fit"]
        )
        np.testing.assert_array_equal(
            law[name]["arrival_r2_rows"], alone["arrival_r2_rows"]
        )
        np.testing.assert_array_equal(law[name]["log_var"], alone["log_var"])
    null_tests.residual_law(X, weights, n_boot_refit=3)
    null_tests.residual_law(
        X, weights, n_boot_refit=4
    )  # one more resample: another key
    assert len(refits) == 3


def test_a_residual_law_read_back_keeps_the_rank_of_every_later_resumable_loop(
    empty_cache, monkeypatch, tmp_path
):
    """A law read back still takes its resumable loop, so that in a resumed run the next law's checkpoints are
    its own, not those of the law before it."""
    from lotlib.lines_of_thought.null_tests import residual_law
    from lotlib.storage import checkpoints

    rng = np.random.default_rng(1)
    X = np.cumsum(rng.normal(size=(30, 5, 4)), axis=1).astype(np.float32) + 3
    weights = resampling_weights(30, 4, seed=0)
    residual_law(X, weights, n_boot_refit=2)  # kept in the cache
    monkeypatch.setenv(checkpoints.CHECKPOINT_VARIABLE, str(tmp_path / "checkpoints"))
    rank = next(checkpoints._loops)
    compare_noise_laws({"read back": X, "new": X + 1}, weights, n_boot_refit=2)
    (folder,) = (tmp_path / "checkpoints").iterdir()  # only the new law's refits ran
    assert (
        folder.name.startswith(f"{rank + 2:03d}-") and len(list(folder.iterdir())) == 3
    )


def test_path_shapes_are_measured_once_per_content(empty_cache, monkeypatch):
    from lotlib.lines_of_thought import null_tests

    rng = np.random.default_rng(2)
    X = np.cumsum(rng.normal(size=(30, 6, 5)), axis=1).astype(np.float32)
    weights, pilots = resampling_weights(30, 20, seed=0), np.arange(0, 30, 3)
    coherences = _counting(monkeypatch, null_tests, "step_coherence")
    shapes = null_tests.path_shapes({"trained": X, "untrained": X}, pilots, weights)
    assert len(coherences) == 1
    empty_cache()
    alone = null_tests.path_shapes({"untrained": X.copy()}, pilots, weights)
    assert len(coherences) == 2
    np.testing.assert_array_equal(shapes.views["trained"], last_layer_view(X, pilots))
    for name in ("trained", "untrained"):
        for field in ("straight", "views", "straight_3d", "coherence"):
            np.testing.assert_array_equal(
                getattr(shapes, field)[name], getattr(alone, field)["untrained"]
            )
        assert shapes.straightness[name] == alone.straightness["untrained"]
        assert shapes.step_coherence[name] == alone.step_coherence["untrained"]
