"""A3 end to end: the beta gap, the check at the best state, and the study's win test."""

import numpy as np
import pandas as pd
import pytest
from transformers import AutoTokenizer

from lotlib import load_model
from lotlib.traveling_words import reachability


def test_beta_score_gap_is_the_largest_beta_term():
    scores = pd.DataFrame({name: np.arange(4.0) for name in reachability.SCORES})
    assert reachability.beta_score_gap(scores) == 0.0
    scores["||gamma*e|| + beta.e"] += [0.0, -0.5, 0.25, 0.0]
    assert reachability.beta_score_gap(scores) == 0.5


@pytest.mark.parametrize("folder", ["tiny_gpt2_dir", "tiny_llama_dir"])
def test_best_state_check_lists_both_ends_at_their_best_state(folder, request):
    path = request.getfixturevalue(folder)
    model, tokenizer = load_model(str(path)), AutoTokenizer.from_pretrained(path)
    best = reachability.reachability_scores(model.view)["max logit"]
    check = reachability.best_state_check(model.view, best, tokenizer, k=3)
    top, bottom = best.nlargest(3), best.nsmallest(3)
    assert check["end"].tolist() == ["top"] * 3 + ["bottom"] * 3
    np.testing.assert_allclose(check["max logit"], np.r_[top.to_numpy(), bottom.to_numpy()])
    ranks, _ = reachability.rank_at_best_state(model.view, list(top.index) + list(bottom.index))
    np.testing.assert_array_equal(check["rank at x̂*"], ranks)
    np.testing.assert_allclose(check["logit at x̂*"], check["max logit"], rtol=1e-4)  # the identity
    assert check["token"].iloc[0] == repr(tokenizer.decode([int(top.index[0])]))


def test_reachability_study_shares_and_their_difference(tiny_llama_dir):
    model = load_model(str(tiny_llama_dir))
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    study = reachability.reachability_study(model.view, tokenizer, k=2, n_tokens=30, tail=0.05, n_boot=50)
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
