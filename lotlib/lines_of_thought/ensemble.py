"""Ensemble SVD: the per-layer, uncentered singular basis of the pilots' states, computed once for the book
(`stored`); how many directions an ensemble spans around its mean; and structureless Gaussian clouds shaped
like an ensemble (the nulls of those measures)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ..models.bounds import ParameterError, pilot_count
from ..models.devices import DeviceRequest
from ..stats import draw_pilots
from ..stats.backend import Device, as_tensor, single_thread, to_numpy
from ..storage.results import cached_result

STORED_SIZE = 2**20
"""The least size T·D·k of a basis that `ensemble_svd` and `stored_alignment` keep on disk for the whole book;
smaller ones are recomputed, cheaply, and never fill the cache."""


def ensemble_svd(
    X: np.ndarray, k: int | None = None, device: Device = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """Thin SVD of the `(D, N)` matrix of states at every layer, **uncentered**: x = U S V^T.

    X: `(N, L+1, D)`. Returns U `(L+1, D, k)` (columns are singular vectors) and S `(L+1, k)`,
    with k = min(N, D) unless given (`layer_basis`, per layer, on `device`). Each column is signed so that
    the pilots' sum has a non-negative coordinate on it; align before comparing layers. Bases of at least
    `STORED_SIZE` values are kept by X's contents and k (`stored`): the chapters that ask for the same
    pilots' bases read back, bit for bit, those the first one computed, on whatever device it ran.
    """
    N, T, D = X.shape
    k = k or min(N, D)
    return stored(
        "ensemble_svd", T * D * k, {"X": X, "k": k}, lambda: _layer_bases(X, k, device)
    )


def _layer_bases(
    X: np.ndarray, k: int, device: Device
) -> tuple[np.ndarray, np.ndarray]:
    """`ensemble_svd` computed: `layer_basis` of each layer of X `(N, T, D)`, U `(T, D, k)`, S `(T, k)`."""
    N, T, D = X.shape
    U = np.empty((T, D, k), dtype=np.float64)
    S = np.empty((T, k), dtype=np.float64)
    # threaded eigensolvers of this size run several times slower on busy cores
    with single_thread():
        for t in range(T):
            U[t], S[t] = layer_basis(X[:, t, :], k, device)
    return U, S


def stored(
    kind: str,
    size: int,
    key: dict,
    compute: Callable[[], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """`compute()`, of or about a basis of `size` values, kept on disk under `kind` and `key` (arrays by their
    bytes, `storage.results.cached_result`) when the basis has at least `STORED_SIZE` values: computed once
    for the book."""
    if size < STORED_SIZE:
        return compute()
    return cached_result(kind, key, compute)


# the least ratio lambda_k / lambda_1 of kept to largest Gram eigenvalue for which `layer_basis` reads the
# basis off the Gram matrix: its rounding, about eps lambda_1, costs lambda_k a relative eps / ratio
GRAM_CONDITION = 1e-8


def layer_basis(
    Z: np.ndarray, k: int, device: Device = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """The first `k` right singular vectors `(D, k)` and singular values `(k,)` of Z `(N, D)`, in float64 on
    `device`, sorted by decreasing singular value, each vector signed so that the rows' sum has a
    non-negative coordinate on it.

    From the eigenvectors of the smaller Gram matrix (Z^T Z, or Z Z^T when N < D, its vectors mapped
    through Z^T and divided by the singular values), as the SVD's right vectors without its left ones;
    from the SVD itself when the k-th eigenvalue is below `GRAM_CONDITION` times the largest (a rank-
    deficient or ill-conditioned layer, where the Gram matrix's rounding would reach the smallest values).
    """
    Z = as_tensor(Z, device, torch.float64)
    tall = Z.shape[0] >= Z.shape[1]
    lam, vec = torch.linalg.eigh(Z.T @ Z if tall else Z @ Z.T)
    lam, vec = lam.flip(0)[:k], vec.flip(1)[:, :k]
    if lam[-1] > GRAM_CONDITION * lam[0]:
        s = lam.sqrt()
        V = vec if tall else Z.T @ vec / s
    else:
        _, s, vh = torch.linalg.svd(Z, full_matrices=False)
        s, V = s[:k], vh[:k].T
    V = V * torch.where(Z.sum(0) @ V < 0, -1.0, 1.0)
    return to_numpy(V), to_numpy(s)


def align_bases(
    U: np.ndarray, S: np.ndarray, reference: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Re-order and re-sign singular vectors so that column i means the same direction at every layer.

    U `(T, D, k)`, S `(T, k)` from `ensemble_svd`. Starting from layer `reference` (kept as it is, so its
    order by decreasing sigma names the columns; -1 for the last layer), each neighbouring layer is
    matched to the already aligned one by an optimal assignment on abs(U(t)^T U(t±1)) (Hungarian
    algorithm; the authors match greedily), then each matched column's sign is chosen so that its inner
    product with its partner is positive. Returns aligned copies; singular values follow their vectors
    (sorted only at the reference layer).
    """
    return _alignment(U, S, reference)[:2]


def _alignment(
    U: np.ndarray, S: np.ndarray, reference: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`align_bases` of U `(T, D, k)`, S `(T, k)`, and the column order `(T, k)` and signs `(T, k)` it gave
    each layer (`aligned_by` applies them)."""
    from scipy.optimize import linear_sum_assignment

    U, S = U.copy(), S.copy()
    order = np.tile(np.arange(U.shape[2]), (len(U), 1))
    flips = np.ones(order.shape)
    reference %= len(U)
    steps = [(t - 1, t) for t in range(reference + 1, len(U))] + [
        (t + 1, t) for t in range(reference - 1, -1, -1)
    ]
    for done, t in steps:
        overlap = U[done].T @ U[t]  # (k, k)
        _, order[t] = linear_sum_assignment(-np.abs(overlap))
        U[t], S[t] = U[t][:, order[t]], S[t][order[t]]
        signs = np.sign(np.einsum("di,di->i", U[done], U[t]))
        flips[t] = np.where(signs == 0, 1.0, signs)
        U[t] *= flips[t]
    return U, S, order, flips


def aligned_by(
    U: np.ndarray, S: np.ndarray, order: np.ndarray, signs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """U `(T, D, k)` and S `(T, k)` with each layer's columns put in `order` `(T, k)` and multiplied by `signs`
    `(T, k)`: the copies `align_bases` returns, bit for bit, from the order and signs it chose."""
    U = np.take_along_axis(U, order[:, None, :], axis=2)
    U *= signs[:, None, :]
    return U, np.take_along_axis(S, order, axis=1)


def stored_alignment(
    U: np.ndarray, S: np.ndarray, reference: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`align_bases(U, S, reference)` of U `(T, D, k)`, S `(T, k)` sorted, its column order and signs kept by
    the bases' contents (`stored`) and applied (`aligned_by`): aligned copies."""
    reference %= len(U)
    order, signs = stored(
        "alignment",
        U.size,
        {"U": U, "S": S, "reference": reference},
        lambda: _alignment(U, S, reference)[2:],
    )
    return aligned_by(U, S, order, signs)


def aligned_svd(
    X: np.ndarray, device: Device = "cpu", reference: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`align_bases(*ensemble_svd(X, device=device), reference)` of X `(N, T, D)`, both kept (`ensemble_svd`,
    `stored_alignment`): U `(T, D, k)`, S `(T, k)`."""
    return stored_alignment(*ensemble_svd(X, device=device), reference)


@dataclass
class Ensemble:
    """The pilots of a Lines of Thought chapter: the model, its pseudo-sentences and their trajectories
    `X` `(N_s, L+1, D)`, with the per-layer singular bases aligned across layers (computed on first use)."""

    lm: object
    corpus: object
    X: np.ndarray

    @property
    def n_s(self) -> int:
        return self.X.shape[0]

    @property
    def L(self) -> int:
        return self.X.shape[1] - 1

    @property
    def D(self) -> int:
        return self.X.shape[2]

    @property
    def sizes(self) -> dict[str, int]:
        """The sizes a chapter records: pilots `n_s`, layers `n_layers` (L) and width `d_model` (D)."""
        return {"n_s": self.n_s, "n_layers": self.L, "d_model": self.D}

    @cached_property
    def aligned(self) -> tuple[np.ndarray, np.ndarray]:
        """`aligned_svd(X)` over every pilot, on the model's device: U `(L+1, D, k)`, S `(L+1, k)`."""
        return aligned_svd(self.X, self.lm.device)

    def authors_pilots(
        self, n_s: int | str, seed: int, cap: int | str | None
    ) -> np.ndarray:
        """`authors_pilots` of these pilots, read under the chapter's count `cap`: sorted
        indices of `n_s` of them ("2.8D": the paper's ratio), or all of them where the corpus ran out first."""

        return authors_pilots(self.n_s, self.D, n_s, seed, model=self.lm.name, cap=cap)

    def __repr__(self) -> str:
        return f"{self.lm!r}\n{self.corpus!r}: trajectories {self.X.shape}"


def open_ensemble(
    model: str,
    n_k: int = 50,
    n_s: int | str | None = None,
    bos: bool | None = None,
    *,
    device: DeviceRequest = "auto",
    dtype: str = "float32",
    at_least_width: bool = False,
) -> Ensemble:
    """How every Lines of Thought chapter opens: `model` loaded on `device` in `dtype`, Walden cut into
    `n_s` pseudo-sentences of `n_k` tokens (a count, "kD" or None for all; `at_least_width` refuses fewer
    than D, even when all of Walden is fewer) and their trajectories from the cache."""
    from ..models.trajectories import walden_trajectories

    lm, corpus, X = walden_trajectories(
        model, n_k=n_k, n_s=n_s, bos=bos, device=device, dtype=dtype
    )
    if at_least_width:
        pilot_count(len(X), X.shape[2], "n_s", at_least_width=True, model=lm.name)
    return Ensemble(lm, corpus, X)


# --- B2: how the singular basis turns across layers, and its spectra -------------------------------------


@dataclass(frozen=True)
class Turning:
    """How the first n aligned singular directions u_1..u_n turn across layers (`basis_turning`).

    angles `(n, T, T)` in degrees; step `(n, L-1)` between consecutive blocks' outputs t, t+1 for t = 1..L-1;
    middle_to_last `(n,)` u_i(L/2) vs u_i(L); embedding `(n,)` u_i(0) vs u_i(1); last_step `(n,)` u_i(L-1)
    vs u_i(L); top `(n,)` the largest rank of u_i among the directions of layers t = 1..L (1 is the first).
    """

    angles: np.ndarray
    step: np.ndarray
    middle_to_last: np.ndarray
    embedding: np.ndarray
    last_step: np.ndarray
    top: np.ndarray


def basis_turning(
    U_aligned: np.ndarray, S: np.ndarray, S_aligned: np.ndarray, n: int = 4
) -> Turning:
    """Angles arccos(`|u_i(t1).u_i(t2)|`) of the first `n` aligned directions (`align_bases`) at every pair of
    layers, and their readings (`Turning`). U_aligned `(T, D, k)`; S `(T, k)` sorted per layer (the ranks
    are counted in it); S_aligned `(T, k)` the singular values that follow the aligned columns."""

    angles = np.stack([basis_angles(U_aligned, i) for i in range(n)])  # (n, T, T)
    L = len(S) - 1
    layers = np.arange(1, L)
    rank = (S[:, None, :] > S_aligned[:, :n, None]).sum(-1)  # (T, n) directions above
    return Turning(
        angles=angles,
        step=angles[:, layers, layers + 1],
        middle_to_last=angles[:, L // 2, L],
        embedding=angles[:, 0, 1],
        last_step=angles[:, L - 1, L],
        top=rank[1:].max(0) + 1,
    )


def basis_angles(U: np.ndarray, i: int) -> np.ndarray:
    """Angle in degrees between singular vector i at every pair of layers, arccos`|u_i(t1).u_i(t2)|`: `(T, T)`.

    U `(T, D, k)` aligned; 0 on the diagonal, 90 for orthogonal directions.
    """
    u = U[:, :, i]
    return np.degrees(np.arccos(np.clip(np.abs(u @ u.T), 0.0, 1.0)))


def authors_pilots(
    n_pilots: int,
    d_model: int,
    n_s: int | str = "2.8D",
    seed: int = 0,
    param: str = "n_s_paper",
    model: str = "the model",
    *,
    cap: int | str | None,
) -> np.ndarray:
    """Sorted indices of a seeded subset of `n_pilots` pilots of the paper's size: `n_s` pilots, a count
    or a multiple of the width `d_model` ("2.8D": about 2,900 pilots for GPT-2 medium's D = 1024, rounded
    up by `lotlib.models.bounds.pilot_count`).

    `cap` is the chapter's own count, the one the `n_pilots` were read under (None: all of the corpus). When
    the corpus ran out before it (fewer pilots than `cap`, or `cap` None) and `n_s` asks for more than there
    are, all of them are taken: the paper's practice for its widest models, whose tokenizers cut Walden into
    fewer than 2.8 D pseudo-sentences (`authors_pilots_label` says so). Raises `ParameterError` naming `param`
    when the pilots were capped below `n_s`, or number fewer than `d_model` (a full basis)."""

    want = pilot_count(n_s, d_model, param, model=model)
    limit = pilot_count(cap, d_model, "n_s", model=model)
    corpus_ran_out = limit is None or n_pilots < limit
    if want > n_pilots and not (corpus_ran_out and n_pilots >= d_model):
        raise ParameterError(
            f"parameter {param} = {n_s!r} asks for {want} pilots (D = {d_model}) but the ensemble "
            f"of {model} has {n_pilots}: open it with n_s >= {want}, or lower {param}"
        )
    if want >= n_pilots:
        return np.arange(n_pilots)
    return draw_pilots(n_pilots, want, np.random.default_rng(seed))


def authors_pilots_label(count: int, d_model: int, n_s: int | str = "2.8D") -> str:
    """How many pilots `authors_pilots` took, in words: "2.8 D = 1,613 pilots", or, when the corpus was shorter
    than `n_s` asks at width `d_model`, "2,851 pilots, all of Walden (...)"."""

    want = pilot_count(n_s, d_model)
    asked = f"{want:,}"
    if isinstance(n_s, str):  # "2.8D" -> "2.8 D = 4,301"
        asked = f"{(n_s.replace(' ', '')[:-1] + ' D').strip()} = {want:,}"
    if count >= want:
        return f"{asked} pilots"
    return (
        f"{count:,} pilots, all of Walden ({asked} is more than it has at this tokenizer and width; the "
        f"paper's 7B models, D = 4,096, can only have read all of it too)"
    )
