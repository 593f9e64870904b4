"""Tests of `lotlib.chapters.a4_a5_noun_probes`: the study against the probes one by one."""
import numpy as np
import pytest

from lotlib import load_model
from lotlib.chapters.a4_a5_noun_probes import noun_probes
from lotlib.traveling_words import probes as P
from tests.traveling_words.test_probes import K


def test_noun_probes_against_the_probes_one_by_one(tiny_llama_dir, queries):
    v = load_model(str(tiny_llama_dir)).view
    layers = [0, v.n_layers - 1]
    result = noun_probes(v, queries, layers, K)
    n, H = queries.n, v.n_heads
    rates = P.probe_rates(v, layers, queries.ids, queries.mask, K)
    for name in ("qk", "vo", "vo_update"):
        np.testing.assert_array_equal(result.rates[name], rates[name])
    _, top = P.qk_top(v, layers[-1], queries.ids[n:], K)
    np.testing.assert_allclose(result.specificity["random words"][-1],
                               P.key_specificity(v, layers[-1], queries.ids[n:], top))
    assert set(result.table.noun) == set(queries.nouns.words)
    measures = result.measure_means()
    assert measures.loc[("QK variant rate", "nouns"), layers[0]] == pytest.approx(rates["qk"][0, :, :n].mean())
    assert result.readable(layers[0], ["water", "zxqv"]).shape == (H + 1, 4)  # zxqv is no query
    assert result.wide("VO").shape == (len(layers) * n, H + 1)
    block, head = result.best_vo_update_head()
    per_head = rates["vo_update"][:, :H, :n].mean(-1)
    assert per_head[layers.index(block), head] == per_head.max()
    qk = result.table[(result.table.probe == "QK") & (result.table.block == layers[0])]
    share = qk.groupby("head")["top1"].agg(lambda s: s.value_counts(normalize=True).iloc[0]).mean()
    assert result.common_key_share()[layers[0]] == pytest.approx(share)
    values = result.estimates(n_boot=50, seed=1)
    assert values["qk_specificity_last"] == P.query_estimate(result.specificity["nouns"][-1], n_boot=50, seed=1)
    assert values["vo_update_best_head_rate_random"].unit == "random words"
    assert values["vo_update_best_head_rate"].value == pytest.approx(per_head.max())
