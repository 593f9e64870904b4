"""Tests of `lotlib.chapters.a1_geometry`: the drawing on real states and its 3-D panels."""
import numpy as np
import pytest
import torch

from lotlib import capture
from lotlib.chapters import a1_geometry as a1
from lotlib.models.view import Norm
from lotlib.traveling_words import norms as geometry
from tests.traveling_words.test_norms import _randomized, _states


def test_norm_geometry_draws_real_states_and_its_identities_hold(tiny_llama_dir):
    model = _randomized(tiny_llama_dir)
    ids = np.random.default_rng(0).integers(0, 200, size=(2, 6))
    geo = a1.norm_geometry(model, ids, block=1, min_gamma_ratio=1.5, first=1)
    X = capture(model, ids, all_positions=True, progress=False)[:, 1:, 1, :].reshape(-1, model.view.d_model)
    np.testing.assert_allclose(geo.states, X[:, geo.coords])
    forms = geometry.qk_forms(model.view, 1)
    assert geo.head == int(geo.heads["share of the form"].to_numpy().argmax()) and len(geo.heads) == len(forms)
    assert geo.share_2d == pytest.approx(geometry.block_share(forms[geo.head], geo.coords[:2]))
    torch.testing.assert_close(geo.W_QK, model.view.heads(1).W_QK(geo.head)[geo.coords[:2]][:, geo.coords[:2]].double())
    assert geo.checks["circle_eps_gap"] < 1e-5 and geo.checks["ellipse_residual"] < 1e-5
    assert geo.checks["ln_max_abs_cos_ones"] < 1e-6 and geo.checks["ln_gamma_plane_residual"] < 1e-4
    assert 0 < geo.checks["radius_3d_max"] <= 3**0.5 + 1e-6
    assert geo.determinant == pytest.approx(float(np.linalg.det(geo.W_QK.numpy())))
    np.testing.assert_allclose(geo.singular_values, np.linalg.svd(geo.W_QK.numpy(), compute_uv=False))
    values = geo.summary()
    assert values["n_states"] == len(X) and values["coords"] == geo.coords
    assert values["circle_eps_gap"].value == geo.checks["circle_eps_gap"] and values["circle_eps_gap"].n == len(X)
    forced = a1.norm_geometry(model, ids, block=1, head=0, coords=[2, 0, 5], first=1)
    assert forced.head == 0 and forced.coords == [2, 0, 5]


def test_sphere_panels_name_the_model_norm_and_transform_the_points():
    P = _states(3).float()
    norm = Norm("rms", torch.tensor([2.0, -0.5, 1.0, 3.0]), None, 1e-6)
    panels, plane = a1.sphere_panels(P, norm, [0, 1, 2])
    (ln_name, ln), (rms_name, rms) = panels.items()
    assert "illustration" in ln_name and "model's norm" in rms_name and plane == {ln_name: True, rms_name: False}
    small = norm.restrict([0, 1, 2])
    np.testing.assert_allclose(rms["then × γ"], small(P).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ln["centered and scaled"], small.with_kind("layer").normalize(P).numpy(), rtol=1e-6)
