"""Linear extrapolation of an ensemble between layers (Lines of Thought, Eq. 1), its held-out bases and the
SVMs that tell it from the truth."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..stats import (
    split_pilots,
    training_rows,
)
from .ensemble import align_bases
from .nulls import gaussian_cloud


def extrapolate(
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    t: int,
    tau: int,
    rank: int | None = None,
) -> np.ndarray:
    """Eq. 1: the states at layer t carried to layer t + tau, `(N, D)` (float64),

        x~(t, tau) = U(t+tau) Lambda U(t)^T x(t),    Lambda = Sigma(t+tau) Sigma(t)^-1.

    X: trajectories `(N, T, D)`; U `(T, D, k)`, S `(T, k)` aligned across layers (`ensemble.ensemble_svd`
    then `align_bases`, so column i is the same direction at every t). `rank=None` uses all k columns
    (k = min(N, D) from `ensemble_svd`); `rank=r` uses the r columns with the largest sigma at layer t.
    Directions whose sigma(t) is numerically zero are dropped (a pseudo-inverse of Sigma(t)).
    """
    cols = _columns(S[t], rank)
    source, target = U[t][:, cols], U[t + tau][:, cols]
    coords = X[:, t, :].astype(np.float64) @ source  # (N, r)
    return (coords * _ratio(S[t + tau][cols], S[t][cols])) @ target.T


def eq1_residuals(
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    t: int,
    tau: int,
    rank: int | None = None,
) -> np.ndarray:
    """w = x(t+tau) - x~(t, tau), `(N, D)` (float64): what the linear extrapolation misses."""
    return X[:, t + tau, :].astype(np.float64) - extrapolate(X, U, S, t, tau, rank)


def svm_accuracy(
    A: np.ndarray, B: np.ndarray, folds: int = 5, seed: int = 0, C: float = 1.0
) -> float:
    """Cross-validated accuracy of a linear SVM telling ensemble A from ensemble B, both `(n, f)`.

    Rows are paired (row j of A and of B come from the same pilot): a pair is always in the same fold,
    so the test pilots are never seen in training. Features are standardized on each training split;
    the SVM is sklearn's LinearSVC in the primal (`linear_svc`; the dual solver fails to converge on ensembles
    this alike). 0.5 means indistinguishable, 1.0 linearly separable.
    """
    _check_pairs(A, B)
    n = len(A)
    fold = np.tile(np.random.default_rng(seed).permutation(n) % folds, 2)
    features = np.concatenate([A, B]).astype(np.float64)
    labels = np.repeat([0, 1], n)
    return float(
        np.mean([_fit_score(features, labels, fold != f, C) for f in range(folds)])
    )


def svm_split_accuracy(
    A: np.ndarray,
    B: np.ndarray,
    pilots: np.ndarray,
    rng: np.random.Generator,
    *,
    C: float = 0.1,
    train_fraction: float = 0.5,
) -> float:
    """Test accuracy of a linear SVM telling A from B, both `(n, f)` with paired rows: row j of each comes
    from pilot `pilots[j]` `(n,)` (repeats allowed, as in a bootstrap draw). A random `train_fraction` of the
    distinct pilots (drawn with `rng`, `training_rows`) trains, the others test; a pilot's rows, and every copy
    of a pilot drawn twice, are on one side (`split_accuracy`)."""
    return split_accuracy(A, B, training_rows(pilots, rng, train_fraction), C=C)


def split_accuracy(
    A: np.ndarray, B: np.ndarray, train: np.ndarray, *, C: float = 0.1
) -> float:
    """Test accuracy of a linear SVM telling A from B, both `(n, f)` with paired rows, trained on the rows
    `train` `(n,)` bool of both and scored on the others. Standardized features, LinearSVC in the primal
    (`linear_svc`), balanced classes."""
    _check_pairs(A, B)
    features = np.concatenate([A, B]).astype(np.float64)
    return _fit_score(features, np.repeat([0, 1], len(A)), np.tile(train, 2), C)


def _fit_score(
    features: np.ndarray, labels: np.ndarray, train: np.ndarray, C: float
) -> float:
    """Accuracy of `svm_predictions` on the rows not in `train`."""
    predicted = svm_predictions(features, labels, train, C)
    return float(np.mean(predicted == labels[~train]))


def svm_predictions(
    features: np.ndarray, labels: np.ndarray, train: np.ndarray, C: float
) -> np.ndarray:
    """Labels `(n_test,)` in {0, 1} that a linear SVM fit on the rows in `train` `(n,)` bool of `features` `(n, f)`
    with `labels` `(n,)` in {0, 1} gives the other rows: what sklearn's StandardScaler then LinearSVC(C=C,
    dual=False, max_iter=5000) predict, by `linear_svc`."""
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(features[train])
    w = linear_svc(scaler.transform(features[train]), labels[train], C)
    scores = scaler.transform(features[~train]) @ w[:-1, None] + w[-1:]
    return (scores.ravel() > 0).astype(labels.dtype)


def weighted_svd(
    X: np.ndarray, counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """`ensemble_svd` of the pilots of X `(N, T, D)` with pilot j taken `counts[j]` times `(N,)` (None: once
    each; 0 leaves it out), as a bootstrap draw has them, from each layer's `(D, D)` Gram matrix in float64:
    U `(T, D, k)` and S `(T, k)` sorted by decreasing singular value, k = min(sum(counts), D). Squared
    singular values below D x eps of the largest are set to 0 (a draw with fewer distinct pilots than D), so
    that Eq. 1 drops those directions."""
    counts = np.ones(len(X)) if counts is None else np.asarray(counts, np.float64)
    kept = np.flatnonzero(counts)
    root = np.sqrt(counts[kept])[:, None]
    N, T, D = int(counts.sum()), X.shape[1], X.shape[2]
    k = min(N, D)
    U, S = np.empty((T, D, k)), np.empty((T, k))
    with threadpool_limits(limits=1):
        for t in range(T):
            Z = X[kept, t].astype(np.float64) * root
            lam, vec = np.linalg.eigh(Z.T @ Z)
            lam, vec = lam[::-1][:k], vec[:, ::-1][:, :k]
            lam[lam <= lam[0] * D * np.finfo(np.float64).eps] = 0.0
            U[t], S[t] = vec, np.sqrt(lam)
    return U, S


def _check_pairs(A: np.ndarray, B: np.ndarray) -> None:
    if A.shape != B.shape:
        raise ValueError(
            f"the SVM needs paired ensembles of one shape, got {A.shape} and {B.shape}"
        )


def _columns(sigma: np.ndarray, rank: int | None) -> np.ndarray:
    order = np.argsort(sigma)[::-1]
    return np.sort(order[:rank]) if rank is not None else np.arange(len(sigma))


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    keep = (
        denominator
        > denominator.max() * max(denominator.shape) * np.finfo(np.float64).eps
    )
    return np.where(keep, numerator / np.where(keep, denominator, 1.0), 0.0)


@dataclass
class HeldOutBases:
    """Layers first..L of the trajectories, `Xs` `(N, L-first+1, D)` float64 (layer t is `Xs[:, t - first]`),
    with the aligned bases U `(L-first+1, D, k)`, S `(L-first+1, k)` fit on the `fit` pilots (aligned from
    layer `first`) and the `held` pilots held out for scoring. `rank` is Eq. 1's (None: all k columns)."""

    Xs: np.ndarray
    first: int
    fit: np.ndarray
    held: np.ndarray
    U: np.ndarray
    S: np.ndarray
    rank: int | None = None

    @classmethod
    def split(
        cls, X: np.ndarray, first: int, seed: int = 0, rank: int | None = None
    ) -> HeldOutBases:
        """Trajectories X `(N, L+1, D)`: a random half of the pilots (seeded) fits the bases of layers
        first..L. Warns when that half has fewer than 1.5 D pilots (incomplete or ill-conditioned bases)."""
        Xs = X[:, first:].astype(np.float64)
        study = _split(Xs, first, np.random.default_rng(seed), rank)
        if len(study.fit) < 1.5 * X.shape[2]:
            warnings.warn(
                f"{len(study.fit)} fit pilots for D = {X.shape[2]}: below 1.5D the bases are "
                "incomplete or ill-conditioned, and Eq. 1's scores measure that; use n_s >= 3D",
                stacklevel=2,
            )
        return study

    def resplit(self, rng: np.random.Generator) -> HeldOutBases:
        """The same layers with a new fit / held-out split drawn with `rng` (and new bases)."""
        return _split(self.Xs, self.first, rng, self.rank)

    @property
    def L(self) -> int:
        return self.first + self.Xs.shape[1] - 1

    @property
    def columns(self) -> int:
        """How many columns Eq. 1 uses."""
        return self.S.shape[1] if self.rank is None else self.rank

    def states(self, pilots: np.ndarray, t: int) -> np.ndarray:
        """True states x(t) of `pilots`: `(n, D)`."""
        return self.Xs[pilots, t - self.first]

    def extrapolate(self, pilots: np.ndarray, t: int, tau: int) -> np.ndarray:
        """Eq. 1 from layer t to t + tau for `pilots`: `(n, D)`."""
        return extrapolate(
            self.Xs[pilots], self.U, self.S, t - self.first, tau, self.rank
        )

    def directions(self, t: int, which: slice) -> np.ndarray:
        """Singular directions of layer t ranked by decreasing sigma, `which` of them: `(D, len)`."""
        r = t - self.first
        return self.U[r][:, np.argsort(self.S[r])[::-1][which]]

    def starts(self, n: int, last: int | None = None) -> np.ndarray:
        """`n` starting layers evenly from `first` to `last` (None: up to L, excluded), distinct."""
        if last is None:
            return np.linspace(self.first, self.L, n + 1)[:-1].round().astype(int)
        return np.unique(np.linspace(self.first, last, n).round().astype(int))

    def pair(
        self,
        pilots: np.ndarray,
        t: int,
        tau: int,
        against: str,
        *,
        seed: int = 0,
        top_k: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The SVM's two classes: the true states of `pilots` at t + tau and `against`, "Eq. 1", "naive"
        (x(t)) or "cloud" (`gaussian_cloud` with the fit pilots' mean and covariance at t + tau, seeded),
        both `(n, f)` (`features`)."""
        if against == "Eq. 1":
            other = self.extrapolate(pilots, t, tau)
        elif against == "naive":
            other = self.states(pilots, t)
        elif against == "cloud":
            other = gaussian_cloud(
                self.states(self.fit, t + tau),
                n=len(pilots),
                seed=seed,
                correlated=True,
            )
        else:
            raise ValueError(
                f"against must be 'Eq. 1', 'naive' or 'cloud', not {against!r}"
            )
        return self.features(self.states(pilots, t + tau), other, t + tau, top_k)

    def features(
        self, A: np.ndarray, B: np.ndarray, t: int, top_k: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """What the SVM sees of states A, B `(n, D)` arriving at layer t: all D coordinates, or with `top_k`
        their coordinates on layer t's top-k singular directions `(n, top_k)`."""
        if top_k is None:
            return A, B
        top = self.directions(t, slice(None, top_k))
        return A @ top, B @ top

    def svm(
        self,
        pilots: np.ndarray,
        t: int,
        tau: int,
        against: str,
        *,
        seed: int = 0,
        C: float = 1.0,
        top_k: int | None = None,
    ) -> float:
        """5-fold `svm_accuracy` of the two classes of `pair`."""
        A, B = self.pair(pilots, t, tau, against, seed=seed, top_k=top_k)
        return svm_accuracy(A, B, seed=seed, C=C)


def _split(
    Xs: np.ndarray, first: int, rng: np.random.Generator, rank: int | None
) -> HeldOutBases:
    n = len(Xs)
    fit, held = split_pilots(n, n // 2, rng)
    U, S = align_bases(*weighted_svd(Xs, np.bincount(fit, minlength=n)), reference=0)
    return HeldOutBases(Xs, first, fit, held, U, S, rank)


# --- LinearSVC's primal solver: liblinear's TRON, compiled ------------------------------------------------


def linear_svc(
    X: np.ndarray,
    labels: np.ndarray,
    C: float,
    *,
    tol: float = 1e-4,
    max_iter: int = 5000,
) -> np.ndarray:
    """The weights `(f + 1,)`, the intercept last, that sklearn's LinearSVC(C=C, dual=False, tol=tol,
    max_iter=max_iter) fits to rows X `(n, f)` with `labels` `(n,)` in {0, 1}, bit for bit.

    The problem: `min_w w.w / 2 + C sum_i max(0, 1 - y_i w.[x_i, 1])^2` with y = 2 labels - 1, the intercept
    a penalized weight on a constant feature 1 (liblinear's bias). The solver: liblinear's trust-region Newton
    method (TRON, Lin, Weng & Keerthi 2008) as sklearn ships it, with its steps and stopping rule, every sum in
    liblinear's order (rows grouped by class, class 0 first) and every vector operation by the BLAS sklearn
    calls, so that each floating-point result is liblinear's; numba compiles the loops over dense rows, where
    liblinear walks sparse ones. An exact solver would not do: liblinear stops at a gradient 1e-4 times the
    first, and an exact optimum flips a few of its predictions."""
    y = labels.astype(np.float64) * 2 - 1
    if len(np.unique(y)) < 2:
        raise ValueError(f"the SVM needs two classes, got labels {np.unique(labels)}")
    if not np.isfinite(X).all():
        raise ValueError("the SVM's features hold NaN or infinity")
    loss = _SquaredHinge.of(X, y, C)
    eps = tol * max(min(np.sum(y > 0), np.sum(y < 0)), 1) / len(y)
    w, steps = _tron(loss, eps, max_iter)
    if steps >= max_iter:
        warnings.warn(
            f"LinearSVC's solver did not converge in {max_iter} steps", stacklevel=2
        )
    return w


@dataclass
class _SquaredHinge:
    """liblinear's `l2r_l2_svc_fun`: the objective, gradient and Hessian products of `linear_svc`'s problem on
    rows X `(n, p)` (the feature 1 last) with labels y `(n,)` in {-1, 1}, and its work arrays: X's transpose
    XT, the margins z, the `size` rows inside the margin (`rows`) and their columns XIT `(p, size)`."""

    X: np.ndarray
    y: np.ndarray
    C: float
    size: int = 0

    def __post_init__(self) -> None:
        n, p = self.X.shape
        self.XT = np.ascontiguousarray(self.X.T)
        self.z, self.work = np.empty(n), np.empty(n)
        self.rows, self.XIT = np.empty(n, np.int64), np.empty((p, n))

    @classmethod
    def of(cls, X: np.ndarray, y: np.ndarray, C: float) -> _SquaredHinge:
        """The problem on X `(n, f)`, y `(n,)` in liblinear's row order (stable by class, -1 first)."""
        order = np.argsort(y, kind="stable")
        return cls(np.hstack([X, np.ones((len(X), 1))])[order], y[order], float(C))

    def fun(self, w: np.ndarray) -> float:
        """The objective at w `(p,)`; keeps the margins for `grad`."""
        return _kernels()["objective"](self.XT, self.y, self.C, w, self.z)

    def grad(self, w: np.ndarray) -> np.ndarray:
        """The gradient `(p,)` at w, the point of the last `fun`; keeps its rows inside the margin for `hv`."""
        g = np.empty_like(w)
        self.size = _kernels()["gradient"](
            self.X, self.XT, self.y, self.C, w, self.z, g, self.rows, self.XIT
        )
        return g

    def hv(self, s: np.ndarray) -> np.ndarray:
        """The generalized Hessian at the point of the last `grad` times s `(p,)`."""
        Hs = np.empty_like(s)
        _kernels()["hessian_times"](
            self.X, self.rows, self.XIT, self.size, self.C, s, Hs, self.work
        )
        return Hs


def _tron(loss: _SquaredHinge, eps: float, max_iter: int) -> tuple[np.ndarray, int]:
    """liblinear's `TRON::tron` from w = 0: the weights `(p,)` and the accepted steps."""
    from scipy.linalg.blas import daxpy, ddot, dnrm2

    w = np.zeros(loss.X.shape[1])
    f = loss.fun(w)
    g = loss.grad(w)
    delta = gnorm1 = dnrm2(g)
    steps = 1
    search = gnorm1 > eps * gnorm1
    while steps <= max_iter and search:
        s, r = _trcg(loss, delta, g)
        w_new = daxpy(s, w.copy(), a=1.0)
        gs = ddot(g, s)
        prered = -0.5 * (gs - ddot(s, r))
        f_new = loss.fun(w_new)
        actred = f - f_new
        snorm = dnrm2(s)
        if steps == 1:
            delta = min(delta, snorm)
        delta = _radius(delta, snorm, actred, prered, f_new - f - gs, gs)
        if actred > 1e-4 * prered:
            steps += 1
            w, f = w_new, f_new
            g = loss.grad(w)
            if dnrm2(g) <= eps * gnorm1:
                break
        if f < -1.0e32 or (abs(actred) <= 0 and prered <= 0):
            break
        if abs(actred) <= 1.0e-12 * abs(f) and abs(prered) <= 1.0e-12 * abs(f):
            break
    return w, steps - 1


def _radius(
    delta: float,
    snorm: float,
    actred: float,
    prered: float,
    curvature: float,
    gs: float,
) -> float:
    """TRON's new trust-region radius from the actual and predicted reductions of a step of length snorm."""
    alpha = 4.0 if curvature <= 0 else max(0.25, -0.5 * (gs / curvature))
    if actred < 1e-4 * prered:
        return min(max(alpha, 0.25) * snorm, 0.5 * delta)
    if actred < 0.25 * prered:
        return max(0.25 * delta, min(alpha * snorm, 0.5 * delta))
    if actred < 0.75 * prered:
        return max(0.25 * delta, min(alpha * snorm, 4.0 * delta))
    return max(delta, min(alpha * snorm, 4.0 * delta))


def _trcg(
    loss: _SquaredHinge, delta: float, g: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """liblinear's `TRON::trcg`: conjugate gradients on the Newton system inside the radius delta, the step s
    `(p,)` and its residual r `(p,)`."""
    from scipy.linalg.blas import daxpy, ddot, dnrm2, dscal

    s, r = np.zeros_like(g), -g
    d = r.copy()
    cgtol = 0.1 * dnrm2(g)
    rTr = ddot(r, r)
    while dnrm2(r) > cgtol:
        Hd = loss.hv(d)
        alpha = rTr / ddot(d, Hd)
        s = daxpy(d, s, a=alpha)
        if dnrm2(s) > delta:
            s = daxpy(d, s, a=-alpha)
            std, sts, dtd = ddot(s, d), ddot(s, s), ddot(d, d)
            dsq = delta * delta
            rad = np.sqrt(std * std + dtd * (dsq - sts))
            alpha = (dsq - sts) / (std + rad) if std >= 0 else (rad - std) / dtd
            s = daxpy(d, s, a=alpha)
            return s, daxpy(Hd, r, a=-alpha)
        r = daxpy(Hd, r, a=-alpha)
        rnewTrnew = ddot(r, r)
        d = daxpy(r, dscal(rnewTrnew / rTr, d), a=1.0)
        rTr = rnewTrnew
    return s, r


def _objective(XT, y, C, w, z) -> float:
    """liblinear's `fun`: `w.w / 2 + C sum max(0, 1 - z)^2`, the margins z = y X w `(n,)` kept, from XT `(p, n)`."""
    p, n = XT.shape
    z[:] = 0.0
    for j in range(p):
        a, column = w[j], XT[j]  # a row view, so that numba vectorizes the loop over i
        for i in range(n):
            z[i] += a * column[i]
    f = 0.0
    for j in range(p):
        f += w[j] * w[j]
    f /= 2.0
    for i in range(n):
        z[i] = y[i] * z[i]
        d = 1 - z[i]
        if d > 0:
            f += C * d * d
    return f


def _gradient(X, XT, y, C, w, z, g, rows, XIT) -> int:
    """liblinear's `grad` into g `(p,)` from the margins z `(n,)`: the rows inside the margin into rows, their
    columns into XIT `(p, size)`, their C y (z - 1) into z; returns their count."""
    n, p = X.shape
    size = 0
    for i in range(n):
        if z[i] < 1:
            z[size] = C * y[i] * (z[i] - 1)
            rows[size] = i
            size += 1
    g[:] = 0.0
    for k in range(size):
        a, row = z[k], X[rows[k]]
        for j in range(p):
            g[j] += a * row[j]
    for j in range(p):
        g[j] = w[j] + 2 * g[j]
        column, inside = XT[j], XIT[j]
        for k in range(size):
            inside[k] = column[rows[k]]
    return size


def _hessian_times(X, rows, XIT, size, C, s, Hs, work) -> None:
    """liblinear's `Hv` into Hs `(p,)`: s + 2 C X_I^T X_I s over the `size` rows inside the margin."""
    p = X.shape[1]
    work[:size] = 0.0
    for j in range(p):
        a, column = s[j], XIT[j]
        for k in range(size):
            work[k] += a * column[k]
    Hs[:] = 0.0
    for k in range(size):
        a, row = C * work[k], X[rows[k]]
        for j in range(p):
            Hs[j] += a * row[j]
    for j in range(p):
        Hs[j] = s[j] + 2 * Hs[j]


@functools.cache
def _kernels() -> dict:
    """`_objective`, `_gradient` and `_hessian_times` compiled by numba (once per process), by short name."""
    import numba

    return {
        f.__name__[1:]: numba.njit(f) for f in (_objective, _gradient, _hessian_times)
    }
