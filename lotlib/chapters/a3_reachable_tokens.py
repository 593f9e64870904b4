"""Chapter A3's study and figures: which tokens the final norm lets the unembedding reach."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..models.view import ModelView
from ..stats import Estimate, bootstrap, exact, proportion
from ..traveling_words.reachability import (
    best_state_check,
    beta_score_gap,
    extreme_tokens,
    has_best_state,
    reachability_scores,
    win_shares,
)


@dataclass
class Reachability:
    """A3 on one model: the `scores` `(V, 5)`, their `extremes` (`extreme_tokens`) and Spearman
    correlations `rho` `(5, 5)`; `beta_gap`, the largest change a beta term makes to a score; `check`, the
    k most and k least reachable tokens at their best state (`best_state_check`); `drawn`, the tokens of
    the win test (`win_shares`) with the win `shares` of each end and their difference `advantage`
    (top - bottom, bootstrap over the drawn tokens); `n_without_best_state` tokens had none."""

    scores: pd.DataFrame
    extremes: dict[str, pd.DataFrame]
    rho: pd.DataFrame
    beta_gap: float
    check: pd.DataFrame
    drawn: pd.DataFrame
    shares: dict[str, Estimate]
    advantage: Estimate
    n_without_best_state: int

    @property
    def logit_gap(self) -> float:
        """Largest `|max logit score - the model's logit at the best state|` over the checked tokens."""
        return float((self.check["max logit"] - self.check["logit at x̂*"]).abs().max())

    @property
    def bottom_wins(self) -> int:
        """How many of the k least reachable tokens are the top prediction at their best state."""
        bottom = self.check[self.check["end"] == "bottom"]
        return int((bottom["rank at x̂*"] == 0).sum())

    def summary(self, view: ModelView) -> dict:
        """The chapter's recorded values (`beta_score_gap` as a number even without beta)."""
        best, V = self.scores["max logit"], len(self.scores)
        rho = float(self.rho.loc["||e||", "||gamma*e||"])
        top = {n: v.tolist() for n, v in self.extremes["top"].items()}
        bottom = {n: v.tolist() for n, v in self.extremes["bottom"].items()}
        return {
            "vocab_size": V,
            "final_norm": view.final_norm.kind,
            "has_beta": view.final_norm.beta is not None,
            "tied": view.tied,
            "beta_score_gap": self.beta_gap,
            "spearman_norm_vs_gamma_norm": exact(rho, n=V, unit="tokens"),
            "top_||e||": top["||e||"],
            "top_||gamma*e||": top["||gamma*e||"],
            "top_||e|| + beta.e": top["||e|| + beta.e"],
            "top_||gamma*e|| + beta.e": top["||gamma*e|| + beta.e"],
            "top_max logit": top["max logit"],
            "bottom_||e||": bottom["||e||"],
            "bottom_||gamma*e||": bottom["||gamma*e||"],
            "bottom_||e|| + beta.e": bottom["||e|| + beta.e"],
            "bottom_||gamma*e|| + beta.e": bottom["||gamma*e|| + beta.e"],
            "bottom_max logit": bottom["max logit"],
            "max_logit_top": float(best.max()),
            "max_logit_bottom": float(best.min()),
            "tokens_without_best_state": self.n_without_best_state,
            "max_logit_vs_model_gap": exact(
                self.logit_gap, n=len(self.check), unit="tokens"
            ),
            "bottom_tokens_top1_at_best_state": self.bottom_wins,
            "win_share_least_reachable": self.shares["bottom"],
            "win_share_most_reachable": self.shares["top"],
            "win_share_top_minus_bottom": self.advantage,
        }


def reachability_study(
    view: ModelView,
    tokenizer,
    k: int = 5,
    n_tokens: int = 300,
    tail: float = 0.1,
    seed: int = 0,
    n_boot: int = 2000,
) -> Reachability:
    """Run A3: the scores, the `k` tokens at each end, their check at the best state, and the win test on
    `n_tokens` tokens drawn from each `tail` share of the `max logit` ranking (seeded; `n_boot` bootstrap
    resamples of the drawn tokens)."""
    scores = reachability_scores(view)
    best = scores["max logit"]
    drawn = win_shares(view, best, n_tokens, share=tail, seed=seed)
    is_top, wins = (drawn["end"] == "top").to_numpy(), drawn["wins"].to_numpy()

    def top_minus_bottom(rows: np.ndarray) -> float:
        top, bottom = wins[rows][is_top[rows]], wins[rows][~is_top[rows]]
        return top.mean() - bottom.mean() if len(top) and len(bottom) else np.nan

    return Reachability(
        scores=scores,
        extremes=extreme_tokens(scores, tokenizer, k),
        rho=scores.corr(method="spearman"),
        beta_gap=beta_score_gap(scores),
        check=best_state_check(view, best, tokenizer, k),
        drawn=drawn,
        shares={
            end: proportion(int(t["wins"].sum()), len(t), unit="tokens")
            for end, t in drawn.groupby("end")
        },
        advantage=bootstrap(
            top_minus_bottom, len(drawn), unit="tokens", n_boot=n_boot, seed=seed
        ),
        n_without_best_state=int((~has_best_state(view)).sum()),
    )


def score_hexbin(scores: pd.DataFrame, title: str):
    """A3: `||γ ⊙ e||` against `||e||` for every token (`reachability_scores`), as a log-count hexbin titled
    with their Spearman correlation; returns the figure."""
    rho = scores["||e||"].corr(scores["||gamma*e||"], method="spearman")
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    hb = ax.hexbin(
        scores["||e||"], scores["||gamma*e||"], gridsize=60, bins="log", cmap="viridis"
    )
    fig.colorbar(hb, ax=ax, label="tokens (log)")
    ax.set(
        xlabel="||e||",
        ylabel="||γ ⊙ e||",
        title=f"{title}: every token, Spearman ρ = {rho:.3f}",
    )
    return fig


def rank_ecdf(drawn: pd.DataFrame, title: str):
    """A3: the distribution of each drawn token's rank at its own best state (`win_shares`), one curve
    per end of the ranking, rank + 1 on a log scale; returns the figure."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.ecdfplot(
        drawn.assign(**{"rank + 1": drawn["rank"] + 1}),
        x="rank + 1",
        hue="end",
        log_scale=True,
        ax=ax,
    )
    n = drawn["end"].value_counts().max()
    ax.set(
        title=f"{title}: rank of a token at its own best state ({n} tokens per tenth)",
        ylabel="share of drawn tokens",
    )
    return fig
