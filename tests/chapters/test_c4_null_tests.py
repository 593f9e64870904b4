"""Tests of `lotlib.chapters.c4_null_tests`."""

import numpy as np
import pytest

from lotlib import load_model
from lotlib.chapters.c4_null_tests import (
    PAPER_ARCH_KEYS,
    PaperNullSample,
    architecture_null,
    reinit_stalling,
    separability_summary,
    shapes_summary,
    stalling,
    stalling_table,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.null_tests import (
    arrival_r2_gap,
    compare_noise_laws,
    last_layer_view,
    path_shapes,
    refitted_pairs,
    residual_law,
    separability_by_split,
    split_rows,
    straightness,
)
from lotlib.lines_of_thought.residuals import (
    pair_mask,
    pair_statistics,
    resampled_pairs,
    singular_coordinates,
)
from lotlib.stats import Estimate, resampling_weights
from tests.lines_of_thought.test_null_tests import (
    _law_layers,
    _stalled_chain,
    separability,
)


def test_separability_interval_contains_chance_on_one_distribution_and_widens_on_a_smaller_sample():
    rng = np.random.default_rng(5)
    same = {
        "same": (rng.normal(size=(300, 2, 6)), rng.normal(size=(300, 2, 6)))
    }  # t = 0 and one block
    chance = separability_by_split(
        same, range(3), n_boot=60, progress=False
    ).min_over_blocks()["same"]
    assert (
        chance.lo < 0.5 < chance.hi
        and chance.n == 600
        and chance.unit == "pseudo-sentences"
    )
    width = {}
    for n in (400, 100):
        A, B = rng.normal(size=(n, 2, 6)), rng.normal(size=(n, 2, 6))
        B[:, :, 0] += 1.7  # accuracy about Phi(0.85) = 0.8
        sep = separability_by_split(
            {"shifted": (A, B)}, range(3), n_boot=60, progress=False
        )
        estimate = sep.min_over_blocks()["shifted"]
        assert (
            0.6 < estimate.value < 0.9
        )  # a perceptron falls short of the best boundary
        width[n] = estimate.hi - estimate.lo
        assert sep.resampled["shifted"].shape == (60, 2) and sep.accuracy[
            "shifted"
        ].shape == (3, 2)
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
        model = Perceptron(random_state=3 + r).fit(
            scaler.transform(features[train]), labels[train]
        )
        assert sep.resampled["p"][r, 2] == model.score(
            scaler.transform(features[test]), labels[test]
        )
    assert sep.accuracy["p"][0, 2] == separability(A[:, 2], B[:, 2], seed=0)


def test_stalling_on_a_synthetic_stalled_chain():
    result = stalling(_stalled_chain(split=10, small=0.01), split=10)
    assert result["step_ratio"] == pytest.approx(0.01, rel=0.1)
    assert result["step_before"] == pytest.approx(
        0.01, rel=0.1
    )  # steps ~1 on states of norm ~100
    assert (
        abs(result["cos_before"]) < 0.05 and abs(result["cos_after"]) < 0.05
    )  # random walks turn at random
    no_stall = stalling(_stalled_chain(split=10, small=1.0), split=10)
    assert no_stall["step_ratio"] == pytest.approx(1.0, rel=0.1)
    line = (
        np.linspace(0, 1, 12)[None, :, None] * np.ones((3, 1, 8)) + 1.0
    )  # straight paths
    assert stalling(line, split=5)["cos_before"] == pytest.approx(1.0)
    assert np.isnan(
        stalling(line, split=2)["cos_before"]
    )  # one step before the split: no pair of steps


def test_separability_by_split_summarizes_each_pair():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(200, 3, 8)), rng.normal(size=(200, 3, 8))
    B[:, 1:, 0] += 8.0  # separable from layer 1 on, not at the embedding
    sep = separability_by_split(
        {"shifted": (A, B), "same": (A, rng.normal(size=(200, 3, 8))), "u": (A, B)},
        [0, 1],
        n_boot=4,
        progress=False,
    )
    assert sep.accuracy["shifted"].shape == (2, 3) and len(sep.table()) == 3 * 2 * 3
    summary = separability_summary(sep)
    assert (
        summary["separability_min"].value > 0.95
        and abs(summary["separability_control_min"].value - 0.5) < 0.15
    )
    assert (
        summary["separability_embedding"].value < 0.7
        and summary["separability_min"].n == 400
    )
    assert summary["separability_min"].value == pytest.approx(
        sep.accuracy["shifted"][:, 1:].min(1).mean()
    )
    np.testing.assert_array_equal(
        summary["separability_by_layer"], sep.accuracy["shifted"].mean(0)
    )


def test_path_shapes_of_straight_lines_and_their_summary():
    rng = np.random.default_rng(0)
    start, direction = rng.normal(size=(30, 1, 5)), rng.normal(size=(1, 1, 5))
    lines = (start + np.arange(6)[None, :, None] * direction).astype(
        np.float32
    )  # parallel straight lines
    walks = np.cumsum(rng.normal(size=(30, 6, 5)), axis=1).astype(np.float32)
    weights = resampling_weights(30, 20, seed=0)
    shapes = path_shapes({"trained": lines, "untrained": walks}, np.arange(10), weights)
    summary = shapes_summary(shapes)
    assert summary["trained_straightness"].value == pytest.approx(1.0)
    assert summary["trained_step_coherence"].value == pytest.approx(1.0, abs=1e-5)
    assert summary["untrained_straightness"].value < 0.9
    np.testing.assert_allclose(shapes.straight["untrained"], straightness(walks[:, 1:]))
    assert summary["straightness_random_walk"].value == pytest.approx(
        1 / 2
    )  # L - 1 = 4 steps


def test_last_layer_view_projects_on_the_last_layers_top_directions():
    X = np.random.default_rng(0).normal(size=(40, 4, 6)).astype(np.float32)
    P = last_layer_view(X, np.arange(5))
    U, _ = ensemble_svd(X[:, -1:])
    assert P.shape == (5, 3, 3)
    np.testing.assert_allclose(
        P[:, -1], X[:5, -1].astype(np.float64) @ U[0][:, :3], rtol=1e-6
    )


def test_reinit_stalling_divides_by_the_reference_and_averages_over_seeds():
    X = np.cumsum(np.random.default_rng(0).normal(size=(20, 7, 4)), axis=1)
    stalled = X.copy()
    stalled[:, 4:] = X[:, 3:4] + 0.01 * (stalled[:, 4:] - X[:, 3:4])
    stall = stalling_table(
        {"trained": X, "untrained": X, "a": stalled, "b": stalled}, 3
    )
    assert stall.loc["a", "step_after"] == stalling(stalled, 3)["step_after"]
    out = reinit_stalling(stall)
    assert out["reinit_step_ratio"].value == pytest.approx(
        stall.loc["a", "step_after"] / stall.loc["trained", "step_after"]
    )
    assert out["reinit_step_ratio"].value < 0.1 and out["reinit_step_ratio"].n == 2
    skipped = reinit_stalling(
        stall.loc[["trained", "untrained"]], skipped="not re-initialised"
    )
    assert skipped == dict.fromkeys(
        out, "not re-initialised"
    )  # an untrained model: nothing was re-initialised


@pytest.mark.parametrize(
    "N, D", [(80, 5), (12, 20)]
)  # more pilots than dimensions, and fewer
def test_refitted_pairs_refit_the_bases_on_each_resample(N, D):
    X = _law_layers(N=N, T=5, D=D) ** 3 + 1.0  # heavy tails, an offset
    X[:, 0] = X[
        :1, 0
    ]  # the embedding layer repeats one token: rank 1, as x(0) of real pilots often is
    weights = resampling_weights(N, n_boot=2, seed=1)
    rows = refitted_pairs(X, weights, progress=False)
    mask = pair_mask(5, 1, 4)
    assert rows["trace"].shape == (3, 5, 5) and np.isnan(rows["trace"][:, ~mask]).all()
    for r in range(3):
        drawn = np.repeat(np.arange(N), weights[r].astype(int))
        if (
            N > D
        ):  # an independent refit: the library's SVD of the drawn pilots, repeats included
            U, S = align_bases(*ensemble_svd(X[drawn][:, 1:]))
        else:  # repeats would leave zero singular values: the SVD of the distinct ones, each sqrt(count) times
            distinct = np.flatnonzero(weights[r])
            U, S = align_bases(
                *ensemble_svd(
                    X[distinct][:, 1:] * np.sqrt(weights[r][distinct])[:, None, None]
                )
            )
        stats = pair_statistics(
            singular_coordinates(X[drawn][:, 1:], U), S, np.arange(4), progress=False
        )
        trace = stats.var.sum(-1)
        np.testing.assert_allclose(
            rows["trace"][r, 1:, 1:][mask[1:, 1:]], trace[mask[1:, 1:]], rtol=1e-3
        )
        n = len(
            drawn
        )  # the small-sample correction of the excess kurtosis (MATLAB's kurtosis(x, 0)), written apart
        corrected = ((n + 1) * stats.kurtosis + 6) * (n - 1) / ((n - 2) * (n - 3))
        kurtosis = (stats.var * corrected).sum(-1) / trace
        np.testing.assert_allclose(
            rows["kurtosis"][r, 1:, 1:][mask[1:, 1:]], kurtosis[mask[1:, 1:]], atol=1e-3
        )
        np.testing.assert_allclose(  # layer 0 is one point: a spread of 0 up to rounding
            rows["spread"][r],
            X[drawn].astype(np.float64).var(0).sum(-1),
            rtol=1e-6,
            atol=1e-12,
        )
        assert rows["k"][r] == min(len(np.unique(drawn)), D)
    Ua, Sa = align_bases(*ensemble_svd(X))  # the sample: B4's fixed-basis moments
    fixed = resampled_pairs(
        singular_coordinates(X, Ua), Sa, np.arange(1, 5), weights, progress=False
    )
    np.testing.assert_allclose(rows["trace"][0][mask], fixed.trace[0][mask], rtol=1e-3)
    np.testing.assert_allclose(
        rows["kurtosis"][0][mask], fixed.kurtosis[0][mask], atol=1e-3
    )
    if (
        N < D
    ):  # with fewer pilots than dimensions a resample's bases span only its own pilots
        assert not np.allclose(rows["trace"][1][mask], fixed.trace[1][mask], rtol=1e-2)


def test_separability_gap_is_the_split_by_split_difference_of_minima():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(200, 3, 8)), rng.normal(size=(200, 3, 8))
    B[:, 1:, 0] += 8.0
    pairs = {
        "trained": (A, B),
        "halves": (A, A[::-1]),
        "untrained": (A, rng.normal(size=(200, 3, 8))),
    }
    sep = separability_by_split(pairs, [0, 1, 2], n_boot=10, progress=False)
    lowest = {name: acc[:, 1:].min(1) for name, acc in sep.accuracy.items()}
    gap = separability_summary(sep)["untrained_separability_gap"]
    assert (
        gap.value == pytest.approx(np.mean(lowest["untrained"] - lowest["trained"]))
        and gap.n == 400
    )
    assert gap.hi < 0  # random states separate less than a shift of 8 sigma
    # pairs of the same sizes are resampled on the same rows with the same classifier seeds: paired
    same = separability_by_split(
        {"a": (A, B), "b": (A, B), "c": (A, B)}, [0], n_boot=5, progress=False
    )
    assert same.gap("a", "c") == Estimate(
        0.0, 0.0, 0.0, 400, "pseudo-sentences", "bootstrap (centered)"
    )


def test_residual_law_is_compare_noise_laws_for_one_model():
    rng = np.random.default_rng(0)
    X = np.cumsum(rng.normal(size=(40, 5, 4)), axis=1).astype(np.float32) + 3
    weights = resampling_weights(40, 6, seed=0)
    law, _ = compare_noise_laws({"a": X, "b": X}, weights, n_boot_refit=3)
    alone = residual_law(X, weights, n_boot_refit=3)
    assert alone["kurtosis"] == law["b"]["kurtosis"]
    np.testing.assert_array_equal(alone["arrival_r2_rows"], law["a"]["arrival_r2_rows"])
    assert arrival_r2_gap(alone, law["a"]).value == 0.0


def _tiny_paper_architecture(
    monkeypatch, n_trained: int
) -> tuple[dict, PaperNullSample]:
    """GPT-2 published as 3 blocks of D = 32, a trained model's residual law on `n_trained` random-walk pilots
    (T = 5, D = 4), and the paper-null sample read through the untrained GPT-2 (30 pilots of 8 tokens)."""
    from lotlib.models import sources

    monkeypatch.setitem(
        sources.PUBLISHED, "gpt2", {"n_layer": 3, "n_embd": 32, "n_head": 4}
    )
    rng = np.random.default_rng(0)
    walks = np.cumsum(rng.normal(size=(n_trained, 5, 4)), axis=1).astype(np.float32)
    trained = residual_law(
        walks + 3, resampling_weights(n_trained, 8, seed=0), n_boot_refit=4
    )
    return trained, PaperNullSample(n_k=8, n_s=30, n_pilots=6, n_boot=8)


def test_architecture_null_on_a_tiny_published_architecture(monkeypatch):
    from lotlib import trajectories, walden

    trained, sample = _tiny_paper_architecture(monkeypatch, n_trained=25)
    null = architecture_null("gpt2", trained, sample, device="cpu")
    lm = load_model("untrained:gpt2", seed=0, device="cpu")
    X = trajectories(
        lm, walden(lm.tokenizer, n_k=8, n_s=30), progress=False
    )  # the same seeded draw
    summary = null.summary()
    assert set(summary) == set(PAPER_ARCH_KEYS.values())
    assert (
        summary["n_layers_paper_arch"],
        summary["d_model_paper_arch"],
        summary["n_s_paper_arch"],
    ) == (3, 32, 30)
    assert summary["untrained_straightness_paper_arch"].value == pytest.approx(
        straightness(X[:, 1:]).mean(), rel=1e-5
    )
    assert summary["straightness_random_walk_paper_arch"].value == pytest.approx(
        1 / np.sqrt(2)
    )
    assert summary["untrained_arrival_r2_gap_paper_arch"].value == pytest.approx(
        trained["relative_arrival_r2"].value
        - summary["untrained_relative_arrival_r2_paper_arch"].value
    )
    assert np.isfinite(
        summary["untrained_kurtosis_paper_arch"].lo
    )  # bootstrapped, 4 refits as the trained law
    assert (
        len(null.law["arrival_r2_rows"]) == 5
        and null.shapes.coherence["untrained"].shape[0] == 9
    )
    assert null.view.shape == (6, 3, 3) and list(null.views(0)) == [
        "untrained gpt2 (seed 0), L = 3, D = 32"
    ]
    words = null.words()
    straight = summary["untrained_straightness_paper_arch"]
    walk = summary["straightness_random_walk_paper_arch"].value
    assert words["paper_straight_word"] == (
        "above" if straight.lo > walk else "below" if straight.hi < walk else "across"
    )
    assert set(words) == {
        f"paper_{k}_word" for k in ("straight", "parallel", "kurtosis", "arrival")
    }
    skipped = architecture_null("", trained, sample)
    assert skipped.views(0) == {} and set(skipped.summary().values()) == {None}
    assert set(skipped.words().values()) == {"not measured"}


# ----------------------------------------------------------------------------------------------
# what a model book and its null book compute once


def _values(lm, untrained, corpora, seed: int = 1) -> dict:
    """The chapter's measured values as its page computes them, at tiny sizes, on `corpora` (language,
    gibberish, Walden), with Estimates as their JSON."""
    from lotlib.chapters import c4_null_tests as c4

    language, noise, walden = corpora
    pairs = c4.gibberish_pairs(lm, untrained, language, noise, seed)
    separable = separability_by_split(
        pairs, [seed], n_boot=2, seed=seed, progress=False
    )
    compared = dict(
        zip(("trained", "untrained"), c4.through_both(lm, untrained, walden))
    )
    weights = resampling_weights(30, 10, seed)
    shapes = path_shapes(compared, np.arange(0, 30, 3), weights)
    law, gap = compare_noise_laws(compared, weights, n_boot_refit=3)
    stall = stalling_table(compared, 2)
    results = c4.NullTests(
        separable, shapes, law, gap, stall, c4.ArchitectureNull(name="")
    )
    measured = results.claim_values(
        c4.same_weights(lm, untrained), "untrained itself", "skipped"
    )
    return {
        key: v.to_json() if isinstance(v, Estimate) else v
        for key, v in measured.items()
    }


@pytest.fixture(scope="module")
def books(tiny_gpt2_dir):
    """The models of a model book (the tiny GPT-2 and its untrained draw of seed 1) and of its null book, with
    the corpora both read (language and gibberish of 6 tokens, Walden of 8)."""
    from lotlib import walden
    from lotlib.lines_of_thought.null_tests import language_and_gibberish

    lm = load_model(str(tiny_gpt2_dir), device="cpu")
    null = load_model(f"untrained:{tiny_gpt2_dir}", seed=1, device="cpu")
    corpora = (
        *language_and_gibberish(lm, 6, 40, seed=1),
        walden(lm.tokenizer, n_k=8, n_s=30),
    )
    return {
        "model": (lm, lm.untrained_variant(1), corpora),
        "null": (null, null.untrained_variant(1), corpora),
    }


def test_a_null_book_decides_same_weights_from_its_models_and_reads_each_corpus_once(
    books,
):
    from lotlib.chapters.c4_null_tests import same_weights, through_both

    (lm, untrained, corpora), (null, itself, _) = books["model"], books["null"]
    assert itself is null and same_weights(null, itself)
    assert not same_weights(lm, untrained)
    X, Y = through_both(null, itself, corpora[0])
    assert X is Y
    X, Y = through_both(lm, untrained, corpora[0])
    assert X.shape == Y.shape and not np.array_equal(X, Y)


def test_a_model_book_and_its_null_book_compute_the_untrained_model_once(
    books, tmp_path, monkeypatch
):
    """In one cache, whichever book runs first, the second reads back the untrained model's separability, path
    shapes and residual law (a null book's "trained" is its "untrained"), and every value equals that book's
    run in an empty cache."""
    from lotlib.lines_of_thought import null_tests

    calls = {
        name: [] for name in ("layer_separability", "refitted_pairs", "step_coherence")
    }
    for name, log in calls.items():
        original = getattr(null_tests, name)
        monkeypatch.setattr(
            null_tests,
            name,
            lambda *a, f=original, log=log, **k: log.append(1) or f(*a, **k),
        )
    (
        tmp_path / "trajectories"
    ).mkdir()  # forward passes shared by every cache of the test

    def run(book: str, cache: str) -> tuple[dict, tuple[int, ...]]:
        folder = tmp_path / cache
        if not folder.exists():
            folder.mkdir()
            (folder / "trajectories").symlink_to(tmp_path / "trajectories")
        monkeypatch.setenv("LOTLIB_CACHE_DIR", str(folder))
        for log in calls.values():
            log.clear()
        values = _values(*books[book])
        return values, tuple(len(log) for log in calls.values())

    # fits (3 pairs x 3 jobs), refitted laws, path shapes; a null book's third pair is its first
    alone = {"model": (9, 2, 2), "null": (6, 1, 1)}
    # less the untrained model's pair, law and path shapes
    after = {"model": (6, 1, 1), "null": (3, 0, 0)}
    runs = {}
    for first, second in (("model", "null"), ("null", "model")):
        runs[first] = run(first, f"{first} first")
        runs[second, "after"] = run(second, f"{first} first")
        assert runs[first][1] == alone[first]
        assert runs[second, "after"][1] == after[second]
    for book in ("model", "null"):
        np.testing.assert_equal(runs[book, "after"][0], runs[book][0])
    assert runs["null"][0]["untrained_arrival_r2_gap"] == "untrained itself"


def test_stalling_is_measured_once_per_array(monkeypatch):
    from lotlib.chapters import c4_null_tests as c4

    X = np.cumsum(np.random.default_rng(0).normal(size=(20, 7, 4)), axis=1)
    measured = []
    monkeypatch.setattr(
        c4, "stalling", lambda X, split: measured.append(1) or stalling(X, split)
    )
    table = c4.stalling_table({"trained": X, "untrained": X, "other": X[::-1]}, 3)
    assert len(measured) == 2 and list(table.index) == ["trained", "untrained", "other"]
    assert (table.loc["trained"] == table.loc["untrained"]).all()
    assert table.loc["other"].to_dict() == stalling(X[::-1], 3)


def test_the_paper_architecture_null_is_read_back_by_the_second_book(
    monkeypatch, tmp_path
):
    from lotlib.lines_of_thought import null_tests

    trained, sample = _tiny_paper_architecture(monkeypatch, n_trained=30)
    refits = []
    original = null_tests.refitted_pairs
    monkeypatch.setattr(
        null_tests,
        "refitted_pairs",
        lambda *a, **k: refits.append(1) or original(*a, **k),
    )
    summaries = []
    for cache in ("shared", "shared", "empty"):
        monkeypatch.setenv("LOTLIB_CACHE_DIR", str(tmp_path / cache))
        null = architecture_null("gpt2", trained, sample, device="cpu")
        summaries.append(
            {
                k: v.to_json() if isinstance(v, Estimate) else v
                for k, v in null.summary().items()
            }
        )
        np.testing.assert_array_equal(null.view, null.shapes.views["untrained"])
    assert refits == [1, 1]  # the second book read the first's
    np.testing.assert_equal(summaries[0], summaries[1])
    np.testing.assert_equal(summaries[0], summaries[2])
