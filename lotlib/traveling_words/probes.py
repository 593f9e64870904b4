"""Static probes of attention heads with vocabulary tokens (Traveling Words A4-A6, probe rates).

Every probe starts from a token's residual-stream input e = `ModelView.embed` (the embedding row times the
model's embedding scale; no position) and block `layer`'s own first norm, q = block_norm(e). Scores cover
the whole vocabulary in float32 on the model's device, batched over heads and factored through d_head where
that saves work (a head is a rank-d_head map); results come back on the CPU:

- query-key (A4): score(v) = q W_QK^h . block_norm(e_v) = (q W_Q^h)(block_norm(e_v) W_K^h)^T * scaling
- value (A5): u_h = (q W_V^h + b_V^h) W_O^h; logits = final_norm(e + u_h + b_O) @ W_U (+ b_U), with a
  last row for the sum over heads (W_U is W_E^T when the embeddings are tied; an encoder, with no LM
  head, is read against raw W_E as the paper reads GPT-2: `ModelView.readout_rows`)
- probe rates: how often the top-k tokens are the query word itself or a morphological variant, for
  common nouns and for random words drawn with as many variant tokens in the vocabulary (`random_words`)
- key specificity: whether a query's top keys are closer to it than the other queries' keys are
- estimates: a rate or specificity per head and query summed up with a bootstrap interval over queries
- the chapters' analyses: `noun_queries` builds the query set of both (nouns and matched random words),
  `noun_probes` runs A4/A5 at a few blocks, `probe_rates_by_block` the rates over every block
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..models.view import ModelView
from ..stats import Estimate, bootstrap, bootstrap_mean
from .vocabulary import NounQueries, Queries, token_label, variants

# ----------------------------------------------------------------------------------------------
# query-key and value probes


Top = tuple[Tensor, Tensor]  # scores and token ids of the top-k, each `(R, n, k)`


def topk(x: Tensor, k: int, block: int = 128) -> Top:
    """`torch.topk` over the last dimension, about three times faster on vocabulary-long rows: the top k
    lie in the k blocks of `block` entries with the largest maxima, so only those k blocks are ranked."""
    V = x.shape[-1]
    if V <= k * block:
        top = x.topk(k, dim=-1)
        return top.values, top.indices
    full = V // block * block
    maxima = x[..., :full].unflatten(-1, (-1, block)).amax(-1)
    if full < V:
        maxima = torch.cat([maxima, x[..., full:].amax(-1, keepdim=True)], -1)
    idx = (
        maxima.topk(k, dim=-1).indices[..., None] * block
        + torch.arange(block, device=x.device)
    ).flatten(-2)  # (..., k*block)
    top = (
        x.gather(-1, idx.clamp(max=V - 1))
        .masked_fill(idx >= V, -torch.inf)
        .topk(k, dim=-1)
    )
    return top.values, idx.gather(-1, top.indices)


class _Buffer:
    """Reusable float32 memory for vocabulary-sized results: a fresh tensor of hundreds of megabytes
    costs a page fault per 4 kB on every call, a quarter of the probes' time."""

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
    parts = [
        [topk(s, k) for s in score(part)] for part in ids.split(chunk)
    ]  # ids on the model's device
    return [
        (torch.cat([p[j][0] for p in parts], 1), torch.cat([p[j][1] for p in parts], 1))
        for j in range(len(parts[0]))
    ]


def qk_scorer(view: ModelView, layer: int) -> Callable[[Tensor], Tensor]:
    """ids `(n,)` -> query-key scores of every vocabulary token as key, `(H, n, V)`; each call reuses
    the memory of the previous call's result.

    Biases and positions are left out (as in the paper); per-head q/k norms (Gemma 3) are applied
    where the model has them. Keys are projected once per key/value head (grouped-query attention).
    """
    heads = view.heads(layer)
    X = view.block_norm(layer)(
        view.embed()
    )  # (V, d): every token on the block's sphere
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

    The norm is gamma * r(x) * (x - m(x)) + beta with a per-row scale r and mean m (m = 0 for RMSNorm), so
    x's logits are r * (x @ G^T - m * G 1) + beta @ R^T with G = gamma * R, and x @ G^T = c @ G^T + u_h @ G^T
    with c = e + b_O. A head's u_h @ G^T is either computed directly, d multiply-adds per query and token, or
    factored through d_head as (q W_V^h + b_V^h) (W_O^h G^T), d_head per query and token once W_O^h G^T
    `(d_head, V)` is computed, which costs d x d_head per token: the scorer factors when it is told it will
    see more than d d_head / (d - d_head) queries in all (`n_queries`; None: factor).
    """
    heads, norm = view.heads(layer), view.final_norm
    R, b_U = view.readout_rows()
    Gm = R * norm.gamma.float()  # (V, d)
    H, dh, d = view.n_heads, view.d_head, view.d_model
    factored = n_queries is None or n_queries * (d - dh) > d * dh
    M = (
        torch.einsum("hed,vd->hev", heads.W_O.float(), Gm) if factored else None
    )  # (H, dh, V)
    bias = (
        b_U
        if norm.beta is None
        else norm.beta.float() @ R.T + (0 if b_U is None else b_U)
    )
    block_norm, W_O, V = view.block_norm(layer), heads.W_O.float(), Gm.shape[0]
    buffers = _Buffer(view.device), _Buffer(view.device)

    def finish(
        lin: Tensor, x: Tensor
    ) -> Tensor:  # logits (H+1, n, V) of states x (H+1, n, d), in place
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
    s = (
        torch.einsum("id,hjkd->hij", queries, keys).cpu().double() / top.shape[-1]
    )  # (H, n, n)
    own = s.diagonal(dim1=1, dim2=2)[..., None]  # (H, n, 1)
    wins = (own > s).double().sum(-1) + 0.5 * (
        (own == s).double().sum(-1) - 1
    )  # i against itself left out
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


# ----------------------------------------------------------------------------------------------
# the chapters' analyses: A4/A5 on a few blocks, probe rates over every block


def _by_block(values: dict[int, float], layers: list[int]) -> dict[str, float]:
    """The first and the last probed block's value, as `{"first": ..., "last": ...}`."""
    return {"first": values[layers[0]], "last": values[layers[-1]]}


@dataclass(frozen=True)
class NounProbes:
    """A4/A5 over a query set at the probed `layers`: the top-k ids of the three probes for every query
    (`tops`, as `probe_tops`), the nouns' `table` (`noun_table`), the variant `rates` `(B, H(+1), n + m)`
    per probe, the key `specificity` `(B, H, m)` per group of queries, and the mean `||e||` of the nouns."""

    queries: NounQueries
    layers: list[int]
    k: int
    n_heads: int
    tops: dict[str, Tensor]
    table: pd.DataFrame
    rates: dict[str, np.ndarray]
    specificity: dict[str, np.ndarray]
    embedding_norm: float

    def measures(self) -> dict[str, dict[str, np.ndarray]]:
        """Per group of queries, the three per-head measures `(B, H, m)`."""
        H = self.n_heads
        return {
            group: {
                "QK variant rate": self.rates["qk"][:, :, part],
                "QK key specificity": self.specificity[group],
                "VO update variant rate": self.rates["vo_update"][:, :H, part],
            }
            for group, part in self.queries.groups.items()
        }

    def per_head(self) -> pd.DataFrame:
        """The measures in long form: block, head, query, value, queries (group), measure."""
        frames = []
        for group, by_measure in self.measures().items():
            for measure, x in by_measure.items():
                b, h, q = np.meshgrid(
                    self.layers,
                    np.arange(x.shape[1]),
                    np.arange(x.shape[-1]),
                    indexing="ij",
                )
                frames.append(
                    pd.DataFrame(
                        {
                            "block": b.ravel(),
                            "head": h.ravel(),
                            "query": q.ravel(),
                            "value": x.ravel(),
                            "queries": group,
                            "measure": measure,
                        }
                    )
                )
        return pd.concat(frames, ignore_index=True)

    def measure_means(self) -> pd.DataFrame:
        """Each measure's mean over heads and queries: (measure, queries) x block."""
        frame = self.per_head()
        return (
            frame.groupby(["measure", "queries", "block"])["value"]
            .mean()
            .unstack("block")
        )

    def readable(self, block: int, shown: list[str]) -> pd.DataFrame:
        """The `shown` nouns (those that are queries) x every head and the sum of one block: the top-k
        tokens of each probe and `||u_h||`."""
        shown = [w for w in shown if w in self.queries.nouns.words]
        part = self.table[(self.table.block == block) & self.table.noun.isin(shown)]
        wide = part.pivot_table(
            index=["noun", "head"], columns="probe", values="tokens", aggfunc="first"
        )
        norms = part[part.probe == "VO"].set_index(["noun", "head"])["norm"]
        order = pd.MultiIndex.from_product(
            [shown, [str(h) for h in range(self.n_heads)] + ["sum"]],
            names=["noun", "head"],
        )
        return (
            wide.join(norms.rename("||u_h||"))
            .reindex(order)
            .fillna({"QK": ""})[["QK", "VO", "VO update", "||u_h||"]]
        )

    def wide(self, probe: str) -> pd.DataFrame:
        """The full table of one probe ("QK", "VO", "VO update"): (block, noun) x head."""
        part = self.table[self.table.probe == probe]
        wide = part.pivot_table(
            index=["block", "noun"],
            columns="head",
            values="tokens",
            aggfunc="first",
            sort=False,
        )
        extra = ["sum"] if probe != "QK" else []
        return wide[[str(h) for h in range(self.n_heads)] + extra]

    def head_summary(self) -> pd.DataFrame:
        """Per block, probe and head: the most common top-1 token over the nouns, the share of nouns
        with it, the number of distinct top-1 tokens, the self rate (variants among the top-k) and the
        mean `||u_h||`."""
        grouped = self.table.groupby(["block", "probe", "head"], sort=False)
        return pd.DataFrame(
            {
                "most common top-1": grouped["top1"].agg(lambda s: s.mode().iloc[0]),
                "share with it": grouped["top1"].agg(
                    lambda s: s.value_counts(normalize=True).iloc[0]
                ),
                "distinct top-1": grouped["top1"].nunique(),
                "self rate": grouped["matches"].mean() / self.k,
                "mean ||u_h||": grouped["norm"].mean(),
            }
        ).reset_index()

    def common_key_share(self) -> pd.Series:
        """Per block, the share of nouns whose top key is the head's most common one, mean over heads."""
        summary = self.head_summary()
        qk = summary[(summary["head"] != "sum") & (summary.probe == "QK")]
        return qk.groupby("block")["share with it"].mean()

    def sum_self_rate(self) -> pd.Series:
        """Per block, the self rate of the sum over heads read with the residual (VO, head "sum")."""
        summary = self.head_summary()
        rows = summary[(summary["head"] == "sum") & (summary.probe == "VO")]
        return rows.set_index("block")["self rate"]

    def best_vo_update_head(self) -> tuple[int, int]:
        """(block, head) of the head with the largest VO update variant rate over the nouns."""
        noun_rates = self.rates["vo_update"][:, : self.n_heads, : self.queries.n]
        b, h = np.unravel_index(noun_rates.mean(-1).argmax(), noun_rates.shape[:2])
        return self.layers[int(b)], int(h)

    def estimates(self, n_boot: int = 1000, seed: int = 0) -> dict[str, object]:
        """The chapter's measured values: each claim's value on the nouns and on the random words
        (`query_estimate`, bootstrap over queries), and the first and last block's common-key share
        and self rate of the sum over heads."""
        H, groups = self.n_heads, self.queries.groups
        noun_q, random_q = groups["nouns"], groups["random words"]
        estimate = partial(query_estimate, n_boot=n_boot, seed=seed)
        qk, update, spec = self.rates["qk"], self.rates["vo_update"], self.specificity
        share = _by_block(self.common_key_share(), self.layers)
        sum_rate = _by_block(self.sum_self_rate(), self.layers)
        return {
            "qk_rate_best_head_first": estimate(qk[0, :, noun_q], best_head=True),
            "qk_rate_best_head_first_random": estimate(
                qk[0, :, random_q], best_head=True, unit="random words"
            ),
            "qk_rate_first": estimate(qk[0, :, noun_q]),
            "qk_rate_last": estimate(qk[-1, :, noun_q]),
            "qk_specificity_first": estimate(spec["nouns"][0]),
            "qk_specificity_first_random": estimate(
                spec["random words"][0], unit="random words"
            ),
            "qk_specificity_last": estimate(spec["nouns"][-1]),
            "qk_specificity_last_random": estimate(
                spec["random words"][-1], unit="random words"
            ),
            "vo_update_best_head_rate": estimate(update[:, :H, noun_q], best_head=True),
            "vo_update_best_head_rate_random": estimate(
                update[:, :H, random_q], best_head=True, unit="random words"
            ),
            "qk_common_key_share_first": share["first"],
            "qk_common_key_share_last": share["last"],
            "vo_sum_self_rate_first": sum_rate["first"],
            "vo_sum_self_rate_last": sum_rate["last"],
        }


@torch.no_grad()
def noun_probes(
    view: ModelView, queries: NounQueries, layers: list[int], k: int = 5
) -> NounProbes:
    """A4/A5: the three probes of every query (nouns and random words) at `layers`, the nouns' table,
    the variant rates and the key specificity of each group (`NounProbes`)."""
    ids, n = queries.ids, queries.n
    tops = probe_tops(view, layers, ids, k)
    nouns_only = {name: top[:, :, :n] for name, top in tops.items()}
    specificity = {
        group: np.stack(
            [
                key_specificity(view, layer, ids[part], tops["qk"][b][:, part])
                for b, layer in enumerate(layers)
            ]
        )
        for group, part in queries.groups.items()
    }
    return NounProbes(
        queries=queries,
        layers=list(layers),
        k=k,
        n_heads=view.n_heads,
        tops=tops,
        table=noun_table(view, queries.vocab, queries.nouns, layers, k, nouns_only),
        rates={name: variant_rates(queries.mask, top) for name, top in tops.items()},
        specificity=specificity,
        embedding_norm=view.embed(queries.nouns.ids).norm(dim=-1).mean().item(),
    )


PROBES = {
    "qk": "query-key",
    "vo_update": "update alone",
    "vo": "with residual",
}  # the three probes, as the rate tables name them


@dataclass(frozen=True)
class ProbeRates:
    """Probe rates over the blocks `layers`: the variant `rates` `(B, H(+1), n + m)` per probe ("qk",
    "vo_update", "vo"; row H: the sum over heads), a head's mean write against the nouns' embedding,
    mean `||u_h||` / mean `||e||` per block `(B,)`, and the seconds the probes took."""

    queries: NounQueries
    layers: list[int]
    n_heads: int
    rates: dict[str, np.ndarray]
    write: np.ndarray
    seconds: float

    @property
    def thirds(self) -> tuple[slice, slice]:
        """The first and the last third of the probed blocks (at least one block each)."""
        third = max(1, len(self.layers) // 3)
        return slice(0, third), slice(len(self.layers) - third, None)

    def per_query(self, probe: str, group: str = "nouns") -> np.ndarray:
        """`(B, H, m)`: one group's rates of every head (the sum over heads left out)."""
        return self.rates[probe][:, : self.n_heads, self.queries.groups[group]]

    def curve(self, probe: str, group: str = "nouns") -> np.ndarray:
        """`(B,)`: the rate per block, mean over heads and queries."""
        return self.per_query(probe, group).mean((1, 2))

    def head_rates(self, probe: str) -> pd.DataFrame:
        """The nouns' rate of every head: head x block."""
        return pd.DataFrame(
            self.per_query(probe).mean(2).T,
            index=pd.RangeIndex(self.n_heads, name="head"),
            columns=pd.Index(self.layers, name="block"),
        )

    def curves(self) -> pd.DataFrame:
        """Long form for the figure: probe, queries (group), block, query, rate (mean over heads)."""
        frames = []
        for probe in PROBES:
            for group in self.queries.groups:
                x = self.per_query(probe, group).mean(1)  # (B, m)
                b, q = np.meshgrid(self.layers, np.arange(x.shape[1]), indexing="ij")
                frames.append(
                    pd.DataFrame(
                        {
                            "block": b.ravel(),
                            "query": q.ravel(),
                            "rate": x.ravel(),
                            "queries": group,
                            "probe": probe,
                        }
                    )
                )
        return pd.concat(frames, ignore_index=True)

    def curve_table(self) -> pd.DataFrame:
        """Per probe, and for the sum over heads read with the residual: the nouns' rate at the first
        block, its peak and where, its means over the first and the last third of the blocks, and the
        random words' rate at the first block and over all blocks."""
        early, late = self.thirds
        total = {
            group: self.rates["vo"][:, self.n_heads, part].mean(1)
            for group, part in self.queries.groups.items()
        }  # (B,) per group: the sum over heads, with the residual
        curves = {
            label: (self.curve(probe), self.curve(probe, "random words"))
            for probe, label in PROBES.items()
        }
        curves["sum over heads, with residual"] = tuple(total.values())
        rows = {
            label: {
                "nouns, first block": a[0],
                "nouns, peak": a.max(),
                "peak block": self.layers[int(np.argmax(a))],
                "nouns, first third": a[early].mean(),
                "nouns, last third": a[late].mean(),
                "random words, first block": b[0],
                "random words, mean": b.mean(),
            }
            for label, (a, b) in curves.items()
        }
        return pd.DataFrame(rows).T.astype({"peak block": int})

    def heads_above(self, bound: float = 0.2) -> pd.DataFrame:
        """How many heads of each block have a noun rate of at least `bound`: probe x block."""
        return pd.DataFrame(
            {
                PROBES[p]: (self.head_rates(p) >= bound).sum(axis=0)
                for p in ("qk", "vo_update")
            }
        ).T

    def estimates(
        self, n_layers: int, n_boot: int = 1000, seed: int = 0
    ) -> dict[str, object]:
        """The chapter's measured values (bootstrap intervals over the queries, `query_estimate`):
        query-key rates at the first block, over the first and last third and their difference, the
        peak (block, rate and depth over `n_layers`, `peak_depth`), the best head; the update-alone
        and with-residual rates; a head's write over the embedding."""
        estimate = partial(query_estimate, n_boot=n_boot, seed=seed)
        early, late = self.thirds
        qk, qk_random = self.per_query("qk"), self.per_query("qk", "random words")
        update = self.per_query("vo_update")
        peak = peak_depth(qk.mean(1), self.layers, n_layers, n_boot=n_boot, seed=seed)
        curve_qk, curve_update = self.curve("qk"), self.curve("vo_update")

        def contrast(x: np.ndarray, unit: str) -> Estimate:
            return estimate(x[early].mean((0, 1)) - x[late].mean((0, 1)), unit=unit)

        return {
            "qk_rate_first_block": estimate(qk[0]),
            "qk_baseline_first_block": estimate(qk_random[0], unit="random words"),
            "qk_rate_early": estimate(qk[early]),
            "qk_baseline_early": estimate(qk_random[early], unit="random words"),
            "qk_rate_late": estimate(qk[late]),
            "qk_early_minus_late": contrast(qk, "nouns"),
            "qk_early_minus_late_baseline": contrast(qk_random, "random words"),
            "qk_peak_block": self.layers[int(np.argmax(curve_qk))],
            "qk_peak_rate": curve_qk.max(),
            "qk_peak_depth": peak
            if np.isfinite(peak.value)
            else "no peak: the rate is zero at every probed block",
            "qk_best_head_rate": estimate(qk, best_head=True),
            "vo_update_rate_first_block": estimate(update[0]),
            "vo_update_peak_block": self.layers[int(np.argmax(curve_update))],
            "vo_update_peak_rate": curve_update.max(),
            "vo_update_best_head_rate": estimate(update, best_head=True),
            "vo_update_best_head_rate_baseline": estimate(
                self.per_query("vo_update", "random words"),
                best_head=True,
                unit="random words",
            ),
            "vo_residual_rate_mean": estimate(self.per_query("vo")),
            "vo_residual_baseline_mean": estimate(
                self.per_query("vo", "random words"), unit="random words"
            ),
            "write_over_embedding_first": self.write[0],
            "write_over_embedding_median": np.median(self.write),
        }


@torch.no_grad()
def probe_rates_by_block(
    view: ModelView, queries: NounQueries, layers: list[int], k: int = 5
) -> ProbeRates:
    """The probe rates of every query at every block of `layers` (`probe_rates`), timed, and a head's
    mean write `||u_h||` over the nouns' mean `||e||` per block (`ProbeRates`)."""
    start = time.perf_counter()
    rates = probe_rates(view, layers, queries.ids, queries.mask, k)
    seconds = time.perf_counter() - start
    e_norm = view.embed(queries.nouns.ids).norm(dim=-1).mean().item()
    H, nouns = view.n_heads, queries.nouns.ids
    write = np.array(
        [update_norms(view, layer, nouns)[:H].mean().item() for layer in layers]
    )
    return ProbeRates(queries, list(layers), H, rates, write / e_norm, seconds)
