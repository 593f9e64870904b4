"""The logit lens: one token's states x(0..L), each read through the final norm and the unembedding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..models.capture import capture
from ..models.corpus import bos_prefix
from ..models.loading import Model


def locate(tokenizer, sentence: str, token_index: int) -> tuple[np.ndarray, int]:
    """Token ids `(T,)` of `sentence`, after a BOS where the tokenizer starts texts with one
    (`lotlib.models.corpus.bos_prefix`), and the position of its token `token_index` (may be < 0; the BOS is
    not counted)."""
    words = tokenizer(sentence, add_special_tokens=False)["input_ids"]
    if not -len(words) <= token_index < len(words):
        raise ValueError(
            f"token_index {token_index} is outside the {len(words)} tokens of {sentence!r}"
        )
    prefix = bos_prefix(tokenizer)
    return np.asarray(prefix + words, dtype=np.int64), len(prefix) + token_index % len(
        words
    )


def token_path(model: Model, ids: np.ndarray, position: int) -> np.ndarray:
    """States x(0), x(1), ..., x(L) of the token at `position` of the sequence `ids` `(T,)`: `(L+1, d)`."""
    return capture(model, ids[None], all_positions=True, progress=False)[0, position]


@dataclass(frozen=True)
class TokenPath:
    """One token of one sentence followed through the model: `X` `(L+1, d)` its states x(0..L) (x(0) the
    input of block 0), `normed` `(L+1, d)` the same through the final norm; `current` its id, `target` the
    next token's id (`current_name`, `target_name` decoded), `tokens` the sentence's tokens decoded."""

    sentence: str
    tokens: list[str]
    position: int
    current: int
    target: int
    current_name: str
    target_name: str
    X: np.ndarray
    normed: np.ndarray


def follow_token(model: Model, sentence: str, token_index: int) -> TokenPath:
    """The path of token `token_index` of `sentence` (`locate`); it needs a next token to travel to."""
    ids, position = locate(model.tokenizer, sentence, token_index)
    if position + 1 >= len(ids):
        raise ValueError(
            "the tracked token needs a next token: choose a token_index before the last"
        )
    decode = model.tokenizer.decode
    current, target = int(ids[position]), int(ids[position + 1])
    X = token_path(model, ids, position)
    return TokenPath(
        sentence=sentence,
        tokens=[decode([int(i)]) for i in ids],
        position=position,
        current=current,
        target=target,
        current_name=decode([current]),
        target_name=decode([target]),
        X=X,
        normed=final_normed(model, X),
    )


@torch.inference_mode()
def final_normed(model: Model, X: np.ndarray) -> np.ndarray:
    """States `(..., d)` through the model's final norm (gamma and beta included), computed on the model's
    device and returned on the CPU."""
    X = torch.from_numpy(np.asarray(X, dtype=np.float32)).to(model.view.device)
    return model.view.final_norm(X).cpu().numpy()


def lens_logits(model: Model, X: np.ndarray) -> np.ndarray:
    """Logits `(..., V)` of states `(..., d)` as the model reads its last state (`ModelView.logits`)."""
    return (
        model.view.logits(torch.from_numpy(np.asarray(X, dtype=np.float32)))
        .cpu()
        .numpy()
    )


def logit_lens(
    model: Model, X: np.ndarray, k: int = 5, target: int | None = None
) -> pd.DataFrame:
    """Top-`k` tokens (with probabilities) of each layer's state `X` `(L+1, d)`; with `target`, its rank."""
    logits = torch.from_numpy(lens_logits(model, X))
    probs = logits.softmax(-1)
    top = probs.topk(k, dim=-1)
    decode = model.tokenizer.decode
    table = pd.DataFrame(
        [
            [f"{decode([int(i)])!r} {p:.2f}" for i, p in zip(ids, ps)]
            for ids, ps in zip(top.indices, top.values)
        ],
        columns=[f"top {j + 1}" for j in range(k)],
    )
    table.index.name = "t"
    if target is not None:
        table[f"rank of {decode([target])!r}"] = (
            (logits > logits[:, [target]]).sum(-1).numpy()
        )
        table[f"p({decode([target])!r})"] = probs[:, target].numpy().round(4)
    return table


def first_layer_within(ranks: np.ndarray, k: int) -> int | None:
    """The first layer whose `ranks` `(L+1,)` entry is below `k` (0 = top-1); None when there is none."""
    hits = np.flatnonzero(np.asarray(ranks) < k)
    return int(hits[0]) if len(hits) else None


@dataclass(frozen=True)
class Arrival:
    """The logit lens along a `TokenPath`: `table` (top tokens per layer, the next token's rank and
    probability), `ranks` and `probs` `(L+1,)` of the next token, `top1` `(L+1,)` each layer's top token."""

    table: pd.DataFrame
    ranks: np.ndarray
    probs: np.ndarray
    top1: list[str]

    @property
    def first_top1(self) -> int | None:
        return first_layer_within(self.ranks, 1)

    @property
    def first_top5(self) -> int | None:
        return first_layer_within(self.ranks, 5)


def arrival(model: Model, path: TokenPath, k: int = 5) -> Arrival:
    """The logit lens of `path` (`logit_lens` with its next token as target)."""
    table = logit_lens(model, path.X, k=k, target=path.target)
    top1 = lens_logits(model, path.X).argmax(-1)
    return Arrival(
        table=table,
        ranks=table[f"rank of {path.target_name!r}"].to_numpy(),
        probs=table[f"p({path.target_name!r})"].to_numpy(),
        top1=[model.tokenizer.decode([int(i)]) for i in top1],
    )
