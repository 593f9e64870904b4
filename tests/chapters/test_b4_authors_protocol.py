"""Tests of `lotlib.chapters.b4_authors_protocol`."""

from types import SimpleNamespace

import matplotlib
import numpy as np

from lotlib.chapters.b4_authors_protocol import authors_heatmaps
from lotlib.lines_of_thought.residuals import PairLayers, pair_frame

matplotlib.use("Agg")


def test_the_authors_heatmaps_draw_the_papers_three_panels_on_its_scales(monkeypatch):
    """One row per ensemble, three panels (mean abs z, log10 mean variance, mean abs kurtosis - 3), each the
    sample's `(T, T)` pair statistic as `pair_frame` lays it out, on Fig. 4's colour scales."""
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda: None)
    L = 6
    layers = PairLayers.of(L, "test")
    rng = np.random.default_rng(0)
    pairs = {name: SimpleNamespace(**{a: rng.uniform(1.0, 4.0, size=(3, L + 1, L + 1))
                                      for a in ("mean_abs_z", "mean_var", "mean_abs_kurtosis")})
             for name in ("model", "cloud")}
    authors_heatmaps(pairs, layers, "test")
    axes = plt.gcf().axes
    heatmaps = [ax for ax in axes if ax.collections and ax.get_title()]
    assert [ax.get_title() for ax in heatmaps] == [
        f"{label}, {name}" for name in pairs for label in ("⟨|μ/σ|⟩", "log10 ⟨σ²⟩", "⟨|κ|⟩ − 3")]
    mesh = heatmaps[1].collections[0]  # the model's variance: log10 of the sample's row (row 0), not a resample's
    expected = pair_frame(np.log10(pairs["model"].mean_var[0]), layers).to_numpy()
    np.testing.assert_allclose(np.ma.filled(mesh.get_array(), np.nan).ravel(), expected.ravel(), equal_nan=True)
    assert heatmaps[0].collections[0].get_clim() == (0.0, 0.5)  # the paper's scales
    assert heatmaps[2].collections[0].get_clim() == (0.0, 0.8)
    plt.close("all")
