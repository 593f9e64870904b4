"""Tests of `lotlib.chapters.b5_langevin`."""

import numpy as np
import pytest

from lotlib.chapters.b5_langevin import (
    fit_summary,
    fokker_planck_values,
    residual_shares,
    scheme_variant_values,
    scheme_variants,
    top_share,
    variance_ratio_values,
)
from lotlib.lines_of_thought.extrapolation import extrapolate
from lotlib.lines_of_thought.langevin import propagators
from lotlib.lines_of_thought.langevin_held_out import (
    FP_STATS,
    LangevinProtocol,
    fokker_planck,
    held_out_langevin,
    noiseless_map,
)
from tests.lines_of_thought.test_langevin_held_out import _walks


def test_fokker_planck_and_variants_agree_with_an_independent_computation():
    sde = held_out_langevin(_walks(), LangevinProtocol(2, seed=0))
    fp = fokker_planck(sde, 20, seed=0)
    Z = sde.truth[:, 0] @ propagators(sde.plan)[-1].T
    ratio = np.sum(Z.var(0)) / np.sum(sde.truth[:, -1].var(0))
    assert fp.last["noiseless drift"][FP_STATS[2]].value == pytest.approx(ratio)
    # the layer table: every model at every layer, its last layer the values the intervals are about
    assert (
        list(fp.by_layer.columns) == ["layer t", "model", *FP_STATS]
        and len(fp.by_layer) == 3 * 2
    )
    last_row = fp.by_layer.set_index(["model", "layer t"]).loc[
        ("noiseless drift", sde.t0 + 2)
    ]
    assert last_row[FP_STATS[2]] == pytest.approx(ratio)
    assert [fp.last["noiseless drift"][k].method for k in FP_STATS] == [
        "bootstrap",
        "jackknife",
        "jackknife",
    ]
    variants = scheme_variants(sde)
    langevin = f"Langevin (noise {sde.noise})"
    assert variants.loc[("euler", "ln sigma"), FP_STATS[2]] == pytest.approx(
        fp.last[langevin][FP_STATS[2]].value
    )
    found = fokker_planck_values(fp, langevin)
    assert found["fp_cov_distance_last"] is fp.last[langevin][FP_STATS[1]]
    assert (
        found["fp_cov_distance_noiseless_last"]
        is fp.last["noiseless drift"][FP_STATS[1]]
    )
    ratios = scheme_variant_values(variants)
    assert list(ratios) == [
        "variance_ratio_euler_sigma",
        "variance_ratio_euler_log",
        "variance_ratio_exact_sigma",
        "variance_ratio_exact_log",
    ]
    assert (
        ratios["variance_ratio_exact_sigma"]
        == variants.loc[("exact", "sigma"), FP_STATS[2]]
    )


def test_variance_ratio_values_read_the_predictions_in_their_order():
    ratios = {
        name: {"u1..u4": f"{name} top", "all D": f"{name} all"}
        for name in ("chosen", "other", "constant", "noiseless")
    }
    assert variance_ratio_values(ratios) == {
        "variance_ratio_top4_langevin_last": "chosen top",
        "variance_ratio_all_langevin_last": "chosen all",
        "variance_ratio_all_other_noise_last": "other all",
        "variance_ratio_all_linear_last": "noiseless all",
    }


def test_residual_shares_and_noiseless_map_follow_eq1():
    sde = held_out_langevin(_walks(), LangevinProtocol(2, seed=0))
    shares = residual_shares(sde)
    assert list(shares.columns) == ["fitted", "held out"] and len(shares) == 2
    eq1 = extrapolate(sde.X[sde.held], sde.U, sde.S, sde.t0, 1)
    np.testing.assert_allclose(noiseless_map(sde)[:, 1], eq1)
    w = sde.X[sde.held, sde.t0 + 1] - eq1
    tc, wc = eq1 - eq1.mean(0), w - w.mean(0)
    assert shares["held out"].iloc[0] == pytest.approx(np.sum(tc * wc) / np.sum(wc**2))


def test_fit_summary_and_the_top_share_of_the_held_out_truth():
    sde = held_out_langevin(_walks(), LangevinProtocol(2, seed=1))
    assert fit_summary(sde)["n_fitted"] == 60
    # the top share against the held-out truth's eigen-decomposition: at most its top 4
    true = sde.truth[:, -1]
    eigen = np.sort(np.linalg.eigvalsh(np.cov(true.T, bias=True)))[::-1]
    assert 0 < top_share(sde, 4) <= eigen[:4].sum() / eigen.sum() + 1e-12
    assert top_share(sde, sde.D) == pytest.approx(1.0)
