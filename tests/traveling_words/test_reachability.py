"""A3's building blocks: the beta gap and the check at the best state."""

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
