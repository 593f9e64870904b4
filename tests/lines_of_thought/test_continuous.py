"""The C3 readings of continuous lines of thought: layers, landings, partial flows, the free flow."""
import numpy as np

from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
from lotlib.lines_of_thought.langevin import langevin_flow


def _ensemble(seed: int = 0, N: int = 30, T: int = 5, D: int = 6):
    rng = np.random.default_rng(seed)
    X = np.cumsum(rng.normal(size=(N, T, D)), axis=1) + 3.0
    U, S = align_bases(*ensemble_svd(X))
    return X, U, S, langevin_flow(U, S, np.arange(1, T), log=True)










