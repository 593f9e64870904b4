"""The heavy statistics on a torch device against the host implementations they replaced (kept here as the
oracles): on torch's CPU device within 1e-10 relative where they compute in float64 and 1e-5 where their
products are float32; on a CUDA GPU, when torch sees one, within 1e-9 (float64) and 1e-4 (float32: the bases
are refitted by a GPU eigensolver and its float32 sums run in another order)."""

import numpy as np
import pytest
import torch

from lotlib.lines_of_thought.authors_protocol import (
    SUMMARIES,
    authors_pairs,
    coordinate_summaries,
    pair_moments,
    weighted_bases,
)
from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.residuals import (
    pair_statistics,
    resampled_pairs,
    singular_coordinates,
    singular_pair_moments,
    unbiased_excess_kurtosis,
)
from lotlib.stats import resampling_weights

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
CPU = {"float64": 1e-10, "float32": 1e-5}
GPU = {"float64": 1e-9, "float32": 1e-4}


def _close(got, want, rtol, name=""):
    """Within rtol of each value or, for values near 0 (a centred mean), of the field's largest magnitude."""
    want = np.asarray(want, dtype=np.float64)
    scale = np.nanmax(np.abs(want)) if np.isfinite(want).any() else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)


# ---- the host implementations, as they were ----


def _old_weighted_bases(X, counts):
    T, N, D = X.shape
    k, wide, root = min(N, D), N >= D, counts.double().sqrt()[:, None]
    gram = torch.empty((T, D, D) if wide else (T, N, N), dtype=torch.float64)
    for t in range(T):
        Z = X[t].double() * root
        gram[t] = Z.T @ Z if wide else Z @ Z.T
    lam, vec = torch.linalg.eigh(gram)
    S = lam.flip(-1)[:, :k].clamp(min=0.0).sqrt()
    vec = vec.flip(-1)[..., :k]
    if not wide:
        vec = (X.double() * root).mT @ vec / S[:, None, :]
    return vec.float().numpy(), S.numpy()


def _old_pair_moments(X, U, S, counts, n, first_arrival=1):
    T, N, D = X.shape
    U32, S32 = torch.from_numpy(U).float(), torch.from_numpy(S).float()
    V = (X @ U32) / S32[:, None, :]
    c = counts.float()
    out = {name: np.full((T, T), np.nan) for name in SUMMARIES}
    for s in range(max(first_arrival, 1), T):
        dx = (V[:s].reshape(-1, V.shape[-1]) @ (S32[s][:, None] * U32[s].T)).view(s, N, D)
        dx.neg_().add_(X[s])
        mean = (c @ dx) / n
        dx.sub_(mean[:, None]).square_()
        m2 = (c @ dx) / n
        summaries = coordinate_summaries(mean, m2, (c @ dx.square_()) / n, n)
        for name, v in summaries.items():
            out[name][:s, s] = v.numpy()
    return out


def _old_authors_pairs(X, weights, last):
    """Per row of `weights`, the `_old_pair_moments` of the model and of the other reading `last` of x(T)."""
    Xt = torch.as_tensor(np.ascontiguousarray(X.transpose(1, 0, 2), dtype=np.float32))
    last = torch.as_tensor(np.asarray(last, dtype=np.float32))
    T = Xt.shape[0]
    rows = [[], []]
    for w in weights:
        drawn = np.flatnonzero(w)
        Xw, counts, n = Xt[:, drawn], torch.as_tensor(w[drawn], dtype=torch.float64), int(w.sum())
        U, S = align_bases(*_old_weighted_bases(Xw, counts))
        rows[0].append(_old_pair_moments(Xw, U, S, counts, n))
        Xw[-1] = last[drawn]
        u, s = _old_weighted_bases(Xw[-1:], counts)
        u, s = align_bases(np.stack([U[-2], u[0]]), np.stack([S[-2], s[0]]))
        U[-1], S[-1] = u[1], s[1]
        arriving = _old_pair_moments(Xw, U, S, counts, n, first_arrival=T - 1)
        rows[1].append({k: np.where(np.isnan(v), rows[0][-1][k], v) for k, v in arriving.items()})
    return [{k: np.stack([r[k] for r in rs]) for k in SUMMARIES} for rs in rows]


def _old_singular_coordinates(X, U):
    Y = np.matmul(X.astype(np.float32).transpose(1, 0, 2), U.astype(np.float32))
    return Y.transpose(1, 0, 2)


def _old_residual_coordinates(Y, S, t, tau):
    t = np.asarray(t)
    return Y[:, t + tau] - Y[:, t] * (S[t + tau] / S[t]).astype(Y.dtype)


def _old_resampled_pairs(Y, S, layers, weights):
    layers = np.asarray(layers)
    N, T, k = Y.shape
    rows = weights.astype(np.float32)
    n = weights.sum(1)
    distinct = n**2 - np.sum(weights**2, 1)
    out = {name: np.full((len(rows), T, T), np.nan) for name in ("trace", "mean_log_var", "offset", "kurtosis")}
    for tau in range(1, len(layers)):
        t = layers[:-tau]
        W = _old_residual_coordinates(Y, S, t, tau)
        center = W.mean(0)
        Wc = (W - center).reshape(N, -1)
        W2 = Wc * Wc
        s1, s2, s3, s4 = ((rows @ P).astype(np.float64) / n[:, None] for P in (Wc, W2, W2 * Wc, W2 * W2))
        var = s2 - s1**2
        m4 = s4 - 4 * s1 * s3 + 6 * s1**2 * s2 - 3 * s1**4
        var, m4, s1 = (a.reshape(len(rows), len(t), k) for a in (var, m4, s1))
        trace = var.sum(-1)
        mean = center.astype(np.float64)[None] + s1
        self_pairs = (rows**2) @ np.einsum("ntk,ntk->nt", W, W)
        mean_sq = (n[:, None] ** 2 * np.sum(mean**2, -1) - self_pairs) / distinct[:, None]
        out["trace"][:, t, t + tau] = trace
        out["mean_log_var"][:, t, t + tau] = np.log(var).mean(-1)
        out["offset"][:, t, t + tau] = mean_sq / trace
        excess = unbiased_excess_kurtosis(m4 / var**2 - 3.0, n[:, None, None])
        out["kurtosis"][:, t, t + tau] = np.sum(var * excess, -1) / trace
    Yc = Y - Y.mean(0)
    s1 = (rows @ Yc.reshape(N, -1)).astype(np.float64).reshape(len(rows), T, k) / n[:, None, None]
    s2 = (rows @ np.einsum("ntk,ntk->nt", Yc, Yc)).astype(np.float64) / n[:, None]
    return {**out, "spread": s2 - np.sum(s1**2, -1)}


def _old_singular_pair_moments(Y, S, layers, counts=None):
    N, T, k = Y.shape
    w = torch.ones(N, dtype=torch.float64) if counts is None else torch.as_tensor(counts, dtype=torch.float64)
    n = float(w.sum())
    Z = torch.from_numpy(np.ascontiguousarray(Y[:, layers])).double().permute(2, 1, 0).contiguous()
    mean = Z @ w / n
    Z -= mean[..., None]
    Zw, Z2 = Z * w, Z * Z
    E11, E22, E31 = ((A @ B.mT / n).numpy() for A, B in ((Zw, Z), (Z2 * w, Z2), (Z2 * Zw, Z)))
    mean = mean.numpy()
    a, b = np.triu_indices(len(layers), 1)
    r = (S[layers[b]] / S[layers[a]]).T
    var = E11[:, b, b] + r**2 * E11[:, a, a] - 2 * r * E11[:, b, a]
    m4 = (E22[:, b, b] - 4 * r * E31[:, b, a] + 6 * r**2 * E22[:, b, a] - 4 * r**3 * E31[:, a, b]
          + r**4 * E22[:, a, a])
    out = {name: np.full((T, T, k), np.nan) for name in ("z", "var", "kurtosis")}
    t, s = layers[a], layers[b]
    out["z"][t, s] = ((mean[:, b] - r * mean[:, a]) / np.sqrt(var)).T
    out["var"][t, s] = var.T
    out["kurtosis"][t, s] = (m4 / var**2 - 3.0).T
    return out


def _old_pair_statistics(Y, S, layers, U=None, counts=None):
    """The formed residuals' moments, singular (U None) or raw, in numpy: `{z, var, kurtosis}` `(T, T, k)`."""
    if counts is not None:
        Y = np.repeat(Y, counts, axis=0)
    T = Y.shape[1]
    k = Y.shape[2] if U is None else U.shape[1]
    out = {name: np.full((T, T, k), np.nan) for name in ("z", "var", "kurtosis")}
    for tau in range(1, len(layers)):
        t = layers[:-tau]
        W = Y[:, t + tau] - Y[:, t] * (S[t + tau] / S[t]).astype(Y.dtype)
        if U is not None:
            W = np.matmul(
                W.transpose(1, 0, 2), U[t + tau].transpose(0, 2, 1).astype(np.float32)
            ).transpose(1, 0, 2)
        mean = W.mean(axis=0)
        squares = (W - mean) ** 2
        var = squares.mean(axis=0).astype(np.float64)
        m4 = np.einsum("n...,n...->...", squares, squares).astype(np.float64) / len(W)
        out["z"][t, t + tau] = mean / np.sqrt(var)
        out["var"][t, t + tau] = var
        out["kurtosis"][t, t + tau] = m4 / var**2 - 3.0
    return out


# ---- ensembles ----


def _layers_first(N=72, T=5, D=24, seed=0):
    """Heavy-tailed, offset states `(T, N, D)` float32, layer first (the authors' protocol's layout)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(df=6, size=(N, T, D)) * np.linspace(1, 3, D) + 1.5
    return np.ascontiguousarray(X.transpose(1, 0, 2), dtype=np.float32)


def _scored(N=90, T=6, D=16, seed=1, dtype=np.float32):
    """Singular coordinates Y `(N, T, k)` of growing, heavy-tailed states in their aligned bases, with S."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_t(df=6, size=(N, T, D)) + 1.0) * np.exp(0.3 * np.arange(T))[None, :, None]
    U, S = align_bases(*ensemble_svd(X))
    return X, U, S, _old_singular_coordinates(X, U).astype(dtype)


# ---- the checks, on one device ----


def _check_weighted_bases(device, tol):
    rng = np.random.default_rng(2)
    for N, D in ((72, 24), (12, 24)):  # a full basis and a thin one
        X = _layers_first(N=N, D=D)
        counts = rng.integers(1, 4, size=N).astype(np.float64)
        want_U, want_S = _old_weighted_bases(torch.from_numpy(X), torch.from_numpy(counts))
        got_U, got_S = weighted_bases(X, counts, device)
        assert got_U.dtype == np.float32 and got_S.dtype == np.float64
        _close(got_S, want_S, tol["float64"], "S")
        # columns up to sign (an eigensolver's choice); float32 output
        signs = np.sign(np.einsum("tdk,tdk->tk", got_U, want_U))[:, None, :]
        _close(got_U * signs, want_U, tol["float32"], "U")


def _check_pair_moments(device, tol):
    X = _layers_first()
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 4, size=X.shape[1]).astype(np.float64)
    U, S = align_bases(*_old_weighted_bases(torch.from_numpy(X), torch.from_numpy(counts)))
    n = int(counts.sum())
    for first in (1, X.shape[0] - 1):
        want = _old_pair_moments(torch.from_numpy(X), U, S, torch.from_numpy(counts), n, first)
        got = pair_moments(X, U, S, counts, n, first_arrival=first, device=device)
        for name in SUMMARIES:
            assert np.array_equal(np.isnan(got[name]), np.isnan(want[name])), name
            _close(got[name], want[name], tol["float32"], name)


def _check_authors_pairs(device, tol):
    """The whole protocol (bases refit and aligned on each row, another reading of the last layer)."""
    X = _layers_first().transpose(1, 0, 2)
    last = X[:, -1] / np.linalg.norm(X[:, -1], axis=1, keepdims=True)
    weights = resampling_weights(len(X), 3, 0)
    want = _old_authors_pairs(X, weights, last)
    got = authors_pairs(X, weights, progress=False, last_readings=(last,), device=device)
    for g, w in zip(got, want):
        for name in SUMMARIES:
            _close(getattr(g, name)[:, 1:, 1:], w[name], tol["float32"], name)


def _check_singular_coordinates(device, tol):
    X, U, _, want = _scored()
    got = singular_coordinates(X, U, device)
    assert got.dtype == np.float32 and got.shape == want.shape
    _close(got, want, tol["float32"])


def _check_resampled_pairs(device, tol):
    rng = np.random.default_rng(5)
    for dtype, precision in ((np.float32, "float32"), (np.float64, "float64")):
        _, _, S, Y = _scored(dtype=dtype)
        N, T, _ = Y.shape
        weights = np.vstack([resampling_weights(N, 4, 0), np.ones((1, N))])
        weights[-1, rng.integers(0, N, 5)] = 0.0  # a row that leaves pilots out, as the jackknife's do
        layers = np.arange(1, T)
        want = _old_resampled_pairs(Y, S, layers, weights)
        got = resampled_pairs(Y, S, layers, weights, progress=False, device=device)
        for name, value in want.items():
            assert np.array_equal(np.isnan(getattr(got, name)), np.isnan(value)), name
            _close(getattr(got, name), value, tol[precision], f"{name}, {precision}")


def _check_singular_pair_moments(device, tol):
    _, _, S, Y = _scored()
    counts = np.random.default_rng(6).integers(1, 4, size=len(Y))
    layers = np.arange(1, Y.shape[1])
    for c in (None, counts):
        want = _old_singular_pair_moments(Y, S, layers, c)
        got = singular_pair_moments(Y, S, layers, c, device=device)
        for name, value in want.items():
            _close(getattr(got, name), value, tol["float64"], name)
    # the expansion declines where it would lose precision, on every device
    Z = np.random.default_rng(7).standard_normal((400, 2, 3)).astype(np.float32) * 100
    Z[:, 1] = Z[:, 0] + np.random.default_rng(8).standard_normal((400, 3)).astype(np.float32) * 1e-2
    assert singular_pair_moments(Z, np.ones((2, 3)), np.arange(2), device=device) is None


def _check_ensemble_svd(device, tol):
    """The per-layer bases, tall (Gram Z^T Z) and wide (Z Z^T), against LAPACK's SVD: the same values, the same
    vectors up to sign, each signed by the pilots' sum as the host's are."""
    from tests.lines_of_thought.test_ensemble import svd_ensemble_svd

    for N in (90, 12):
        X = _layers_first(N=N).transpose(1, 0, 2).astype(np.float64)
        want_U, want_S = svd_ensemble_svd(X)
        got_U, got_S = ensemble_svd(X, device=device)
        _close(got_S, want_S, tol["float64"], "S")
        signs = np.sign(np.einsum("tdk,tdk->tk", got_U, want_U))[:, None, :]
        _close(got_U * signs, want_U, tol["float64"], "U")
        assert (np.einsum("td,tdk->tk", X.sum(0), got_U) >= 0).all()


def _check_pair_statistics(device, tol):
    """The formed residuals (no expansion), in the singular and in the raw basis, once each and counted."""
    _, U, S, Y = _scored()
    counts = np.random.default_rng(9).integers(1, 4, size=len(Y))
    layers = np.arange(1, Y.shape[1])
    for basis in (None, U):
        for c in (None, counts):
            want = _old_pair_statistics(Y, S, layers, basis, c)
            got = pair_statistics(
                Y, S, layers, U=basis, counts=c, expand=False, progress=False, device=device
            )
            for name, value in want.items():
                assert np.array_equal(np.isnan(getattr(got, name)), np.isnan(value)), name
                _close(getattr(got, name), value, tol["float32"], name)


CHECKS = [
    _check_ensemble_svd,
    _check_weighted_bases,
    _check_pair_moments,
    _check_authors_pairs,
    _check_singular_coordinates,
    _check_resampled_pairs,
    _check_singular_pair_moments,
    _check_pair_statistics,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("_check_"))
def test_torch_on_the_cpu_gives_the_host_result(check):
    check("cpu", CPU)


@CUDA
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("_check_"))
def test_cuda_gives_the_host_result(check):
    check("cuda", GPU)
