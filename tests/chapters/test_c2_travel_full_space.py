"""Tests of `lotlib.chapters.c2_travel_full_space`: the study matches its parts."""
import numpy as np
import pytest

from lotlib import load_model
from lotlib.chapters.c2_travel_full_space import travel_in_full_space
from lotlib.models.corpus import Corpus
from lotlib.traveling_words.travel import shuffled_next, travel_cosines, trip_difference


def test_travel_in_full_space_matches_its_parts(tiny_gpt2_dir):
    model = load_model(str(tiny_gpt2_dir))
    ids = np.random.default_rng(4).integers(0, 50257, size=(12, 7))
    ids[:, 0] = model.tokenizer.bos_token_id
    ids[0, 3] = ids[0, 2]  # one repeated token
    corpus = Corpus("random", ids, prefix=1)
    study = travel_in_full_space(model, corpus, n_sentences=8, seed=2, n_boot=100, batch_size=4)
    chosen = ids[np.sort(np.random.default_rng(2).choice(12, size=8, replace=False))]
    np.testing.assert_array_equal(study.ids, chosen)
    shuffled = shuffled_next(chosen[:, 2:], 2)
    travel = travel_cosines(model, chosen, {"shuffled": shuffled}, first=1, progress=False)["W_E"]
    expected = trip_difference(travel.trip["true"], travel.trip["shuffled"], n_boot=100, seed=2)
    assert study.trip == expected
    summary = study.summary()
    assert summary["n_positions"] == 8 * 5 and summary["n_layers"] == model.view.n_layers
    assert summary["trip_difference"] == expected and summary["inv_sqrt_d"] == 64**-0.5
    assert study.repeat_share() == pytest.approx(np.mean(chosen[:, 2:] == chosen[:, 1:-1]))
    assert len(study.blocks) == model.view.n_layers and study.blocks.index[0] == 1
