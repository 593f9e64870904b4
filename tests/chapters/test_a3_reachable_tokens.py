"""Tests of `lotlib.chapters.a3_reachable_tokens`: the study's win test and its summary."""
import pandas as pd
import pytest
from transformers import AutoTokenizer

from lotlib import load_model
from lotlib.chapters.a3_reachable_tokens import reachability_study
from lotlib.traveling_words import reachability


def test_reachability_study_shares_and_their_difference(tiny_llama_dir):
    model = load_model(str(tiny_llama_dir))
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    study = reachability_study(model.view, tokenizer, k=2, n_tokens=30, tail=0.05, n_boot=50)
    drawn = reachability.win_shares(model.view, study.scores["max logit"], 30, share=0.05, seed=0)
    pd.testing.assert_frame_equal(study.drawn, drawn)
    wins = drawn.groupby("end")["wins"].mean()
    assert study.shares["top"].value == pytest.approx(wins["top"])
    assert study.advantage.value == pytest.approx(wins["top"] - wins["bottom"])
    assert study.advantage.lo <= study.advantage.value <= study.advantage.hi
    assert study.bottom_wins == int((study.check.loc[study.check["end"] == "bottom", "rank at x̂*"] == 0).sum())
    values = study.summary(model.view)
    assert values["vocab_size"] == model.view.vocab_size and values["max_logit_vs_model_gap"].value < 1e-3
    assert values["spearman_norm_vs_gamma_norm"].value == pytest.approx(study.rho.loc["||e||", "||gamma*e||"])
    assert values["top_max logit"] == study.extremes["top"]["max logit"].tolist()
    for end in ("top", "bottom"):
        for n in study.scores:
            assert values[f"{end}_{n}"] == study.extremes[end][n].tolist()
