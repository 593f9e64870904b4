"""Which tokens the final norm lets the unembedding reach: the paper's four scores and each token's largest logit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from ..models.view import ModelView, Norm

SCORES = ("||e||", "||gamma*e||", "||e|| + beta.e", "||gamma*e|| + beta.e", "max logit")


def reachability_scores(view: ModelView) -> pd.DataFrame:
    """The paper's four scores of each token's unembedding vector u (= e when the embeddings are tied), and
    the largest logit the final norm can give the token, `max logit`:

    sqrt(d) `||P(gamma * u)||` + beta . u + b_U, with P the final norm's projection on the hyperplane x . 1 = 0
    (LayerNorm; the identity for RMSNorm): the normalized state ranges over that sphere (eps ignored), then
    whatever the model does to its logits (`ModelView.finish_logits`). beta = 0 when the norm has none.
    Returns a `(V, 5)` frame indexed by token id, computed in float64 on the CPU.
    """
    norm = view.final_norm
    U, b_U = (None if t is None else t.cpu().double() for t in view.unembedding())
    beta = (
        torch.zeros(U.shape[1], dtype=torch.float64)
        if norm.beta is None
        else norm.beta.cpu().double()
    )
    g_u = U * norm.gamma.cpu().double()
    best = (
        U.shape[1] ** 0.5 * _reachable_part(norm, U).norm(dim=1)
        + U @ beta
        + (0.0 if b_U is None else b_U)
    )
    columns = (
        U.norm(dim=1),
        g_u.norm(dim=1),
        U.norm(dim=1) + U @ beta,
        g_u.norm(dim=1) + U @ beta,
        view.finish_logits(best),
    )
    return pd.DataFrame({name: c.numpy() for name, c in zip(SCORES, columns)})


def _reachable_part(norm: Norm, U: Tensor) -> Tensor:
    """P(gamma * u) for each row u of `U`: the part of gamma * u that a normalized state can align with
    (float64, on the CPU)."""
    return norm.center(U.detach().cpu().double() * norm.gamma.detach().cpu().double())


def has_best_state(view: ModelView) -> np.ndarray:
    """Tokens `(V,)` (bool) whose P(gamma * u) is not zero, so that `best_states` is defined; the others (an
    all-zero unembedding row, such as an untrained model's padding row) get the same logit from every state."""
    return (
        _reachable_part(view.final_norm, view.unembedding()[0]).norm(dim=1) > 0
    ).numpy()


def best_states(norm: Norm, U: Tensor) -> Tensor:
    """For each row u of `U` `(k, d)`, the state on the norm's sphere (and hyperplane, LayerNorm) that gives
    u its largest logit: sqrt(d) P(gamma * u) / `||P(gamma * u)||`, `(k, d)` float64 on the CPU."""
    reach = _reachable_part(norm, U)
    return U.shape[1] ** 0.5 * reach / reach.norm(dim=1, keepdim=True)


def rank_at_best_state(
    view: ModelView, token_ids, batch_size: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Each token's rank among all logits (0 = top prediction) and its logit, `(k,)` each, when the residual
    state is its best state (`best_states`), read by the model (`ModelView.logits`), `batch_size` tokens at a
    time."""
    token_ids = torch.as_tensor(np.asarray(list(token_ids), dtype=np.int64))
    rows = view.unembedding()[0]
    ranks, own_logits = [], []
    for batch in token_ids.split(batch_size):
        logits = view.logits(
            best_states(view.final_norm, rows[batch.to(rows.device)]).float()
        )
        own = logits.gather(1, batch.to(logits.device)[:, None])
        ranks.append((logits > own).sum(1).cpu())
        own_logits.append(own[:, 0].cpu())
    return torch.cat(ranks).numpy(), torch.cat(own_logits).numpy()


def win_shares(
    view: ModelView, scores: pd.Series, n_tokens: int, share: float = 0.1, seed: int = 0
) -> pd.DataFrame:
    """Whether tokens can be the top prediction at their own best state, sampled at both ends of a score.

    Draws `n_tokens` tokens (seeded, without replacement) from the least and from the most reachable `share`
    of the vocabulary by `scores` `(V,)`, among the tokens that `has_best_state`; one row per token:
    token id, `end` ("bottom" or "top"), score, `rank` at its best state and `wins` (rank 0).
    """
    eligible = scores[has_best_state(view)].sort_values(kind="stable")
    size = max(1, int(round(share * len(eligible))))
    rng = np.random.default_rng(seed)
    rows = []
    for end, pool in (
        ("bottom", eligible.index[:size]),
        ("top", eligible.index[-size:]),
    ):
        picked = np.sort(
            rng.choice(np.asarray(pool), size=min(n_tokens, len(pool)), replace=False)
        )
        rows.append(
            pd.DataFrame(
                {"token": picked, "end": end, "score": scores[picked].to_numpy()}
            )
        )
    table = pd.concat(rows, ignore_index=True)
    table["rank"] = rank_at_best_state(view, table["token"])[0]
    table["wins"] = table["rank"] == 0
    return table


def extreme_tokens(
    scores: pd.DataFrame, tokenizer, k: int = 5
) -> dict[str, pd.DataFrame]:
    """For each score, the top-k and bottom-k tokens as `repr` of the decoded string with the score."""

    def table(order) -> pd.DataFrame:
        return pd.DataFrame(
            {
                name: [
                    f"{tokenizer.decode([int(i)])!r} ({scores[name][i]:.2f})"
                    for i in order(scores[name])
                ]
                for name in scores
            },
            index=pd.RangeIndex(1, k + 1, name="rank"),
        )

    return {
        "top": table(lambda s: s.nlargest(k).index),
        "bottom": table(lambda s: s.nsmallest(k).index),
    }


def beta_score_gap(scores: pd.DataFrame) -> float:
    """Largest `|beta score - its beta-free score|` over tokens (0 without beta)."""
    return float(
        max(
            (scores["||e|| + beta.e"] - scores["||e||"]).abs().max(),
            (scores["||gamma*e|| + beta.e"] - scores["||gamma*e||"]).abs().max(),
        )
    )


def best_state_check(
    view: ModelView, best: pd.Series, tokenizer, k: int = 5
) -> pd.DataFrame:
    """The `k` tokens with the largest and the smallest `max logit` score `best` `(V,)` (among those that
    `has_best_state`), each put at its best state: one row per token with its end ("top", "bottom"), `repr`
    string, score, the model's logit there and its rank among all logits (0 = top prediction)."""
    defined = best[has_best_state(view)]
    listed = {"top": defined.nlargest(k).index, "bottom": defined.nsmallest(k).index}
    rows = []
    for end, token_ids in listed.items():
        ranks, logits = rank_at_best_state(view, token_ids)
        rows += [
            {
                "end": end,
                "token": repr(tokenizer.decode([int(i)])),
                "max logit": best[i],
                "logit at x̂*": lg,
                "rank at x̂*": int(r),
            }
            for i, r, lg in zip(token_ids, ranks, logits)
        ]
    return pd.DataFrame(rows)
