"""The logit lens (Traveling Words, Fig. 4): one token's states x(0..L), each read as the model reads its
last state, through the final norm and the unembedding.
"""

from __future__ import annotations

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
