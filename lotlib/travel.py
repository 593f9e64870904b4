"""Traveling words (paper A, Fig. 4): a token's state, block after block, read through the final norm.

- `locate`, `token_path`: the states x(0..L) of one token of a sentence, `(L+1, d)`.
- `lens_logits`, `logit_lens`: each state through the final norm and the unembedding (the logit lens).
- `fitted_umap`: a seeded UMAP of embedding rows, cached on disk (new points are placed with `transform`);
  `neighbour_agreement`: why a far-away normalized state lands near its top logit tokens.
- `travel_cosines`, `paired_summary`, `travel_summaries`: the same travel measured in the full space,
  without projection: cos(final_norm(x(t+1)) - final_norm(x(t)), e_next - e_current), against shuffled
  next tokens.
- `path_panels`, `path_figure`: the static and interactive figures.
"""
from __future__ import annotations

import hashlib
import json
import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from tqdm.auto import tqdm

from .atomic import write_atomic, write_text_atomic
from .capture_hooks import capture
from .models import Model
from .paths import cache_dir

# ----------------------------------------------------------------------------------------------
# one token's path and the logit lens


def locate(tokenizer, sentence: str, token_index: int) -> tuple[np.ndarray, int]:
    """Token ids `(T,)` of `sentence` (no special tokens) and the position of `token_index` (may be < 0)."""
    ids = np.asarray(tokenizer(sentence, add_special_tokens=False)["input_ids"], dtype=np.int64)
    if not -len(ids) <= token_index < len(ids):
        raise ValueError(f"token_index {token_index} is outside the {len(ids)} tokens of {sentence!r}")
    return ids, token_index % len(ids)


def token_path(model: Model, ids: np.ndarray, position: int) -> np.ndarray:
    """States x(0), x(1), ..., x(L) of the token at `position` of the sequence `ids` `(T,)`: `(L+1, d)`."""
    return capture(model, ids[None], all_positions=True, progress=False)[0, position]


@torch.inference_mode()
def final_normed(model: Model, X: np.ndarray) -> np.ndarray:
    """States `(..., d)` through the model's final norm (gamma and beta included)."""
    return model.view.final_norm(torch.from_numpy(np.asarray(X, dtype=np.float32))).numpy()


@torch.inference_mode()
def lens_logits(model: Model, X: np.ndarray) -> np.ndarray:
    """Logits `(..., V)` of states `(..., d)`: final norm, then unembedding (W_U, b_U)."""
    view = model.view
    logits = torch.from_numpy(final_normed(model, X)) @ view.W_U.detach().float()
    return (logits if view.b_U is None else logits + view.b_U.detach().float()).numpy()


def logit_lens(model: Model, X: np.ndarray, k: int = 5, target: int | None = None) -> pd.DataFrame:
    """Top-`k` tokens (with probabilities) of each layer's state `X` `(L+1, d)`; with `target`, its rank."""
    logits = torch.from_numpy(lens_logits(model, X))
    probs = logits.softmax(-1)
    top = probs.topk(k, dim=-1)
    decode = model.tokenizer.decode
    table = pd.DataFrame(
        [[f"{decode([int(i)])!r} {p:.2f}" for i, p in zip(ids, ps)] for ids, ps in zip(top.indices, top.values)],
        columns=[f"top {j + 1}" for j in range(k)])
    table.index.name = "t"
    if target is not None:
        table[f"rank of {decode([target])!r}"] = (logits > logits[:, [target]]).sum(-1).numpy()
        table[f"p({decode([target])!r})"] = probs[:, target].numpy().round(4)
    return table


# ----------------------------------------------------------------------------------------------
# UMAP of embedding rows, cached on disk


def umap_key(data: np.ndarray, identity: str, what: str, seed: int, n_neighbors: int, min_dist: float,
             n_components: int) -> dict:
    """Everything that changes a fitted UMAP: model identity, which rows, their content, parameters, version."""
    import umap

    digest = hashlib.sha256(np.ascontiguousarray(data, dtype=np.float32).tobytes()).hexdigest()[:20]
    return {"identity": identity, "what": what, "rows": int(data.shape[0]), "dim": int(data.shape[1]),
            "data_sha256": digest, "n_neighbors": n_neighbors, "min_dist": min_dist,
            "n_components": n_components, "init": "spectral", "seed": seed, "umap": umap.__version__}


def umap_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    what = "".join(c if c.isalnum() else "_" for c in key["what"])
    return cache_dir() / "umap" / f"{what}-{key['rows']}-{digest}.pkl"


def fitted_umap(data: np.ndarray, *, identity: str, what: str = "W_E", seed: int = 0, n_neighbors: int = 15,
                min_dist: float = 0.1, n_components: int = 3, progress: bool = True):
    """A seeded UMAP (spectral init) fitted on `data` `(n, d)`, from the disk cache when possible.

    `identity` names the model, `what` the matrix (both join the cache key with the rows' content). The
    first fit compiles numba code (tens of seconds); the pickle includes the index `transform` needs.
    """
    import umap

    key = umap_key(data, identity, what, seed, n_neighbors, min_dist, n_components)
    path = umap_path(key)
    if path.exists():
        try:
            return pickle.loads(path.read_bytes())
        except Exception as err:  # a pickle from another umap/numba build: refit
            warnings.warn(f"UMAP cache {path} could not be read ({err!r}); refitting", stacklevel=2)
    reducer = umap.UMAP(n_neighbors=n_neighbors, min_dist=min_dist, n_components=n_components, init="spectral",
                        random_state=seed, n_jobs=1,
                        tqdm_kwds={"disable": not progress, "desc": "UMAP epochs", "mininterval": 5, "leave": False})
    with tqdm(total=3, desc=f"UMAP of {what} ({data.shape[0]} rows)", disable=not progress) as bar:
        bar.set_postfix_str("neighbours, spectral init, epochs (first call compiles numba)")
        reducer.fit(np.asarray(data, dtype=np.float32))
        reducer.tqdm_kwds["disable"] = True
        bar.update()
        bar.set_postfix_str("search index for transform")
        payload = pickle.dumps(reducer)
        bar.update()
        bar.set_postfix_str(f"cache {path.name}")
        write_atomic(path, lambda tmp: tmp.write_bytes(payload))
        write_text_atomic(path.with_suffix(".json"), json.dumps(key, indent=1, sort_keys=True))
        bar.update()
    return reducer


def neighbour_agreement(states: np.ndarray, rows: np.ndarray, k: int = 15) -> np.ndarray:
    """Per state `(m, d)`: the share of its `k` nearest `rows` `(n, d)` in Euclidean distance (what UMAP's
    `transform` looks up) that are also among its `k` rows of largest dot product (what tied logits rank)."""
    dots = states @ rows.T  # (m, n)
    nearest = np.argsort((rows ** 2).sum(1) - 2 * dots, axis=1)[:, :k]  # ||state||^2 is the same for all rows
    largest = np.argsort(-dots, axis=1)[:, :k]
    return (nearest[:, :, None] == largest[:, None, :]).any(-1).mean(-1)


# ----------------------------------------------------------------------------------------------
# travel in the full space


@dataclass(frozen=True)
class Travel:
    """Cosines keyed by target ("true" next tokens, or a baseline's name): `steps[k]` `(n, T-1, L)` for each
    block's update, `trip[k]` `(n, T-1)` for the whole way final_norm(x(L)) - final_norm(x(0)). NaN where
    the target is 0 (next = current)."""

    steps: dict[str, np.ndarray]
    trip: dict[str, np.ndarray]


def shuffled_next(next_ids: np.ndarray, seed: int, within_rows: bool = False) -> np.ndarray:
    """The next tokens `(n, T-1)` permuted with a seeded generator: across the whole sample, or with
    `within_rows` inside each pseudo-sentence (the baseline word then comes from the same passage)."""
    rng = np.random.default_rng(seed)
    if within_rows:
        return rng.permuted(next_ids, axis=1)
    return rng.permutation(next_ids.ravel()).reshape(next_ids.shape)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine over the last axis, NaN where either vector is zero."""
    norms = a.norm(dim=-1) * b.norm(dim=-1)
    return (a * b).sum(-1) / torch.where(norms > 0, norms, torch.nan)


TARGETS = ("W_E", "final_norm(W_E)")  # the embedding table the target direction e_next - e_current uses


@torch.inference_mode()
def travel_cosines(model: Model, ids: np.ndarray, baselines: dict[str, np.ndarray], *, batch_size: int = 16,
                   progress: bool = True) -> dict[str, Travel]:
    """For every position i < T-1 of `ids` `(n, T)` and every block t: the cosine between
    final_norm(x_i(t+1)) - final_norm(x_i(t)) and e[ids_{i+1}] - e[ids_i] ("true"), and the same with each
    baseline's next tokens `(n, T-1)`. One `Travel` per target table in TARGETS (raw or final-normed W_E)."""
    norm, W_E = model.view.final_norm, model.view.W_E.detach().float()
    tables = {"W_E": lambda i: W_E[i], "final_norm(W_E)": lambda i: norm(W_E[i])}
    nexts = {"true": ids[:, 1:], **baselines}
    parts = {(name, part, kind): [] for name in TARGETS for part in ("steps", "trip") for kind in nexts}
    for start in tqdm(range(0, len(ids), batch_size), desc="travel", unit="batch", disable=not progress):
        rows = slice(start, start + batch_size)
        X = torch.from_numpy(capture(model, ids[rows], all_positions=True, batch_size=batch_size, progress=False))
        Y = norm(X[:, :-1])  # (B, T-1, L+1, d)
        moves = {"steps": Y.diff(dim=2), "trip": Y[:, :, -1] - Y[:, :, 0]}
        current = torch.from_numpy(ids[rows, :-1])
        for name, table in tables.items():
            e_current = table(current)
            for kind, nxt in nexts.items():
                direction = table(torch.from_numpy(np.ascontiguousarray(nxt[rows]))) - e_current  # (B, T-1, d)
                parts[name, "steps", kind].append(_cosine(moves["steps"], direction[:, :, None]))
                parts[name, "trip", kind].append(_cosine(moves["trip"], direction))
    joined = {key: torch.cat(chunks).numpy() for key, chunks in parts.items()}
    return {name: Travel(*({kind: joined[name, part, kind] for kind in nexts} for part in ("steps", "trip")))
            for name in TARGETS}


def paired_summary(true: np.ndarray, shuffled: np.ndarray, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> pd.DataFrame:
    """Per column k of `(n, T-1, K)` cosines (or one column of `(n, T-1)`): mean over sentences of each
    sentence's mean (true, shuffled, difference), the difference's standard error over sentences and a
    bootstrap interval resampling whole sentences (positions of one sentence are not independent)."""
    if true.ndim == 2:
        true, shuffled = true[..., None], shuffled[..., None]
    per_sentence = {"true": np.nanmean(true, axis=1), "shuffled": np.nanmean(shuffled, axis=1)}
    difference = per_sentence["true"] - per_sentence["shuffled"]  # (n, K)
    n = len(difference)
    resampled = difference[np.random.default_rng(seed).integers(0, n, size=(n_boot, n))].mean(axis=1)
    lo, hi = np.quantile(resampled, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return pd.DataFrame({"true": per_sentence["true"].mean(0), "shuffled": per_sentence["shuffled"].mean(0),
                         "difference": difference.mean(0), "se": difference.std(0, ddof=1) / np.sqrt(n),
                         "ci_lo": lo, "ci_hi": hi})


def travel_summaries(travel: dict[str, Travel], part: str, **kwargs) -> dict[tuple[str, str], pd.DataFrame]:
    """`paired_summary` of the true next tokens against each baseline (`part` "steps" or "trip"), keyed by
    (target table, baseline name); `kwargs` go to `paired_summary`."""
    return {(name, kind): paired_summary(getattr(t, part)["true"], cosines, **kwargs)
            for name, t in travel.items() for kind, cosines in getattr(t, part).items() if kind != "true"}


# ----------------------------------------------------------------------------------------------
# figures


def path_panels(background: np.ndarray, path: np.ndarray, landmarks: dict[str, np.ndarray], title: str):
    """Four 3-D panels: the input x(0); its normalization; the first half of the blocks; the second half.

    background `(n, 3)` fitted points; path `(L+2, 3)`: x(0), final_norm(x(0)), final_norm(x(1..L));
    landmarks: label -> `(3,)` (the current and the next token). The path is drawn as arrows.
    """
    L, m = len(path) - 2, (len(path) - 2) // 2
    panels = {"input x(0)": (0, 1), "normalized input": (0, 2), f"blocks 1..{m}": (1, m + 2),
              f"blocks {m + 1}..{L}": (m + 1, L + 2)}  # slices of `path`; path[i] is layer max(i - 1, 0)
    colors = plt.get_cmap("viridis")(np.linspace(0, 1, L + 1))
    shown = np.vstack([np.quantile(background, [0.01, 0.99], axis=0), path, *landmarks.values()])
    low, high = shown.min(0), shown.max(0)  # the bulk of the map (a few far outliers left out) and the path
    low, high = low - 0.05 * (high - low), high + 0.05 * (high - low)
    inside = ((background >= low) & (background <= high)).all(1)
    fig = plt.figure(figsize=(12, 10))
    for i, (name, (a, b)) in enumerate(panels.items()):
        ax = fig.add_subplot(2, 2, i + 1, projection="3d")
        ax.scatter(*background[inside].T, s=0.3, c="silver", alpha=0.35, depthshade=False)
        ax.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), zlim=(low[2], high[2]))
        for label, point in landmarks.items():
            ax.scatter(*point, s=30, c="crimson", depthshade=False)
            ax.text(*point, label, color="crimson", fontsize=9)
        points = path[a:b]
        ax.scatter(*points.T, s=12, c=colors[np.maximum(np.arange(a, b) - 1, 0)], depthshade=False)
        if len(points) > 1:  # each arrow takes the colour of the layer it arrives at
            ax.quiver(*points[:-1].T, *np.diff(points, axis=0).T, color=colors[np.arange(a, b - 1)],
                      arrow_length_ratio=0.25, linewidth=1.2)
        ax.set_title(name, fontsize=10)
        ax.tick_params(labelsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def path_figure(background: np.ndarray, background_labels: list[str], path: np.ndarray, path_labels: list[str],
                landmarks: dict[str, np.ndarray], title: str) -> go.Figure:
    """Rotatable 3-D version: grey fitted points (hover: token), the path colored by layer, landmarks."""
    fig = go.Figure(go.Scatter3d(x=background[:, 0], y=background[:, 1], z=background[:, 2], mode="markers",
                                 marker=dict(size=1.5, color="rgba(150,150,150,0.35)"), hovertext=background_labels,
                                 hoverinfo="text", name="embedding rows"))
    fig.add_trace(go.Scatter3d(x=path[:, 0], y=path[:, 1], z=path[:, 2], mode="lines+markers",
                               marker=dict(size=4, color=np.arange(len(path)), colorscale="Viridis"),
                               line=dict(color="black", width=3), hovertext=path_labels, hoverinfo="text",
                               name="path of the token"))
    points = np.array(list(landmarks.values()))
    fig.add_trace(go.Scatter3d(x=points[:, 0], y=points[:, 1], z=points[:, 2], mode="markers+text",
                               text=list(landmarks), marker=dict(size=6, color="crimson"), name="tokens"))
    fig.update_layout(title=title, height=650, margin=dict(l=0, r=0, t=40, b=0),
                      scene=dict(xaxis_title="umap 1", yaxis_title="umap 2", zaxis_title="umap 3"))
    return fig
