"""Tests of `lotlib.chapters.a2_normalization`: the checks of each section, the study's summary, the figures."""
import numpy as np
import pytest

from lotlib.chapters import a2_normalization as a2
from lotlib.traveling_words import norms as geometry
from tests.traveling_words.test_norms import _randomized


def test_sqrt_d_checks_residual_growth_and_hyperplane_on_synthetic_statistics():
    d, rng = 16, np.random.default_rng(0)
    residual = np.ones((4, 5, 3)) * np.array([1.0, 2.0, 8.0])  # every sentence grows 8-fold
    residual[:, 0] *= 10  # the first position stands apart
    growth = a2.residual_growth(residual, n_boot=50)
    assert growth["factor"].value == pytest.approx(8.0) and growth["factor"].lo == pytest.approx(8.0)
    assert growth["increases"] == 2 and growth["first_median"].tolist() == [10.0, 20.0, 80.0]
    normalized = np.full((4, 5, 3), d**0.5)
    normalized[1, 2, 0] -= 0.25
    stats = {"d": d, "normalized": normalized, "predicted": normalized + 1e-7,
             "cos_ones": rng.uniform(-0.3, 0.3, (4, 5, 3)), "cos_ones_normalized": np.zeros((4, 5, 3))}
    checks = a2.sqrt_d_checks(stats)
    assert checks["largest_gap"] == pytest.approx(0.25) and checks["t_gap"] == 0
    assert checks["worst"] == pytest.approx(1e-7) and checks["min"] == pytest.approx(d**0.5 - 0.25)
    plane = a2.hyperplane_distance(stats, n_boot=50)
    assert plane["hat_max"] == 0.0
    np.testing.assert_allclose(plane["mean_abs_cos"], np.abs(stats["cos_ones"]).mean((0, 1)))
    expected = np.abs(stats["cos_ones"]).mean() / geometry.random_cos_to_ones(d)
    assert plane["over_random"].value == pytest.approx(expected) and plane["over_random"].lo <= expected


@pytest.mark.parametrize("folder", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_normalization_study_summary_holds_the_chapter_values(folder, request):
    model = _randomized(request.getfixturevalue(folder))
    ids = np.random.default_rng(0).integers(0, 200, size=(3, 6))
    study = a2.normalization_study(model, ids, first=0, n_boot=20)
    values = study.summary()
    L = model.view.n_layers
    assert values["n_states_per_layer"] == 18 and len(values["mean_abs_cos_ones_by_layer"]) == L + 1
    assert values["centers"] == (model.view.final_norm.kind == "layer")
    assert values["table_identity_violation"].value < 1e-5
    assert values["max_rel_measured_minus_eps_formula"].value < 1e-5
    assert study.table_of_embeddings().shape == (8, 4) and study.identities().shape == (4, 2)


def test_the_figures_draw_from_synthetic_results():
    import matplotlib

    matplotlib.use("Agg")

    rng = np.random.default_rng(0)
    d, shape = 16, (3, 4, 5)
    residual = rng.uniform(1, 10, shape)
    stats = {"d": d, "residual": residual, "normalized": np.full(shape, d**0.5), "predicted": np.full(shape, d**0.5),
             "cos_ones": rng.uniform(-0.3, 0.3, shape), "cos_ones_normalized": np.zeros(shape)}
    for fig in (
        a2.sqrt_d_gaps(geometry.norm_table(stats), d, "toy"),
        a2.residual_norms(residual, d, "toy"),
        a2.hyperplane_figure(stats, [0, 4], n_boot=10),
    ):
        assert len(fig.axes) >= 1
        matplotlib.pyplot.close(fig)
