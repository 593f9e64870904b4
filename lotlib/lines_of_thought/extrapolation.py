"""Linear extrapolation of an ensemble between layers (Lines of Thought, Eq. 1) and how to tell it apart.

    x~(t, tau) = U(t+tau) Lambda U(t)^T x(t),    Lambda = Sigma(t+tau) Sigma(t)^-1,    w = x(t+tau) - x~

U `(T, D, k)` and S `(T, k)` are per-layer ensemble bases **aligned** across layers
(`lotlib.lines_of_thought.ensemble.ensemble_svd` then `align_bases`), so column i is the same direction at every t.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from ..intervals import Estimate, bootstrap, over_seeds
from .ensemble import align_bases, ensemble_svd, gaussian_cloud


def extrapolate(
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    t: int,
    tau: int,
    rank: int | None = None,
) -> np.ndarray:
    """Eq. 1: the states at layer t carried to layer t + tau, `(N, D)` (float64).

    X: trajectories `(N, T, D)`; U `(T, D, k)`, S `(T, k)` aligned. `rank=None` uses all k columns
    (k = min(N, D) from `ensemble_svd`); `rank=r` uses the r columns with the largest sigma at layer t.
    Directions whose sigma(t) is numerically zero are dropped (a pseudo-inverse of Sigma(t)).
    """
    cols = _columns(S[t], rank)
    source, target = U[t][:, cols], U[t + tau][:, cols]
    coords = X[:, t, :].astype(np.float64) @ source  # (N, r)
    return (coords * _ratio(S[t + tau][cols], S[t][cols])) @ target.T


def residuals(
    X: np.ndarray,
    U: np.ndarray,
    S: np.ndarray,
    t: int,
    tau: int,
    rank: int | None = None,
) -> np.ndarray:
    """w = x(t+tau) - x~(t, tau), `(N, D)` (float64): what the linear extrapolation misses."""
    return X[:, t + tau, :].astype(np.float64) - extrapolate(X, U, S, t, tau, rank)


def basis_angles(U: np.ndarray, i: int) -> np.ndarray:
    """Angle in degrees between singular vector i at every pair of layers, arccos`|u_i(t1).u_i(t2)|`: `(T, T)`.

    U `(T, D, k)` aligned; 0 on the diagonal, 90 for orthogonal directions.
    """
    u = U[:, :, i]
    return np.degrees(np.arccos(np.clip(np.abs(u @ u.T), 0.0, 1.0)))


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
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    if A.shape != B.shape:
        raise ValueError(
            f"svm_accuracy needs paired ensembles of one shape, got {A.shape} and {B.shape}"
        )
    n = len(A)
    fold_of_pilot = np.random.default_rng(seed).permutation(n) % folds
    fold = np.concatenate([fold_of_pilot, fold_of_pilot])
    splits = [
        (np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(folds)
    ]
    features = np.concatenate([A, B]).astype(np.float64)
    labels = np.repeat([0, 1], n)
    classifier = make_pipeline(
        StandardScaler(), LinearSVC(C=C, dual=False, max_iter=5000)
    )
    return float(cross_val_score(classifier, features, labels, cv=splits).mean())


def _columns(sigma: np.ndarray, rank: int | None) -> np.ndarray:
    order = np.argsort(sigma)[::-1]
    return np.sort(order[:rank]) if rank is not None else np.arange(len(sigma))


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    keep = (
        denominator
        > denominator.max() * max(denominator.shape) * np.finfo(np.float64).eps
    )
    return np.where(keep, numerator / np.where(keep, denominator, 1.0), 0.0)


PREDICTIONS = ("Eq. 1", "naive x(t)", "pilot-blind: mean of x(t+τ)")
SVM_AGAINST = {"Eq. 1": "Eq. 1", "structureless cloud": "cloud", "naive x(t)": "naive"}


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
        study = _split(X[:, first:].astype(np.float64), first, seed, rank)
        if len(study.fit) < 1.5 * X.shape[2]:
            warnings.warn(
                f"{len(study.fit)} fit pilots for D = {X.shape[2]}: below 1.5D the bases are "
                "incomplete or ill-conditioned, and Eq. 1's scores measure that; use n_s >= 3D",
                stacklevel=2,
            )
        return study

    def resplit(self, seed: int) -> HeldOutBases:
        """The same layers with a new fit / held-out split (and new bases)."""
        return _split(self.Xs, self.first, seed, self.rank)

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
        """`svm_accuracy` of the true states of `pilots` at t + tau against `against`: "Eq. 1", "naive"
        (x(t)) or "cloud" (`gaussian_cloud` with the fit pilots' mean and covariance at t + tau). Features:
        all D coordinates, or with `top_k` the arrival layer's top-k singular coordinates."""
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
        return self._svm(self.states(pilots, t + tau), other, t + tau, seed, C, top_k)

    def _svm(self, A, B, t, seed, C, top_k) -> float:
        if top_k is not None:
            top = self.directions(t, slice(None, top_k))
            A, B = A @ top, B @ top
        return svm_accuracy(A, B, seed=seed, C=C)


def _split(Xs: np.ndarray, first: int, seed: int, rank: int | None) -> HeldOutBases:
    n = len(Xs)
    order = np.random.default_rng(seed).permutation(n)
    fit, held = np.sort(order[: n // 2]), np.sort(order[n // 2 :])
    U, S = align_bases(*ensemble_svd(Xs[fit]), reference=0)
    return HeldOutBases(Xs, first, fit, held, U, S, rank)


@dataclass
class Subsamples:
    """Held-out pilots drawn for the figures (`drawn`), for the SVM (`test`, sorted; `shuffled`, the same in
    random order), and fit pilots for the in-sample SVM (`inside`, sorted)."""

    drawn: np.ndarray
    test: np.ndarray
    inside: np.ndarray
    shuffled: np.ndarray


def subsamples(study: HeldOutBases, seed: int, n_plot: int, n_svm: int) -> Subsamples:
    """`Subsamples` of `n_plot` and `n_svm` pilots (fewer where a half is smaller), seeded."""
    rng = np.random.default_rng(seed)
    held, fit = study.held, study.fit
    drawn = rng.choice(held, size=min(n_plot, len(held)), replace=False)
    test = np.sort(rng.choice(held, size=min(n_svm, len(held)), replace=False))
    inside = np.sort(rng.choice(fit, size=min(n_svm, len(fit)), replace=False))
    return Subsamples(drawn, test, inside, rng.permutation(test))


@dataclass
class PredictionErrors:
    """Distances ‖x(t+tau) - prediction‖ of the held-out pilots from layer `first`, per prediction of
    `PREDICTIONS`: `(tau_max, n_held)` each, and the mean ‖x(t+tau)‖ `(tau_max,)`."""

    taus: np.ndarray
    distances: dict[str, np.ndarray]
    state_norm: np.ndarray

    def relative(self, name: str) -> np.ndarray:
        """Mean distance over the mean state norm, per tau: `(tau_max,)`."""
        return self.distances[name].mean(1) / self.state_norm

    def ratio(self, name: str, tau: int, n_boot: int = 2000, seed: int = 0) -> Estimate:
        """Mean distance of prediction `name` over the naive one's at `tau`, bootstrapped over pilots."""
        a, b = self.distances[name][tau - 1], self.distances["naive x(t)"][tau - 1]
        return bootstrap(
            lambda i: a[i].mean() / b[i].mean(),
            len(a),
            unit="held-out pilots",
            n_boot=n_boot,
            seed=seed,
        )

    def summary(self, n_boot: int = 2000, seed: int = 0) -> dict:
        """B3's values: `relative_error_{eq1,naive,mean}_by_tau` (`relative`) and the ratios
        `error_ratio_{eq1,mean}_{tau1,tau_max}` of Eq. 1 and of the pilot-blind mean at tau = 1 and the
        last tau."""
        keys = dict(zip(("eq1", "naive", "mean"), PREDICTIONS))
        values = {
            f"relative_error_{k}_by_tau": self.relative(n) for k, n in keys.items()
        }
        for key in ("eq1", "mean"):
            for when, tau in (("tau1", 1), ("tau_max", self.taus[-1])):
                values[f"error_ratio_{key}_{when}"] = self.ratio(
                    keys[key], tau, n_boot, seed
                )
        return values


def prediction_errors(study: HeldOutBases, tau_max: int) -> PredictionErrors:
    """Eq. 1, the naive x(t) and the pilot-blind mean of the fit pilots at t + tau, from layer `first`,
    scored on the held-out pilots for tau = 1..tau_max."""
    held, t = study.held, study.first
    taus = np.arange(1, tau_max + 1)
    distances = {name: [] for name in PREDICTIONS}
    for tau in taus:
        true = study.states(held, t + tau)
        predictions = (
            study.extrapolate(held, t, tau),
            study.states(held, t),
            study.states(study.fit, t + tau).mean(0),
        )
        for name, guess in zip(PREDICTIONS, predictions):
            distances[name].append(np.linalg.norm(true - guess, axis=1))
    norms = np.linalg.norm(study.Xs[held][:, taus], axis=-1).mean(0)
    return PredictionErrors(taus, {n: np.stack(d) for n, d in distances.items()}, norms)


def svm_features(top_k: int | None) -> str:
    """What the SVM sees, in words."""
    if top_k is None:
        return "all D coordinates"
    return f"the top {top_k} singular coordinates of the arrival layer"


def svm_by_tau(
    study: HeldOutBases, pilots: np.ndarray, taus, **svm
) -> dict[str, np.ndarray]:
    """SVM accuracy from layer `first` for each tau of `taus`, against each of `SVM_AGAINST`:
    name -> `(len(taus),)`. `svm`: seed, C, top_k of `HeldOutBases.svm`."""
    return {
        name: np.array(
            [study.svm(pilots, study.first, tau, against, **svm) for tau in taus]
        )
        for name, against in SVM_AGAINST.items()
    }


def svm_true_vs_true(
    study: HeldOutBases, shuffled: np.ndarray, taus, *, seed=0, C=1.0, top_k=None
) -> np.ndarray:
    """SVM accuracy between the true states at first + tau of two halves of `shuffled` pilots (what
    "indistinguishable" scores on these data), for each tau: `(len(taus),)`."""
    half = len(shuffled) // 2
    a, b = shuffled[:half], shuffled[half : 2 * half]
    t = study.first
    return np.array(
        [
            study._svm(
                study.states(a, t + tau),
                study.states(b, t + tau),
                t + tau,
                seed,
                C,
                top_k,
            )
            for tau in taus
        ]
    )


def repeated_svm(
    study: HeldOutBases,
    starts: np.ndarray,
    tau_max: int,
    n_seeds: int,
    n_svm: int,
    *,
    seed: int = 0,
    C: float = 1.0,
    top_k: int | None = None,
) -> dict[str, dict[str, Estimate]]:
    """The SVM verdicts `svm_{extrapolated,cloud}_{tau1,tau_max,growth}`: accuracy of Eq. 1 and of the cloud
    at tau = 1, at `tau_max` and their difference, each the mean over `starts`, repeated with a new split r
    (seed + r; r = 0 is `study` itself), new `n_svm` scored held-out pilots and new folds: means over the
    `n_seeds` repetitions with t-intervals."""
    found = {"Eq. 1": [], "cloud": []}
    for r in tqdm(range(n_seeds), desc="SVM repetitions"):
        split = study if r == 0 else study.resplit(seed + r)
        held = split.held
        rng = np.random.default_rng(seed + r)
        scored = np.sort(rng.choice(held, size=min(n_svm, len(held)), replace=False))
        for against, runs in found.items():
            runs.append(
                [
                    [
                        split.svm(
                            scored, t, tau, against, seed=seed + r, C=C, top_k=top_k
                        )
                        for tau in (1, tau_max)
                    ]
                    for t in starts
                ]
            )
    verdicts = {}
    for name, runs in found.items():
        a = np.array(runs).mean(1)  # (n_seeds, 2), mean over starts
        for key, v in (
            ("tau1", a[:, 0]),
            ("tau_max", a[:, 1]),
            ("growth", a[:, 1] - a[:, 0]),
        ):
            prefix = "svm_extrapolated" if name == "Eq. 1" else "svm_cloud"
            verdicts[f"{prefix}_{key}"] = over_seeds(v, unit="repetitions")
    return verdicts
