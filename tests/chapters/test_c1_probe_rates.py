"""Tests of `lotlib.chapters.c1_probe_rates`: the rates by block, their curves and estimates."""
import numpy as np
import pytest
import torch

from lotlib.chapters.c1_probe_rates import probe_rates_by_block
from lotlib.traveling_words import probes as P
from tests.traveling_words.test_probes import K, _perturbed


def test_probe_rates_by_block_curves_and_estimates(tiny_gpt2_dir, queries):
    v = _perturbed(tiny_gpt2_dir).view
    layers = [0, 1]
    result = probe_rates_by_block(v, queries, layers, K)
    n, H = queries.n, v.n_heads
    rates = P.probe_rates(v, layers, queries.ids, queries.mask, K)
    np.testing.assert_array_equal(result.rates["qk"], rates["qk"])
    np.testing.assert_allclose(result.curve("vo"), rates["vo"][:, :H, :n].mean((1, 2)))
    e = v.embed(queries.nouns.ids).norm(dim=-1).mean()
    write = [P.update_norms(v, layer, queries.nouns.ids)[:H].mean() / e for layer in layers]
    np.testing.assert_allclose(result.write, torch.stack(write).numpy(), rtol=1e-5)
    assert result.thirds == (slice(0, 1), slice(1, None))
    table = result.curve_table()
    assert table.loc["update alone", "random words, mean"] == pytest.approx(rates["vo_update"][:, :H, n:].mean())
    assert table.loc["sum over heads, with residual", "nouns, first block"] == pytest.approx(rates["vo"][0, H, :n].mean())
    assert result.heads_above(0.2).loc["query-key", 1] == (rates["qk"][1, :, :n].mean(1) >= 0.2).sum()
    values = result.estimates(v.n_layers, n_boot=50, seed=0)
    early_minus_late = rates["qk"][0, :, :n].mean(0) - rates["qk"][1, :, :n].mean(0)
    assert values["qk_early_minus_late"].value == pytest.approx(early_minus_late.mean())
    assert values["write_over_embedding_first"] == result.write[0]
    assert len(result.curves()) == 3 * len(layers) * (n + 4)
