"""Static probes of attention heads with vocabulary tokens: query-key and value scores, variant rates, key specificity."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..models.view import ModelView
from ..stats import Estimate, bootstrap, bootstrap_mean
from .vocabulary import Queries, token_label, variants

# ----------------------------------------------------------------------------------------------
# query-key and value probes


Top = tuple[Tensor, Tensor]  # scores and token ids of the top-k, each `(R, n, k)`


def topk(x: Tensor, k: int, block: int = 128) -> Top:
    """`torch.topk` over the last dimension, faster on vocabulary-long rows: the top k lie in the k blocks
    of `block` entries with the largest maxima, so only those k blocks are ranked."""
    V = x.shape[-1]
    if V <= k * block:
        top = x.topk(k, dim=-1)
        return top.values, top.indices
    full = V // block * block
    maxima = x[..., :full].unflatten(-1, (-1, block)).amax(-1)
    if full < V:
        maxima = torch.cat([maxima, x[..., full:].amax(-1, keepdim=True)], -1)
    # (..., k*block)
    idx = (
        maxima.topk(k, dim=-1).indices[..., None] * block
        + torch.arange(block, device=x.device)
    ).flatten(-2)
    top = (
        x.gather(-1, idx.clamp(max=V - 1))
        .masked_fill(idx >= V, -torch.inf)
        .topk(k, dim=-1)
    )
    return top.values, idx.gather(-1, top.indices)


class _Buffer:
    """Reusable float32 memory for vocabulary-sized results: a fresh tensor of hundreds of megabytes
    costs a page fault per 4 kB on every call."""

    def __init__(self, device: torch.device):
        self.data = torch.empty(0, device=device)

    def __call__(self, *shape: int) -> Tensor:
        size = math.prod(shape)
        if self.data.numel() < size:
            self.data = torch.empty(size, device=self.data.device)
        return self.data[:size].view(shape)


def _topk_in_chunks(
    score: Callable[[Tensor], tuple[Tensor, ...]], ids: Tensor, k: int, chunk: int
) -> list[Top]:
    """Top-k over the vocabulary of each `(R, n, V)` tensor that `score(ids)` returns, `chunk` queries at a time."""
    # ids on the model's device
    parts = [[topk(s, k) for s in score(part)] for part in ids.split(chunk)]
    return [
        (torch.cat([p[j][0] for p in parts], 1), torch.cat([p[j][1] for p in parts], 1))
        for j in range(len(parts[0]))
    ]


def qk_scorer(view: ModelView, layer: int) -> Callable[[Tensor], Tensor]:
    """ids `(n,)` -> query-key scores of every vocabulary token as key, `(H, n, V)`, float32 on the model's
    device; each call reuses the memory of the previous call's result.

    A token's residual-stream input e = `ModelView.embed` (the embedding row times the model's embedding
    scale; no position) goes through block `layer`'s own first norm, q = block_norm(e), and key v scores
    q W_QK^h . block_norm(e_v) = (q W_Q^h)(block_norm(e_v) W_K^h)^T * scaling. Biases and positions are
    left out (as in the paper); per-head q/k norms (Gemma 3) are applied where the model has them. Keys are
    projected once per key/value head (grouped-query attention).
    """
    heads = view.heads(layer)
    # (V, d): every token on the block's sphere
    X = view.block_norm(layer)(view.embed())
    H, G = view.n_heads, heads.n_kv_heads
    K = torch.einsum("vd,gde->gve", X, heads.W_K[:: H // G].float())  # (G, V, dh)
    if heads.k_norm is not None:
        K = heads.k_norm(K)
    K = K.transpose(1, 2)
    V, buffer = K.shape[-1], _Buffer(view.device)

    def score(ids: Tensor) -> Tensor:
        Q = torch.einsum("nd,hde->hne", X[ids], heads.W_Q.float())  # (H, n, dh)
        if heads.q_norm is not None:
            Q = heads.q_norm(Q)
        n = len(ids)
        out = buffer(G, H // G * n, V)
        torch.bmm(Q.reshape(G, H // G * n, -1) * heads.scaling, K, out=out)
        return out.view(H, n, V)

    return score


def vo_scorer(
    view: ModelView, layer: int, n_queries: int | None = None
) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """ids `(n,)` -> logits of final_norm(e + u_h + b_O) and of the update alone, final_norm(u_h), for every
    head h and for the sum over heads (last row): two `(H+1, n, V)` tensors, whose memory the next call
    reuses.

    A head's update for the token's residual-stream input e (`ModelView.embed`) is u_h = (q W_V^h + b_V^h)
    W_O^h with q = block_norm(e), and a state x is read as final_norm(x) @ W_U (+ b_U); W_U is W_E^T when
    the embeddings are tied, and an encoder, with no LM head, is read against raw W_E as the paper reads
    GPT-2 (`ModelView.readout_rows`). The norm is gamma * r(x) * (x - m(x)) + beta with a per-row scale r
    and mean m (m = 0 for RMSNorm), so x's logits are r * (x @ G^T - m * G 1) + beta @ R^T with
    G = gamma * R, and x @ G^T = c @ G^T + u_h @ G^T with c = e + b_O. A head's u_h @ G^T is either
    computed directly, d multiply-adds per query and token, or factored through d_head as
    (q W_V^h + b_V^h) (W_O^h G^T), d_head per query and token once W_O^h G^T `(d_head, V)` is computed,
    which costs d x d_head per token: the scorer factors when it is told it will see more than
    d d_head / (d - d_head) queries in all (`n_queries`; None: factor).
    """
    heads, norm = view.heads(layer), view.final_norm
    R, b_U = view.readout_rows()
    Gm = R * norm.gamma.float()  # (V, d)
    H, dh, d = view.n_heads, view.d_head, view.d_model
    factored = n_queries is None or n_queries * (d - dh) > d * dh
    # (H, dh, V)
    M = torch.einsum("hed,vd->hev", heads.W_O.float(), Gm) if factored else None
    bias = (
        b_U
        if norm.beta is None
        else norm.beta.float() @ R.T + (0 if b_U is None else b_U)
    )
    block_norm, W_O, V = view.block_norm(layer), heads.W_O.float(), Gm.shape[0]
    buffers = _Buffer(view.device), _Buffer(view.device)

    # logits (H+1, n, V) of states x (H+1, n, d), in place
    def finish(lin: Tensor, x: Tensor) -> Tensor:
        if norm.centers:
            m = x.mean(-1, keepdim=True)
            x = x - m
            lin.addcmul_(m, Gm.sum(1), value=-1.0)
        lin.mul_(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps))
        return lin if bias is None else lin.add_(bias)

    def score(ids: Tensor) -> tuple[Tensor, Tensor]:
        e, n = view.embed(ids), len(ids)
        a = (
            torch.einsum("nd,hde->hne", block_norm(e), heads.W_V.float())
            + heads.b_V.float()[:, None]
        )
        u = torch.einsum("hne,hed->hnd", a, W_O)  # (H, n, d): each head's update
        u = torch.cat([u, u.sum(0, keepdim=True)])
        update, residual = (buffer(H + 1, n, V) for buffer in buffers)
        if factored:
            torch.bmm(a, M, out=update[:H])
        else:
            torch.mm(u[:H].reshape(H * n, d), Gm.T, out=update[:H].view(H * n, V))
        torch.mm(u[H], Gm.T, out=update[H])
        c = e + heads.b_O.float()
        torch.add(update, c @ Gm.T, out=residual)
        return finish(residual, u + c), finish(update, u)

    return score


@torch.no_grad()
def qk_top(
    view: ModelView, layer: int, ids: Tensor, k: int = 5, chunk: int = 64
) -> Top:
    """Top-k key tokens of every query token for every head: scores and token ids, each `(H, n, k)`."""
    score = qk_scorer(view, layer)
    return _topk_in_chunks(lambda part: (score(part),), ids.to(view.device), k, chunk)[
        0
    ]


@torch.no_grad()
def vo_top(
    view: ModelView, layer: int, ids: Tensor, k: int = 5, chunk: int = 64
) -> tuple[Top, Top]:
    """Top-k output tokens of every key token for every head and the sum over heads, `(H+1, n, k)`:
    read with the residual, final_norm(e + u_h + b_O), and from the update alone, final_norm(u_h)."""
    return tuple(
        _topk_in_chunks(vo_scorer(view, layer, len(ids)), ids.to(view.device), k, chunk)
    )


@torch.no_grad()
def update_norms(view: ModelView, layer: int, ids: Tensor) -> Tensor:
    """`||u_h||` for every head and for the sum over heads, `(H+1, n)`."""
    heads = view.heads(layer)
    a = torch.einsum(
        "nd,hde->hne", view.block_norm(layer)(view.embed(ids)), heads.W_V.float()
    )
    u = torch.einsum("hne,hed->hnd", a + heads.b_V.float()[:, None], heads.W_O.float())
    return torch.cat([u, u.sum(0, keepdim=True)]).norm(dim=-1)


@torch.no_grad()
def probe_tops(
    view: ModelView, layers: list[int], ids: Tensor, k: int = 5, chunk: int = 64
) -> dict[str, Tensor]:
    """Top-k token ids of the three probes at every block of `layers`, on the CPU: "qk" `(B, H, n, k)`, the
    keys each query seeks; "vo" and "vo_update" `(B, H+1, n, k)`, the readout of final_norm(e + u_h + b_O)
    and of the update alone, final_norm(u_h) (row H: the sum over heads)."""
    out = {"qk": [], "vo": [], "vo_update": []}
    for layer in tqdm(layers, desc="head probes", unit="block"):
        (_, qk), ((_, vo), (_, update)) = (
            qk_top(view, layer, ids, k, chunk),
            vo_top(view, layer, ids, k, chunk),
        )
        for name, top in (("qk", qk), ("vo", vo), ("vo_update", update)):
            out[name].append(top.cpu())
    return {name: torch.stack(tops) for name, tops in out.items()}


def noun_table(
    view: ModelView,
    vocab: list[str],
    queries: Queries,
    layers: list[int],
    k: int = 5,
    tops: dict[str, Tensor] | None = None,
) -> pd.DataFrame:
    """A4/A5 in long form: one row per (block, probe, noun, head), the top-k tokens joined by ' | '.

    probe "QK": the keys a noun's query seeks; "VO": final_norm(e + u_h + b_O), what the residual reads
    after head h wrote its update for the noun; "VO update": final_norm(u_h), the update alone.
    VO rows have a head "sum" (the sum over heads) and `norm` = `||u_h||`. `top1` is the first token,
    `matches` how many of the k are in the noun's variant set (`variants`). `tops`: the queries'
    `probe_tops` at `layers`, when already computed.
    """
    tops = probe_tops(view, layers, queries.ids, k) if tops is None else tops
    forms = [variants(word) for word in queries.words]
    rows = []
    for b, layer in enumerate(layers):
        norms = update_norms(view, layer, queries.ids).cpu()
        for probe, name in (("QK", "qk"), ("VO", "vo"), ("VO update", "vo_update")):
            top = tops[name][b]
            for h in range(top.shape[0]):
                head = "sum" if h == view.n_heads else str(h)
                for i, word in enumerate(queries.words):
                    texts = [vocab[t] for t in top[h, i].tolist()]
                    rows.append(
                        {
                            "block": layer,
                            "probe": probe,
                            "noun": word,
                            "head": head,
                            "tokens": " | ".join(map(token_label, texts)),
                            "top1": token_label(texts[0]),
                            "matches": sum(t in forms[i] for t in texts),
                            "norm": np.nan if probe == "QK" else float(norms[h, i]),
                        }
                    )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# aggregate probe rates and how specific the keys are


def variant_rates(mask: Tensor, top: Tensor) -> np.ndarray:
    """Fraction of each query's top-k tokens `(..., n, k)` that are in its variant set (mask `(n, V)`): `(..., n)`."""
    return (
        mask[torch.arange(mask.shape[0])[:, None], top.cpu()].float().mean(-1).numpy()
    )


@torch.no_grad()
def probe_rates(
    view: ModelView,
    layers: list[int],
    ids: Tensor,
    mask: Tensor,
    k: int = 5,
    chunk: int = 64,
) -> dict[str, np.ndarray]:
    """Per block, head and query, the fraction of the top-k tokens that are in the query's variant set.

    ids `(n,)` query tokens, mask `(n, V)` their variant sets. Returns `qk` `(L, H, n)`, `vo` and
    `vo_update` `(L, H+1, n)` (row H: the sum over heads); `vo` reads final_norm(e + u_h + b_O),
    `vo_update` the head's update alone, final_norm(u_h).
    """
    return {
        name: variant_rates(mask, top)
        for name, top in probe_tops(view, layers, ids, k, chunk).items()
    }


@torch.no_grad()
def key_specificity(
    view: ModelView, layer: int, ids: Tensor, top: Tensor
) -> np.ndarray:
    """How much each query's top keys belong to it rather than to the other queries, per head: `(H, n)`.

    For head h and query i, s_h(i, j) is the mean cosine between the query token and the top-k keys that
    query j receives (ids `top` `(H, n, k)`), both on the block's sphere, block_norm(e). The value is the
    share of the other queries j whose keys are farther from i than i's own keys, s_h(i, i) > s_h(i, j)
    (ties count half): 0.5 when the keys are unrelated to the query (random weights) or the same for
    every query, 1 when every query's own keys are the closest to it. The comparison with the other
    queries' keys removes what all keys share (a common direction of the embeddings).
    """
    norm, n = view.block_norm(layer), len(ids)
    if n < 2:
        raise ValueError(
            "key specificity compares a query with the others: it needs at least 2 queries"
        )
    queries = torch.nn.functional.normalize(norm(view.embed(ids)), dim=-1)  # (n, d)
    keys = torch.nn.functional.normalize(norm(view.embed(top)), dim=-1)  # (H, n, k, d)
    # (H, n, n)
    s = torch.einsum("id,hjkd->hij", queries, keys).cpu().double() / top.shape[-1]
    own = s.diagonal(dim1=1, dim2=2)[..., None]  # (H, n, 1)
    # i against itself left out
    wins = (own > s).double().sum(-1) + 0.5 * ((own == s).double().sum(-1) - 1)
    return (wins / (n - 1)).numpy()


def query_estimate(
    per_query: np.ndarray,
    *,
    best_head: bool = False,
    unit: str = "nouns",
    n_boot: int = 1000,
    seed: int = 0,
) -> Estimate:
    """A value per head and query, `(..., n)` (heads, or blocks x heads, in the leading dimensions), summed
    up as the mean over heads and queries, or with `best_head` as the largest per-head mean over queries
    (the best head is chosen again in every resample); 95% bootstrap interval resampling the queries.
    The heads are not resampled: they are the model's."""
    rows = per_query.reshape(-1, per_query.shape[-1])
    if best_head:
        return bootstrap(
            lambda i: rows[:, i].mean(1).max(),
            rows.shape[1],
            unit=unit,
            n_boot=n_boot,
            seed=seed,
        )
    return bootstrap_mean(rows.mean(0), unit=unit, n_boot=n_boot, seed=seed)


def peak_depth(
    curve: np.ndarray,
    layers: list[int],
    n_layers: int,
    *,
    unit: str = "nouns",
    n_boot: int = 1000,
    seed: int = 0,
) -> Estimate:
    """Where a rate peaks over depth: curve `(B, n)` per probed block of `layers` and query; the value is
    the depth block / (L - 1) in [0, 1] of the block with the largest mean over queries (the mean depth of
    tied blocks), NaN when that mean is zero everywhere (no peak); 95% bootstrap interval over queries."""
    depth = np.asarray(layers, dtype=np.float64) / max(n_layers - 1, 1)

    def statistic(i: np.ndarray) -> float:
        mean = curve[:, i].mean(1)
        return float(depth[mean == mean.max()].mean()) if mean.max() > 0 else math.nan

    return bootstrap(statistic, curve.shape[1], unit=unit, n_boot=n_boot, seed=seed)
