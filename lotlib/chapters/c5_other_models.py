"""Chapter C5's study: the Lines of Thought measures on other models, one model at a time."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib.figure import Figure

from ..lines_of_thought.ensemble import ensemble_svd
from ..lines_of_thought.null_tests import (
    SEPARABILITY_MIN,
    language_and_gibberish,
    layer_separability,
)
from ..lines_of_thought.nulls import structureless_cloud
from ..lines_of_thought.pilot_residuals import ALPHA_RELATIVE, pilot_residuals
from ..lines_of_thought.residuals import (
    fit_laws,
    fit_variance,
    pair_mask,
    split_for_bases,
)
from ..lines_of_thought.truncation import next_token_logprobs, truncation_scores
from ..models.bounds import pilot_count
from ..models.corpus import walden
from ..models.devices import DeviceRequest
from ..models.loading import load_model
from ..models.trajectories import trajectories
from ..models.view import ModelView
from ..stats import (
    Estimate,
    resampled_estimate,
    resampling_weights,
)


@dataclass(frozen=True)
class MeasurementProtocol:
    """How C5 measures every model: `n_s` pseudo-sentences of `n_k` tokens of Walden (None: all), the truncation
    on `n_kl` held-out pilots over the grid `ks` (None: powers of two below D) comparing the `top` next tokens,
    the separability of `n_s_gibberish` pseudo-sentences per class of `n_k_gibberish` tokens (`classifier`
    trained on `train_fraction` of them), the BOS check on `n_bos` pseudo-sentences, `n_boot` bootstrap
    resamples of pilots, and the `seed` of the split, the gibberish, the cloud and the resamples."""

    n_k: int = 50
    n_s: int | str | None = None
    n_kl: int = 300
    ks: list[int] | None = None
    top: int = 5
    n_k_gibberish: int = 10
    n_s_gibberish: int | str | None = 2000
    classifier: str = "perceptron"
    train_fraction: float = 0.7
    n_bos: int = 200
    n_boot: int = 1000
    seed: int = 0


@dataclass
class ModelMeasures:
    """One model measured as chapter C5 does: `row` (the summary numbers, by key), the noise laws (`law`, with the
    final norm `normalized`, and the structureless `cloud` or None), the last layer's singular values over the
    first `spectrum` `(k,)`, the truncation `curve` and the separability by layer `separable` `(T,)`."""

    row: dict
    law: dict
    normalized: dict
    cloud: dict | None
    spectrum: np.ndarray
    curve: pd.DataFrame
    separable: np.ndarray

    @property
    def L(self) -> int:
        return self.row["n_layers"]


def loo_log_ratios(log_var: np.ndarray, first: int = 1) -> np.ndarray:
    """Leave-one-layer-out check of the noise law ln var = ln alpha + lambda (t + tau), for every arrival layer.

    For each s = first+1..L the law is refitted (`residuals.fit_laws`) on the pairs first <= t < t + tau <= L
    that do not touch layer s (neither as departure nor as arrival), and r(s) is the mean over departures t of
    ln var(t, s) minus the refitted law's prediction at s: how far layer s is off a law that never saw it
    (0 = on the law). log_var `(..., T, T)` indexed `[t, t + tau]` -> `(..., T)`, NaN for s <= first.
    """
    T = log_var.shape[-1]
    pairs = pair_mask(T, first, T - 1)
    out = np.full(log_var.shape[:-2] + (T,), np.nan)
    for s in range(first + 1, T):
        without = pairs.copy()
        without[s, :] = without[:, s] = False
        law = fit_laws(log_var, without)
        out[..., s] = (
            np.nanmean(log_var[..., first:s, s], axis=-1)
            - np.log(law["alpha"])
            - law["lambda"] * s
        )
    return out


def last_layer_excess(log_ratios: np.ndarray, compared_from: int) -> np.ndarray:
    """abs(r(L)) - max abs(r(s)) over compared_from <= s < L, from `loo_log_ratios` `(..., T)`: `(...)`, in ln units.
    Positive when the last layer is further off the law than every compared layer."""
    others = np.abs(log_ratios[..., compared_from:-1])
    return np.abs(log_ratios[..., -1]) - np.nanmax(others, axis=-1)


@torch.inference_mode()
def last_layer_normalized(
    view: ModelView,
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    batch_size: int = 4096,
    fitted: np.ndarray | None = None,
):
    """X, U, S with the last layer's states replaced by final_norm(x(L)) and its basis recomputed (on the
    pilots `fitted`, default all): the trajectory as `output_hidden_states` reports it in Hugging Face models
    (the last one after the final norm). X `(N, L+1, D)`, U `(L+1, D, k)`, S `(L+1, k)` from `ensemble_svd`;
    returns copies."""
    X, U, S = X.copy(), U.copy(), S.copy()
    for start in range(0, len(X), batch_size):
        rows = torch.as_tensor(X[start : start + batch_size, -1], device=view.device)
        X[start : start + batch_size, -1] = view.final_norm(rows).cpu().numpy()
    last = X[:, -1:] if fitted is None else X[fitted, -1:]
    U[-1:], S[-1:] = ensemble_svd(last, device=view.device)
    return X, U, S


@torch.inference_mode()
def next_token_nll(
    view: ModelView, x: np.ndarray, next_ids: np.ndarray, batch_size: int = 64
) -> np.ndarray:
    """-log p(next_ids) from last-layer states before the final norm, `(n, D)` -> `(n,)` nats. Batched: the
    logits of a 262k-token vocabulary are `batch_size` x V floats at a time."""

    out = np.empty(len(x))
    for start in range(0, len(x), batch_size):
        rows = torch.as_tensor(
            x[start : start + batch_size], dtype=torch.float32, device=view.device
        )
        logp = next_token_logprobs(view, rows)
        ids = torch.as_tensor(
            np.asarray(next_ids[start : start + batch_size], dtype=np.int64),
            device=logp.device,
        )
        out[start : start + len(logp)] = (
            -logp.gather(1, ids[:, None])[:, 0].cpu().numpy()
        )
    return out


def noise_law(
    X: np.ndarray, U: np.ndarray, S: np.ndarray, weights: np.ndarray
) -> dict[str, np.ndarray]:
    """The noise law of trajectories X `(N, L+1, D)` (U, S from `ensemble_svd`) on every row of `weights`
    `(1 + n_boot, N)`: ln(mean variance) and ln(relative variance) of the sample `(T, T)`, the leave-one-out ratios
    of both `(1 + n_boot, T)` (`loo_log_ratios`), lambda of the law on all pairs and the mean ln relative variance
    over pairs `(1 + n_boot,)`."""
    residuals = pilot_residuals(X, U, S, progress=False)
    log_var, log_rel = (
        residuals.log_mean_var(weights),
        residuals.log_relative_var(weights),
    )
    all_pairs = pair_mask(X.shape[1], 1, X.shape[1] - 1)
    return {
        "log_var": log_var[0],
        "log_rel": log_rel[0],
        "loo": loo_log_ratios(log_var),
        "loo_relative": loo_log_ratios(log_rel),
        "lambda": fit_laws(log_var, all_pairs)["lambda"],
        "log_alpha_relative": np.nanmean(log_rel, axis=(1, 2)),
    }


def spectrum_decay(sigma: np.ndarray) -> dict:
    """sigma_1 / sigma_2 and the least-squares slope of ln sigma_i against ln i for i = 10..k/2 (None with fewer
    than two such i) of the singular values `(k,)` of one layer, sorted."""
    k = len(sigma)
    index = np.arange(1, k + 1)
    fitted = (index >= 10) & (index <= k // 2)
    slope = (
        np.polyfit(np.log(index[fitted]), np.log(sigma[fitted]), 1)[0]
        if fitted.sum() >= 2
        else None
    )
    return {"sigma1_over_sigma2": sigma[0] / sigma[1], "spectrum_slope": slope}


def truncation_summary(
    view: ModelView, x: np.ndarray, basis: np.ndarray, protocol: MeasurementProtocol
) -> tuple[dict, pd.DataFrame]:
    """The truncated next-token distribution at the last layer (`truncation.truncation_scores`) of the states x
    `(n, D)` on the basis `(D, k)`, over K in `protocol.ks` (None: powers of two below D) plus 1, D/4 and
    min(D, k): the mean KL at K = 1 and D/4 with bootstrap intervals over pilots (`protocol.n_boot`, seeded),
    their ratio and the top-`protocol.top` overlap at D/4 (None where D/4 >= k: nothing is truncated), and the
    curve of the mean KL against K/D."""

    D, k = basis.shape
    ks, top = protocol.ks, protocol.top
    grid = sorted(
        {K for K in (ks or [2**j for j in range(int(np.log2(D)) + 1)]) if K <= k}
        | {1, D // 4, min(D, k)}
    )
    batch = max(1, 2**24 // view.vocab_size)  # about 16 million logits at a time
    scores = truncation_scores(
        view, x, basis, grid, top=top, batch_size=batch, progress=False
    )
    n = scores.kl.shape[1]
    kl_weights = resampling_weights(n, protocol.n_boot, protocol.seed)
    kl_1, kl_quarter = (kl_weights @ scores.kl[grid.index(K)] / n for K in (1, D // 4))
    usable = D // 4 < k
    quarter = lambda values: (
        resampled_estimate(values, n, unit="pilots") if usable else None
    )
    row = {
        "kl_at_1": resampled_estimate(kl_1, n, unit="pilots"),
        "kl_at_quarter": quarter(kl_quarter),
        "kl_ratio_quarter": quarter(kl_quarter / kl_1),
        f"top{top}_overlap_quarter": float(scores.overlap[grid.index(D // 4)].mean())
        if usable
        else None,
    }
    curve = pd.DataFrame(
        {"K / D": np.array(grid) / D, "mean KL (nats)": scores.kl.mean(1)}
    )
    return row, curve


def last_layer_summary(law: dict, normalized: dict, L: int, N: int) -> dict:
    """From `noise_law` of the trajectories (`law`) and of the same with the final norm on x(L) (`normalized`):
    lambda and lambda L, alpha relative to the arrival spread, the arrival R^2, r(L) and the last layer's excess
    over the layers L/2..L-1 (`last_layer_excess`) on the three readings, with normal bootstrap intervals over the
    `N` pilots, and the mean `|r|` of the early (s < max(3, L/4)) and late (L/2 <= s < L) layers."""

    compared = L // 2
    estimate = lambda values: resampled_estimate(values, N, unit="pilots")
    return {
        "lambda": estimate(law["lambda"]),
        "lambda_L": estimate(law["lambda"] * L),
        ALPHA_RELATIVE: estimate(np.exp(law["log_alpha_relative"])),
        "arrival_r2": fit_variance(law["log_var"], pair_mask(L + 1, 1, L))[
            "arrival_r2"
        ],
        "last_layer_log_ratio": estimate(law["loo"][:, L]),
        "last_layer_excess": estimate(last_layer_excess(law["loo"], compared)),
        "last_layer_excess_relative": estimate(
            last_layer_excess(law["loo_relative"], compared)
        ),
        "last_layer_excess_final_norm": estimate(
            last_layer_excess(normalized["loo"], compared)
        ),
        "early_layers_mean_abs_log_ratio": float(
            np.nanmean(np.abs(law["loo"][0, : max(3, L // 4)]))
        ),
        "late_layers_mean_abs_log_ratio": float(
            np.nanmean(np.abs(law["loo"][0, compared:L]))
        ),
    }


def cloud_summary(cloud: dict, L: int, N: int) -> dict:
    """The structureless cloud's lambda L and last-layer excesses (on ln(mean variance) and relative), from its
    `noise_law`, with normal bootstrap intervals over the `N` pilots."""
    estimate = lambda values: resampled_estimate(values, N, unit="pilots")
    return {
        "lambda_L_cloud": estimate(cloud["lambda"] * L),
        "last_layer_excess_cloud": estimate(last_layer_excess(cloud["loo"], L // 2)),
        "last_layer_excess_relative_cloud": estimate(
            last_layer_excess(cloud["loo_relative"], L // 2)
        ),
    }


def bos_check(lm, n_k: int, n_bos: int) -> dict:
    """Mean next-token NLL of the true next token (the first of the next pseudo-sentence) from x(L) of the first
    `n_bos` pseudo-sentences, without and with the tokenizer's BOS token; {} when it names none or n_bos is 0."""

    if not n_bos or lm.tokenizer.bos_token_id is None:
        return {}
    following = walden(lm.tokenizer, n_k=n_k, n_s=n_bos + 1, bos=False).ids[1:, 0]
    last = lambda bos: trajectories(
        lm, walden(lm.tokenizer, n_k=n_k, n_s=n_bos, bos=bos), progress=False
    )[:, -1]
    return {
        "bos_token": lm.tokenizer.bos_token,
        "nll_no_bos": next_token_nll(lm.view, last(False), following).mean(),
        "nll_bos": next_token_nll(lm.view, last(True), following).mean(),
    }


def measure_model(
    name: str,
    protocol: MeasurementProtocol,
    *,
    cloud: bool = False,
    device: DeviceRequest = "auto",
    dtype: str = "float32",
) -> ModelMeasures:
    """Load `name` and measure it by `protocol`: trajectories of Walden, the last layer's spectrum
    (`spectrum_decay`), the truncation (`truncation_summary`), the noise law with its bootstrap and with the
    final norm (`last_layer_summary`), the structureless cloud if `cloud`, the separability of Walden and
    gibberish (`gibberish_separability`, one split) and the BOS check (`bos_check`). Out of sample: every basis is
    fitted on a seeded half of the pilots (`residuals.split_for_bases`, at least D of them), and the truncation
    and the noise laws are scored and bootstrapped on the other half."""

    lm = load_model(name, device=device, dtype=dtype)
    view, seed = lm.view, protocol.seed
    L, D = view.n_layers, view.d_model
    n_s = pilot_count(protocol.n_s, D, "n_s", model=name)
    corpus = walden(lm.tokenizer, n_k=protocol.n_k, n_s=n_s)
    # checked before any forward pass
    held, fitted = split_for_bases(len(corpus.ids), D, 0.5, seed, name)
    X = trajectories(lm, corpus)
    N = len(held)
    # U (L+1, D, k), S (L+1, k), by decreasing sigma
    U, S = ensemble_svd(X[fitted], device=lm.device)
    weights = resampling_weights(N, protocol.n_boot, seed)
    row = {
        "n_layers": L,
        "d_model": D,
        "n_s": len(X),
        "n_scored": N,
        "vocabulary": view.vocab_size,
        **spectrum_decay(S[L]),
    }
    truncated, curve = truncation_summary(
        view, X[held[: protocol.n_kl], L], U[L], protocol
    )
    Xn, Un, Sn = last_layer_normalized(view, X, U, S, fitted=fitted)
    law, normalized = (
        noise_law(X[held], U, S, weights),
        noise_law(Xn[held], Un, Sn, weights),
    )
    row |= truncated | last_layer_summary(law, normalized, L, N)
    structureless = None
    if cloud:
        cloud_X = structureless_cloud(X, seed)
        structureless = noise_law(
            cloud_X[held], *ensemble_svd(cloud_X[fitted]), weights
        )
        row |= cloud_summary(structureless, L, N)
    separable = gibberish_separability(lm, protocol)
    row |= {SEPARABILITY_MIN: separable[1:].min()}
    row |= bos_check(lm, protocol.n_k, protocol.n_bos)
    return ModelMeasures(
        row, law, normalized, structureless, S[L] / S[L, 0], curve, separable
    )


def gibberish_separability(lm, protocol: MeasurementProtocol) -> np.ndarray:
    """The test accuracy `(T,)` of one split of `protocol`'s classifier telling Walden from gibberish through
    `lm` at every layer (`null_tests.layer_separability`)."""
    language, noise = language_and_gibberish(
        lm, protocol.n_k_gibberish, protocol.n_s_gibberish, protocol.seed
    )
    return layer_separability(
        trajectories(lm, language),
        trajectories(lm, noise),
        protocol.train_fraction,
        protocol.seed,
        protocol.classifier,
        progress=False,
    )


def claim_values(
    measures: dict[str, ModelMeasures], model: str, protocol: MeasurementProtocol
) -> dict[str, object]:
    """C5's recorded values: the book's `model`'s row, every other model's row under "others", and the
    protocol's settings."""
    return {
        **measures[model].row,
        "model": model,
        "others": {name: m.row for name, m in measures.items() if name != model},
        "n_k": protocol.n_k,
        "n_kl": protocol.n_kl,
        "n_boot": protocol.n_boot,
        "n_s_gibberish": protocol.n_s_gibberish,
        "classifier": protocol.classifier,
    }


MEASURE_LABELS = {
    "n_layers": "layers L",
    "d_model": "width D",
    "n_s": "pilots N_s",
    "n_scored": "pilots scored (the others fit the bases)",
    "vocabulary": "vocabulary",
    "sigma1_over_sigma2": "σ1/σ2 at L",
    "spectrum_slope": "log-log slope of σ_i at L",
    "kl_at_1": "mean KL at K = 1 (nats)",
    "kl_at_quarter": "mean KL at K = D/4 (nats)",
    "kl_ratio_quarter": "KL(D/4) / KL(1)",
    "top{top}_overlap_quarter": "top-{top} overlap at D/4",
    "lambda": "λ (per layer)",
    "lambda_L": "λL, total growth (claim)",
    "lambda_L_cloud": "λL, cloud (null)",
    ALPHA_RELATIVE: "α relative to the arrival spread",
    "arrival_r2": "arrival R² of ln(mean variance)",
    "last_layer_log_ratio": "r(L), last layer off its law (ln)",
    "last_layer_excess": "last-layer excess (claim)",
    "last_layer_excess_relative": "last-layer excess, relative (claim)",
    "last_layer_excess_final_norm": "last-layer excess, final norm (claim)",
    "last_layer_excess_cloud": "last-layer excess, cloud (null)",
    "last_layer_excess_relative_cloud": "last-layer excess, relative, cloud (null)",
    "early_layers_mean_abs_log_ratio": "mean |r| of the early layers",
    "late_layers_mean_abs_log_ratio": "mean |r| of the late layers",
    SEPARABILITY_MIN: "separability, min over t ≥ 1",
    "bos_token": "BOS token",
    "nll_no_bos": "next-token NLL without BOS",
    "nll_bos": "next-token NLL with BOS",
}


def measures_table(rows: dict[str, dict], top: int = 5) -> pd.DataFrame:
    """Every model's `row` side by side, labelled (`MEASURE_LABELS`): an Estimate as `value [lo, hi]`, a float to
    4 significant digits, None as a dash."""

    labels = {
        key.format(top=top): label.format(top=top)
        for key, label in MEASURE_LABELS.items()
    }

    def cell(value) -> str:
        if isinstance(value, Estimate):
            return format(value, ".3g")
        if value is None:
            return "—"
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    table = pd.DataFrame(
        {
            name: {labels[k]: cell(v) for k, v in row.items()}
            for name, row in rows.items()
        }
    )
    return table.reindex([label for label in labels.values() if label in table.index])


def last_layer_law_figure(measures: dict[str, ModelMeasures]) -> Figure:
    """Per model (`ModelMeasures` by name): ln(mean variance) of every pair against the arrival layer,
    colored by departure, the law fitted on all pairs, and the pairs arriving at L with the final norm applied."""

    fig, axes = plt.subplots(
        1, len(measures), figsize=(6.2 * len(measures), 4.3), squeeze=False
    )
    for ax, (name, m) in zip(axes[0], measures.items()):
        L = m.L
        t_idx, s_idx = np.nonzero(pair_mask(L + 1, 1, L))
        points = ax.scatter(
            s_idx, m.law["log_var"][t_idx, s_idx], c=t_idx, cmap="viridis", s=8
        )
        f, grid = (
            fit_variance(m.law["log_var"], pair_mask(L + 1, 1, L)),
            np.linspace(1, L, 50),
        )
        label = f"law on all pairs: λL = {f['lambda'] * L:.2f}"
        ax.plot(
            grid, np.log(f["alpha"]) + f["lambda"] * grid, color="crimson", label=label
        )
        ax.scatter(
            np.full(L - 1, L),
            m.normalized["log_var"][1:L, L],
            marker="x",
            color="crimson",
            s=25,
            label="arrival L, final norm applied",
        )
        ax.axvline(L, color="grey", ls="--", lw=1)
        ax.set(
            xlabel="arrival layer t + τ",
            ylabel="ln(mean variance)",
            title=f"{name}, L = {L}",
        )
        ax.legend(fontsize=8, loc="upper left")
        fig.colorbar(points, ax=ax, label="departure layer t")
    fig.suptitle(
        "Residual variance of the linear extrapolation against the arrival layer; dashed: the last layer"
    )
    fig.tight_layout()
    return fig


def leave_one_out_figure(measures: dict[str, ModelMeasures], model: str) -> Figure:
    """r(s), each arrival layer off the law fitted without it, against the relative depth s/L with 95% bootstrap
    bands: ln(mean variance) and relative to the arrival spread for every model, and `model` against its
    structureless cloud; a circle marks the last layer."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    panels = [(axes[0], "loo", name, name) for name in measures] + [
        (axes[1], "loo_relative", name, name) for name in measures
    ]
    panels += [
        (axes[2], key, model, label)
        for key, label in (("loo", "model"), ("loo_relative", "model, relative"))
    ]
    for ax, key, name, label in panels:
        L = measures[name].L
        depth, r = np.arange(2, L + 1) / L, measures[name].law[key][:, 2:]
        half = 1.96 * np.nanstd(r[1:], axis=0)
        line = ax.plot(depth, r[0], marker="o", ms=3, label=label)[0]
        ax.fill_between(
            depth, r[0] - half, r[0] + half, alpha=0.2, color=line.get_color()
        )
        ax.scatter(
            [1.0], [r[0, -1]], s=80, facecolors="none", edgecolors=line.get_color()
        )
    for key, label in (("loo", "cloud"), ("loo_relative", "cloud, relative")):
        r, L = measures[model].cloud[key][:, 2:], measures[model].L
        axes[2].plot(np.arange(2, L + 1) / L, r[0], ls="--", marker=".", label=label)
    titles = [
        "ln(mean variance)",
        "relative to the arrival spread",
        f"{model} vs a structureless cloud",
    ]
    for ax, title in zip(axes, titles):
        ax.axhline(0, color="grey", lw=1)
        ax.axvline(0.5, color="grey", ls=":", lw=1)
        ax.set(
            xlabel="relative depth s / L",
            ylabel="r(s): off the leave-one-out law (ln units)",
            title=title,
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def spectra_truncation_separability_figure(
    measures: dict[str, ModelMeasures], n_k_gibberish: int
) -> Figure:
    """Per model: the last layer's spectrum over sigma_1, the truncated KL against K/D (dotted: D/4) and the
    separability of Walden and gibberish against the relative depth."""
    spectra = pd.concat(
        [
            pd.DataFrame(
                {
                    "i": np.arange(1, len(m.spectrum) + 1),
                    "σ_i(L) / σ_1(L)": m.spectrum,
                    "model": name,
                }
            )
            for name, m in measures.items()
        ]
    )
    curves = pd.concat([m.curve.assign(model=name) for name, m in measures.items()])
    separable = pd.concat(
        [
            pd.DataFrame(
                {
                    "relative depth t / L": np.arange(len(m.separable))
                    / (len(m.separable) - 1),
                    "test accuracy": m.separable,
                    "model": name,
                }
            )
            for name, m in measures.items()
        ]
    )
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
    sns.lineplot(spectra, x="i", y="σ_i(L) / σ_1(L)", hue="model", ax=axes[0])
    sns.lineplot(
        curves,
        x="K / D",
        y="mean KL (nats)",
        hue="model",
        marker="o",
        ax=axes[1],
        legend=False,
    )
    sns.lineplot(
        separable,
        x="relative depth t / L",
        y="test accuracy",
        hue="model",
        marker="o",
        ax=axes[2],
        legend=False,
    )
    axes[0].set(xscale="log", yscale="log", title="Last layer's spectrum")
    axes[1].set(xscale="log", title="Truncated next-token distribution (last layer)")
    axes[1].axvline(0.25, color="grey", ls=":", lw=1)
    axes[2].set(ylim=(0.4, 1.02), title=f"Walden vs gibberish, N_k = {n_k_gibberish}")
    fig.tight_layout()
    return fig
