"""Chapter A7's study and figures: one token's path through the layers, read by the logit lens and drawn on UMAPs of the embeddings (the paper's Fig. 4)."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go
import seaborn as sns

from ..models.loading import Model
from ..stats import exact
from ..traveling_words.lens import Arrival, TokenPath, arrival, follow_token
from ..traveling_words.umap_map import EmbeddingMaps, embedding_maps


@dataclass(frozen=True)
class TravelingWord:
    """Traveling Words, Fig. 4: one token's `path`, its logit lens (`lens`) and the path on seeded UMAPs of
    the embeddings (`maps`)."""

    path: TokenPath
    lens: Arrival
    maps: EmbeddingMaps

    def summary(self) -> dict:
        """The measured values by name: the next token's logit-lens rank and probability along the path,
        its distance and distance ratio on the maps, its `approach_rank` (mean over seeds) and the
        nearest-row / top-logit agreement."""
        path, lens, maps = self.path, self.lens, self.maps
        L = len(lens.ranks) - 1
        return {
            "token": path.current_name,
            "next_token": path.target_name,
            "position": path.position,
            "n_layers": L,
            "umap_on": maps.what,
            "umap_rows": maps.rows,
            "umap_seeds": maps.seeds,
            "next_rank_first_layer": lens.ranks[0],
            "next_rank_middle_layer": lens.ranks[L // 2],
            "next_rank_last_layer": exact(lens.ranks[L], unit="sentence"),
            "next_prob_last_layer": lens.probs[L],
            "first_layer_next_top1": lens.first_top1,
            "first_layer_next_top5": lens.first_top5,
            "umap_distance_start": maps.maps[0].distance[0],
            "umap_distance_end": maps.maps[0].distance[L],
            "umap_distance_ratio": maps.target_ratio,
            "share_of_tokens_approached": maps.approached,
            "target_approach_rank": maps.target_rank,
            "neighbour_logit_agreement_mean": exact(
                maps.agreement.mean(), n=L + 1, unit="states of one path"
            ),
            "neighbour_logit_agreement_min": maps.agreement.min(),
        }

    def facts(self, bar: float = 0.05) -> dict:
        """What the prose quotes beyond `summary`: the tokens, quoted; which rows the maps are fitted on,
        and the fitted rows beyond them; norms of fitted rows and normalized states, and the shortest state over the median row
        (`length_ratio`); words for where the next token ends (its
        last rank, the first layers of its top 5 and top 1, its map distance, its `approach_rank` interval
        against `bar`) and the per-seed ranks' range."""
        path, maps, first = self.path, self.maps, self.maps.maps[0]
        extra = len(maps.fit_ids) - maps.rows
        states = np.linalg.norm(path.normed, axis=1)
        rank, by_seed = maps.target_rank, maps.ranks_by_seed
        return {
            "tokens": str(path.tokens),
            "token_quoted": repr(path.current_name),
            "next_quoted": repr(path.target_name),
            "extra_rows": f" and {extra} more (the current and next token)"
            if extra
            else "",
            "rows_drawn": "a seeded random draw of the vocabulary's rows, its own for each seed"
            if maps.drawn
            else "the vocabulary's first rows, as in the paper's code",
            "row_norm_median": float(np.median(maps.row_norms)),
            "state_norm_min": float(states.min()),
            "state_norm_max": float(states.max()),
            "length_ratio": float(states.min() / np.median(maps.row_norms)),
            "arrives_word": "is" if self.lens.ranks[-1] == 0 else "is not",
            "top5_text": _at_layer(self.lens.first_top5),
            "top1_text": _at_layer(self.lens.first_top1),
            "map_distance_word": "closer to"
            if first.distance[-1] < first.distance[0]
            else "farther from",
            "rank_side": "lies below"
            if rank.hi < bar
            else "lies above"
            if rank.lo > bar
            else "straddles",
            "rank_seed_min": float(by_seed.min()),
            "rank_seed_max": float(by_seed.max()),
        }


def _at_layer(layer: int | None) -> str:
    return "at no layer" if layer is None else f"at layer {layer}"


def traveling_word(
    model: Model,
    sentence: str,
    token_index: int,
    *,
    seeds: list[int],
    top_k: int = 5,
    **map_options,
) -> TravelingWord:
    """Follow token `token_index` of `sentence` (`follow_token`), read it with the logit lens (`arrival`,
    `top_k` tokens per layer) and place it on one UMAP per seed (`embedding_maps`, with `map_options`)."""
    if not seeds:
        raise ValueError("at least one UMAP seed is needed")
    path = follow_token(model, sentence, token_index)
    return TravelingWord(
        path=path,
        lens=arrival(model, path, k=top_k),
        maps=embedding_maps(model, path, seeds=seeds, **map_options),
    )


def path_panels(
    background: np.ndarray,
    path: np.ndarray,
    landmarks: dict[str, np.ndarray],
    title: str,
):
    """Four 3-D panels: the input x(0); its normalization; the first half of the blocks; the second half.

    background `(n, 3)` fitted points; path `(L+2, 3)`: x(0), final_norm(x(0)), final_norm(x(1..L));
    landmarks: label -> `(3,)` (the current and the next token). The path is drawn as arrows.
    """
    L, m = len(path) - 2, (len(path) - 2) // 2
    # slices of `path`; path[i] is layer max(i - 1, 0)
    panels = {
        "input x(0)": (0, 1),
        "normalized input": (0, 2),
        f"blocks 1..{m}": (1, m + 2),
        f"blocks {m + 1}..{L}": (m + 1, L + 2),
    }
    colors = plt.get_cmap("viridis")(np.linspace(0, 1, L + 1))
    shown = np.vstack(
        [np.quantile(background, [0.01, 0.99], axis=0), path, *landmarks.values()]
    )
    # the bulk of the map (a few far outliers left out) and the path
    low, high = shown.min(0), shown.max(0)
    low, high = low - 0.05 * (high - low), high + 0.05 * (high - low)
    inside = ((background >= low) & (background <= high)).all(1)
    fig = plt.figure(figsize=(12, 10))
    for i, (name, (a, b)) in enumerate(panels.items()):
        ax = fig.add_subplot(2, 2, i + 1, projection="3d")
        ax.scatter(
            *background[inside].T, s=0.3, c="silver", alpha=0.35, depthshade=False
        )
        ax.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), zlim=(low[2], high[2]))
        for label, point in landmarks.items():
            ax.scatter(*point, s=30, c="crimson", depthshade=False)
            ax.text(*point, label, color="crimson", fontsize=9)
        points = path[a:b]
        ax.scatter(
            *points.T,
            s=12,
            c=colors[np.maximum(np.arange(a, b) - 1, 0)],
            depthshade=False,
        )
        if len(points) > 1:  # each arrow takes the color of the layer it arrives at
            ax.quiver(
                *points[:-1].T,
                *np.diff(points, axis=0).T,
                color=colors[np.arange(a, b - 1)],
                arrow_length_ratio=0.25,
                linewidth=1.2,
            )
        ax.set_title(name, fontsize=10)
        ax.tick_params(labelsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def path_figure(
    background: np.ndarray,
    background_labels: list[str],
    path: np.ndarray,
    path_labels: list[str],
    landmarks: dict[str, np.ndarray],
    title: str,
) -> go.Figure:
    """Rotatable 3-D version: grey fitted points (hover: token), the path colored by layer, landmarks."""
    fig = go.Figure(
        go.Scatter3d(
            x=background[:, 0],
            y=background[:, 1],
            z=background[:, 2],
            mode="markers",
            marker=dict(size=1.5, color="rgba(150,150,150,0.35)"),
            hovertext=background_labels,
            hoverinfo="text",
            name="embedding rows",
        )
    )
    fig.add_trace(
        go.Scatter3d(
            x=path[:, 0],
            y=path[:, 1],
            z=path[:, 2],
            mode="lines+markers",
            marker=dict(size=4, color=np.arange(len(path)), colorscale="Viridis"),
            line=dict(color="black", width=3),
            hovertext=path_labels,
            hoverinfo="text",
            name="path of the token",
        )
    )
    points = np.array(list(landmarks.values()))
    fig.add_trace(
        go.Scatter3d(
            x=points[:, 0],
            y=points[:, 1],
            z=points[:, 2],
            mode="markers+text",
            text=list(landmarks),
            marker=dict(size=6, color="crimson"),
            name="tokens",
        )
    )
    fig.update_layout(
        title=title,
        height=650,
        margin=dict(l=0, r=0, t=40, b=0),
        scene=dict(xaxis_title="umap 1", yaxis_title="umap 2", zaxis_title="umap 3"),
    )
    return fig


def _travel_title(path: TokenPath, maps: EmbeddingMaps, model: str) -> str:
    return (
        f"{path.current_name!r} in {path.sentence!r} travels toward "
        f"{path.target_name!r} ({model}; UMAP of {maps.what})"
    )


def travel_panels(path: TokenPath, maps: EmbeddingMaps, model: str):
    """`path_panels` of the path on the first map (A7, Fig. 4)."""
    m = maps.maps[0]
    return path_panels(
        m.embedding, m.path, m.landmarks, _travel_title(path, maps, model)
    )


def travel_figure(
    path: TokenPath, maps: EmbeddingMaps, lens: Arrival, model: str
) -> go.Figure:
    """`path_figure` of the path on the first map; a path point's hover names its layer's top token."""
    labels = [f"x(0) = input, {path.current_name!r}"] + [
        f"final_norm(x({t})): top {top!r}" for t, top in enumerate(lens.top1)
    ]
    m = maps.maps[0]
    title = _travel_title(path, maps, model)
    return path_figure(m.embedding, maps.labels, m.path, labels, m.landmarks, title)


def arrival_figure(path: TokenPath, maps: EmbeddingMaps, lens: Arrival):
    """The next token's logit-lens rank per layer, and its distance on the first map."""
    layers = np.arange(len(lens.ranks))
    fig, (ax_rank, ax_dist) = plt.subplots(1, 2, figsize=(11, 3.2))
    ax_rank.semilogy(layers, lens.ranks + 1, marker="o")
    ax_rank.set(
        xlabel="layer t",
        ylabel="rank + 1",
        title=f"rank of {path.target_name!r} in the logit lens",
    )
    ax_dist.plot(layers, maps.maps[0].distance, marker="o")
    ax_dist.set(
        xlabel="layer t",
        ylabel="UMAP distance",
        title=f"distance to {path.target_name!r} on the map (seed {maps.seeds[0]})",
    )
    return fig


def heading_figure(path: TokenPath, maps: EmbeddingMaps):
    """Histogram of every other token's distance ratio on the first map, the next token's marked."""
    m = maps.maps[0]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    sns.histplot(
        x=np.log10(m.other_ratios),
        bins=80,
        stat="density",
        color="grey",
        ax=ax,
        label="every other token",
    )
    ax.axvline(
        np.log10(m.ratios[m.at_target]),
        color="crimson",
        lw=2,
        label=f"{path.target_name!r}",
    )
    ax.axvline(0, color="black", ls=":", lw=1, label="ratio 1")
    ax.set(
        xlabel="log10 (end distance / start distance) on the map",
        title=f"How much the path heads for each token (seed {m.seed})",
    )
    ax.legend(fontsize=8)
    return fig
