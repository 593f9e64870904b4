"""Tests of `lotlib.chapters.a7_traveling_words`: the study's summary and facts read its parts."""
import numpy as np
import pytest

from lotlib import load_model
from lotlib.chapters.a7_traveling_words import traveling_word
from lotlib.traveling_words import umap_map
from tests.traveling_words.test_travel import SENTENCE, _Projection


def test_traveling_word_summary_reads_its_parts(tiny_gpt2_dir, monkeypatch):
    model = load_model(str(tiny_gpt2_dir))
    monkeypatch.setattr(umap_map, "fitted_umap", lambda data, **kw: _Projection(data))
    word = traveling_word(model, SENTENCE, -2, seeds=[3], rows=50)
    summary, L = word.summary(), model.view.n_layers
    assert summary["n_layers"] == L and summary["umap_seeds"] == [3] and summary["umap_rows"] == 50
    assert summary["next_rank_last_layer"].value == word.lens.ranks[L]
    assert summary["neighbour_logit_agreement_min"] == word.maps.agreement.min()
    assert word.facts()["arrives_word"] == ("is" if word.lens.ranks[L] == 0 else "is not")
    shortest = np.linalg.norm(word.path.normed, axis=1).min()
    assert word.facts()["length_ratio"] == pytest.approx(shortest / np.median(word.maps.row_norms))
    top1 = word.lens.first_top1
    assert word.facts()["top1_text"] == ("at no layer" if top1 is None else f"at layer {top1}")
    with pytest.raises(ValueError, match="seed"):
        traveling_word(model, SENTENCE, -2, seeds=[])
