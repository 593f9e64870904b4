"""Linear extrapolation of an ensemble between layers (Lines of Thought, Eq. 1) and the SVMs that tell it from the truth."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from ..stats import (
    Estimate,
    centered_percentile,
    split_pilots,
    training_rows,
)
from .ensemble import align_bases
from .nulls import gaussian_cloud
from .resampling import refit_bootstrap

T = TypeVar("T")


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


def svm_accuracy_interval(
    A: np.ndarray,
    B: np.ndarray,
    *,
    n_rep: int,
    seed: int = 0,
    C: float = 0.1,
    train_fraction: float = 0.5,
) -> Estimate:
    """`svm_split_accuracy` of paired classes A, B `(N, D)` (row j of both: pilot j) with a 95% interval from
    `n_rep` repetitions, each drawing the N pilots with replacement (the same rows of A and B), splitting
    the distinct ones into training and test pilots anew and refitting the SVM: their percentile interval,
    re-centered on the value (`refit_bootstrap`, `centered_percentile`)."""

    def accuracy(pilots: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
        return {
            "accuracy": svm_split_accuracy(
                A[pilots], B[pilots], pilots, rng, C=C, train_fraction=train_fraction
            )
        }

    _check_pairs(A, B)
    found = refit_bootstrap(accuracy, len(A), n_rep=n_rep, seed=seed, bounds=(0, 1))
    return found["accuracy"]


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


BASES_FROM = ("all", "training")  # the pilots the same-pilot SVM's bases are fit on


def same_pilot_svm(
    X: np.ndarray,
    first: int,
    starts,
    tau_max: int,
    *,
    n_rep: int,
    seed: int = 0,
    C: float = 0.1,
    train_fraction: float = 0.5,
    rank: int | None = None,
    bases_from: str = "all",
) -> dict[str, Estimate]:
    """The reviewers' SVM by the paper's protocol (`dx_calculate.m`): on the pilots of X `(N, L+1, D)` (the
    paper's N_s = round(2.8 D), `ensemble.authors_pilots`), the
    bases of layers `first`..max(`starts`) + `tau_max` are fit on the pilots (aligned from layer `first`), Eq. 1
    extrapolates those same pilots, and the SVM tells x(t + tau) from x~(t, tau), trained on a random
    `train_fraction` of them and scored on the rest. `paper_svm_tau1` and `paper_svm_tau10` (tau = `tau_max`:
    10, or fewer in a shallower model), each the mean over `starts`, with `refit_bootstrap` intervals: every
    repetition refits the bases on its draw of pilots.

    `bases_from="all"` (the authors' code): the bases are fit on all N pilots, test pilots included, each
    (start, tau) with its own split (`svm_split_accuracy`). Then Eq. 1 gives the N pilots exactly their own
    second moments, so whatever the training pilots lean towards the test pilots lean away from, and the score
    falls below what the classifier would reach on new pilots (below chance when Eq. 1 holds). `"training"`:
    one split per repetition, the bases fit on its training pilots only and applied to all of them (keys
    `..._training_bases`): the same statistic without that coupling."""
    if bases_from not in BASES_FROM:
        raise ValueError(f"bases_from must be one of {BASES_FROM}, got {bases_from!r}")
    Xs = X[:, first : max(starts) + tau_max + 1]
    suffix = "" if bases_from == "all" else "_training_bases"

    def accuracies(pilots: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
        distinct, rows = np.unique(pilots, return_inverse=True)
        sample = Xs[distinct].astype(np.float64)
        fit = rows  # the draw's rows the bases are fit on
        if bases_from == "training":
            train = training_rows(pilots, rng, train_fraction)
            fit = rows[train]
        counts = np.bincount(fit, minlength=len(distinct))
        U, S = align_bases(*weighted_svd(sample, counts), reference=0)

        def accuracy(t: int, tau: int) -> float:
            A = extrapolate(sample, U, S, t - first, tau, rank)[rows]
            B = sample[rows, t - first + tau]
            if bases_from == "training":
                return split_accuracy(A, B, train, C=C)
            return svm_split_accuracy(
                A, B, pilots, rng, C=C, train_fraction=train_fraction
            )

        return {
            f"{key}{suffix}": np.mean([accuracy(t, tau) for t in starts])
            for key, tau in (("paper_svm_tau1", 1), ("paper_svm_tau10", tau_max))
        }

    return refit_bootstrap(
        accuracies,
        len(X),
        n_rep=n_rep,
        seed=seed,
        unit="pilots (bases refit)",
        desc=f"same-pilot SVM resamples (bases from {bases_from} pilots)",
        bounds=(0.0, 1.0),
    )


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


SVM_VERDICTS = {"Eq. 1": "svm_extrapolated", "cloud": "svm_cloud"}


def repeated_svm(
    study: HeldOutBases,
    starts: np.ndarray,
    tau_max: int,
    n_rep: int,
    n_svm: int,
    *,
    seed: int = 0,
    C: float = 0.1,
    top_k: int | None = None,
    train_fraction: float = 0.5,
) -> dict[str, Estimate]:
    """The book's held-out SVM verdicts `svm_{extrapolated,cloud}_{tau1,tau_max,growth}`: accuracy of Eq. 1
    and of the cloud (`HeldOutBases.pair`) at tau = 1, at `tau_max` and their difference, each the mean over
    `starts`, by `svm_split_accuracy` on `n_svm` held-out pilots.

    The values: `study`'s split, `n_svm` held-out pilots drawn without replacement (`seed`). Each of the
    `n_rep` repetitions resamples the data and refits every step: a new random half of the pilots fits new
    bases (`resplit`; drawn without replacement: a bootstrap draw repeats pilots, and its fit half then holds
    about 0.63 N / 2 distinct ones, too few for a full basis at N = 3 D, where Eq. 1 and the cloud turn
    separable for that reason alone), the scored pilots are a bootstrap draw of `n_svm` from the new
    held-out half, and the SVM's split and fit are new. Percentile intervals over the repetitions, re-centered
    on the values (`centered_percentile`: scored pilots drawn twice leave the SVM fewer to learn from)."""
    rows = []
    for r in tqdm(range(n_rep + 1), desc="held-out SVM repetitions"):
        rng = np.random.default_rng(seed if r == 0 else [seed, r])
        split = study if r == 0 else study.resplit(rng)
        n = min(n_svm, len(split.held))
        scored = rng.choice(split.held, size=n, replace=r > 0)
        rows.append(
            _held_out_verdicts(
                split, scored, starts, tau_max, rng, C, top_k, train_fraction
            )
        )
    return {
        key: centered_percentile(
            [row[key] for row in rows],
            len(study.Xs),
            unit="pilots (split, bases refit)",
            bounds=(-1.0, 1.0) if key.endswith("growth") else (0.0, 1.0),
        )
        for key in rows[0]
    }


def _held_out_verdicts(
    split: HeldOutBases,
    scored: np.ndarray,
    starts,
    tau_max: int,
    rng: np.random.Generator,
    C: float,
    top_k: int | None,
    train_fraction: float,
) -> dict[str, float]:
    found = {}
    for against, prefix in SVM_VERDICTS.items():
        accuracy = np.mean(
            [
                [
                    svm_split_accuracy(
                        *split.pair(
                            scored,
                            t,
                            tau,
                            against,
                            seed=int(rng.integers(2**31)),
                            top_k=top_k,
                        ),
                        scored,
                        rng,
                        C=C,
                        train_fraction=train_fraction,
                    )
                    for tau in (1, tau_max)
                ]
                for t in starts
            ],
            axis=0,
        )
        found[f"{prefix}_tau1"], found[f"{prefix}_tau_max"] = accuracy
        found[f"{prefix}_growth"] = accuracy[1] - accuracy[0]
    return found
