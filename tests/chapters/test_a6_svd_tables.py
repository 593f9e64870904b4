"""Tests of `lotlib.chapters.a6_svd_tables`: the chapter's values read the tables, spectra and gaps."""
import numpy as np
import pytest

from lotlib.chapters.a6_svd_tables import svd_values
from lotlib.traveling_words import head_svd as HS
from lotlib.traveling_words import vocabulary as Voc
from tests.traveling_words.test_probes import model, tiny_gemma_dir  # noqa: F401


def test_svd_values_read_the_tables_spectra_and_gaps(model):  # noqa: F811
    v = model.view
    layers, dh, d = [0, 1], v.d_head, v.d_model
    spec = HS.spectra(v, layers)
    gaps = HS.null_space_check(v, layers)
    vocab = Voc.vocab_strings(model.tokenizer, v.W_E.shape[0])
    tables = HS.svd_tables(v, vocab, layers, n_dirs=3, k=2)
    values = svd_values(tables, spec, gaps, dh, n_boot=50, seed=0)
    assert values["null_space_verified"] and values["max_numerical_rank"] == dh
    assert values["null_space_dim"] == d - dh and values["max_gap_after_d_head"].value < 1e-6
    r99 = np.concatenate([spec.rank_at(0.99, layer, "qk") for layer in layers])
    assert values["qk_rank99_over_d_head"].value == pytest.approx(np.median(r99) / dh)
    shared = tables[(tables.block == 1) & (tables.matrix == "VO")]["shared"].mean()
    assert values["vo_shared_last"].value == pytest.approx(shared)
