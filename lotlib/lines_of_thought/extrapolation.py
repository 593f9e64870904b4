"""Linear extrapolation of an ensemble between layers (Lines of Thought, Eq. 1), its held-out bases and the
SVMs that tell it from the truth."""

from __future__ import annotations

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
    LinearSVC is solved in the primal (the dual solver fails to converge on ensembles this alike).
    0.5 means indistinguishable, 1.0 linearly separable.
    """
    from sklearn.model_selection import cross_val_score

    _check_pairs(A, B)
    n = len(A)
    fold_of_pilot = np.random.default_rng(seed).permutation(n) % folds
    fold = np.concatenate([fold_of_pilot, fold_of_pilot])
    splits = [
        (np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(folds)
    ]
    features = np.concatenate([A, B]).astype(np.float64)
    labels = np.repeat([0, 1], n)
    return float(cross_val_score(_classifier(C), features, labels, cv=splits).mean())


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
    `train` `(n,)` bool of both and scored on the others. Standardized features, LinearSVC in the primal,
    balanced classes."""
    _check_pairs(A, B)
    train = np.tile(train, 2)
    features = np.concatenate([A, B]).astype(np.float64)
    labels = np.repeat([0, 1], len(A))
    classifier = _classifier(C).fit(features[train], labels[train])
    return float(classifier.score(features[~train], labels[~train]))


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


def _classifier(C: float):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    return make_pipeline(StandardScaler(), LinearSVC(C=C, dual=False, max_iter=5000))


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
