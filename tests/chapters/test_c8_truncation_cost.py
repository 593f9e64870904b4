"""Tests of `lotlib.chapters.c8_truncation_cost`."""

import numpy as np
import pytest
import torch

from lotlib import capture, gibberish, load_model


def test_truncation_cost_scores_the_true_next_token_of_held_out_pilots(tiny_gpt2_dir):
    """C7: the bases are fit on the first n_fit pseudo-sentences, the next n_scored are truncated; p's loss is the
    model's own next-token loss on the following chunk's first token, and at K = D truncation costs nothing."""
    from lotlib.chapters.c8_truncation_cost import next_tokens, truncation_cost
    from lotlib.lines_of_thought.ensemble import Ensemble

    model = load_model(str(tiny_gpt2_dir))
    corpus = gibberish(model.view.W_E.shape[0], n_s=83, n_k=6, seed=2)
    ids = corpus.ids
    X = capture(model, ids, progress=False)
    D = X.shape[-1]
    ens = Ensemble(model, corpus, X)
    cost = truncation_cost(ens, 12, ks=[4, D], n_boot=50, progress=False)
    assert cost.n_fit == 70 and cost.scores.loss.shape == (2, 12)
    np.testing.assert_array_equal(next_tokens(ids, np.arange(70, 82)), ids[71:83, 0])
    with torch.no_grad():
        logp = (
            model.hf(input_ids=torch.as_tensor(ids[70:82]))
            .logits[:, -1]
            .log_softmax(-1)
        )
    target = torch.as_tensor(ids[71:83, 0])
    np.testing.assert_allclose(
        cost.scores.full_loss, -logp[torch.arange(12), target], rtol=1e-4
    )
    np.testing.assert_array_equal(
        cost.scores.full_top1, (logp.argmax(-1) == target).numpy()
    )
    full_rank = cost.at(D)
    assert abs(full_rank["loss_rise"].value) < 1e-4 and full_rank["kl"].value < 1e-5
    assert cost.at(4)["kl"].value > 0 and set(cost.table()["score"]) == {
        "kl",
        "loss_rise",
        "top1",
    }
    assert (
        cost.summary(16)["n_scored"] == 12
        and cost.summary(16)["top1_quarter_d"].n == 12
    )
    with pytest.raises(ValueError, match="no known next token"):
        truncation_cost(ens, 82, ks=[4])
    with pytest.raises(ValueError, match="successor"):
        next_tokens(ids, np.array([82]))
