"""The Langevin model (Eq. 3-4): interpolated rotations, step matrices, simulation, moments, distances."""

import numpy as np
import pytest
from scipy.interpolate import CubicSpline
from scipy.linalg import expm, logm

from lotlib.lines_of_thought.extrapolation import extrapolate
from lotlib.lines_of_thought.langevin import (
    covariance_distance,
    energy_distance,
    exponential_noise,
    langevin_flow,
    matched_noise,
    moments,
    pilot_distances,
    propagators,
    proper_bases,
    rotation_log,
    simulate,
    steps,
)


def power(rotation, a: float) -> np.ndarray:
    """M^a `(D, D)` of a `Rotation`: the identity turned by `a` times its angles."""
    return rotation.rotate(np.eye(len(rotation.Z)), a).T


def _orthogonal(D, seed, det=1.0):
    Q = np.linalg.qr(np.random.default_rng(seed).normal(size=(D, D)))[0]
    if np.sign(np.linalg.det(Q)) != det:
        Q[:, 0] *= -1
    return Q


def _rotating_chain(T=5, D=4, seed=0, sigma=None):
    """Bases U(t) = expm(t W) U0 turned by a fixed generator W (angles below pi), singular values S."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, D)) * 0.2
    W = W - W.T
    U0 = _orthogonal(D, seed + 1)
    U = np.stack([expm(t * W) @ U0 for t in range(T)])
    S = np.ones((T, D)) if sigma is None else sigma
    return U, S, W


def test_interpolated_rotation_goes_from_U1_to_U2_and_stays_orthogonal():
    U1, U2 = _orthogonal(6, 0), _orthogonal(6, 1)
    rotation = rotation_log(U1.T @ U2)
    np.testing.assert_allclose(U1 @ power(rotation, 0.0), U1, atol=1e-12)
    np.testing.assert_allclose(U1 @ power(rotation, 1.0), U2, atol=1e-10)
    for a in (0.3, 0.5, 0.9):
        R = U1 @ power(rotation, a)
        np.testing.assert_allclose(R.T @ R, np.eye(6), atol=1e-12)
    K = rotation.generator
    np.testing.assert_allclose(K, -K.T, atol=1e-12)
    np.testing.assert_allclose(expm(K), U1.T @ U2, atol=1e-10)
    np.testing.assert_allclose(
        np.real(logm(U1.T @ U2)), K, atol=1e-8
    )  # the principal logarithm
    np.testing.assert_allclose(
        power(rotation, 0.5) @ power(rotation, 0.5), U1.T @ U2, atol=1e-10
    )


def test_reflections_flip_the_least_significant_column_and_a_turn_by_pi_is_handled():
    U = np.stack([_orthogonal(5, 2), _orthogonal(5, 3, det=-1.0)])
    S = np.array([[5.0, 4.0, 3.0, 2.0, 1.0], [5.0, 4.0, 0.5, 3.0, 2.0]])
    proper, flipped = proper_bases(U, S, [0, 1])
    assert flipped == {0: None, 1: 2}
    expected = U[1].copy()
    expected[:, 2] *= -1
    np.testing.assert_allclose(proper[1], expected)
    flow = langevin_flow(U, S, [0, 1])
    np.testing.assert_allclose(
        flow.U[0] @ power(flow.rotations[0], 1.0), expected, atol=1e-10
    )
    with pytest.raises(ValueError, match="reflection"):
        rotation_log(U[0].T @ U[1])
    half_turn = np.diag(
        [-1.0, -1.0, 1.0, 1.0]
    )  # a rotation by pi in the plane of the first two axes
    np.testing.assert_allclose(
        power(rotation_log(half_turn), 1.0), half_turn, atol=1e-12
    )
    np.testing.assert_allclose(np.sort(np.abs(rotation_log(half_turn).theta)), [np.pi])
    with pytest.raises(ValueError, match="full D x D"):
        proper_bases(U[:, :, :3], S[:, :3], [0, 1])




def _same_flow(flow, other):
    """Two flows flip the same columns of the same layers and step with the same matrices, both schemes."""
    assert flow.flipped == other.flipped
    for scheme in ("euler", "exact"):
        np.testing.assert_allclose(
            steps(flow, 0, 4, dt=0.5, scheme=scheme).M,
            steps(other, 0, 4, dt=0.5, scheme=scheme).M,
            atol=1e-10,
        )


def test_the_flow_does_not_depend_on_the_signs_of_the_reference_basis():
    """One column's sign changed at every layer (an SVD sign convention of det -1) leaves the flow as it was:
    only the layers whose orientation turned against the first layer's are flipped, either way."""
    dets = [1.0, -1.0, -1.0, 1.0, -1.0]
    U = np.stack([_orthogonal(4, 30 + t, det=d) for t, d in enumerate(dets)])
    S = np.exp(np.random.default_rng(17).normal(0, 0.3, size=(5, 4))) * 5
    mirrored = U.copy()
    mirrored[:, :, 1] *= -1
    flow = langevin_flow(U, S, np.arange(5))
    assert [flow.flipped[t] is not None for t in range(5)] == [d < 0 for d in dets]
    _same_flow(langevin_flow(mirrored, S, np.arange(5)), flow)


def test_gram_bases_and_lapack_bases_give_the_same_flow():
    """`ensemble_svd` (Gram matrix, signed by the pilots' sum) against LAPACK's SVD, both aligned: the
    reference layers' dets differ, the flows do not."""
    from lotlib.lines_of_thought.ensemble import align_bases, ensemble_svd
    from tests.lines_of_thought.test_ensemble import svd_ensemble_svd

    X = np.random.default_rng(19).normal(size=(20, 5, 6)) + 0.2
    U, S = align_bases(*svd_ensemble_svd(X))
    G, S_gram = align_bases(*ensemble_svd(X))
    assert np.linalg.det(U[0]) * np.linalg.det(G[0]) < 0
    np.testing.assert_allclose(S_gram, S, rtol=1e-10)
    _same_flow(langevin_flow(G, S_gram, np.arange(5)), langevin_flow(U, S, np.arange(5)))


def test_rotate_is_vectorized_over_angles():
    rotation = rotation_log(_orthogonal(5, 4))
    V = np.random.default_rng(5).normal(size=(3, 5))
    a = np.array([0.0, 0.25, 0.7, 1.0])
    batched = rotation.rotate(V, a)
    assert batched.shape == (4, 3, 5)
    for m, am in enumerate(a):
        np.testing.assert_allclose(batched[m], V @ power(rotation, am).T, atol=1e-12)


def test_noiseless_simulation_of_a_pure_rotation_reproduces_the_rotation():
    U, S, W = _rotating_chain()
    flow = langevin_flow(U, S, np.arange(5))
    X0 = np.random.default_rng(6).normal(size=(10, 4))
    expected = [X0 @ expm(n * W).T for n in range(4)]
    exact = simulate(X0, steps(flow, 1, 3, dt=0.1, scheme="exact"), (lambda t: 0.0))[
        :, 0
    ]
    euler = simulate(X0, steps(flow, 1, 3, dt=0.01, scheme="euler"), (lambda t: 0.0))[
        :, 0
    ]
    for n in range(4):
        np.testing.assert_allclose(exact[:, n], expected[n], atol=1e-5)
        np.testing.assert_allclose(euler[:, n], expected[n], atol=0.02 * n + 1e-6)


def test_exact_scheme_lands_on_the_linear_extrapolation_and_euler_drift_matches_its_definition():
    rng = np.random.default_rng(7)
    sigma = np.exp(np.cumsum(rng.normal(0, 0.3, size=(5, 4)), axis=0)) * 10
    U, S, _ = _rotating_chain(sigma=sigma)
    X = np.stack(
        [rng.normal(size=(20, 4))] * 5, axis=1
    )  # only X[:, 1] (the start) matters
    flow = langevin_flow(U, S, np.arange(5))
    out = simulate(
        X[:, 1], steps(flow, 1, 3, dt=0.25, scheme="exact"), (lambda t: 0.0)
    )[:, 0]
    for tau in range(4):
        np.testing.assert_allclose(
            out[:, tau], extrapolate(X, U, S, 1, tau), rtol=1e-5, atol=1e-4
        )
    # one Euler step matrix against the definition: A = R' R^T + R S' R^T, R = U1 expm(a logm(U1^T U2))
    euler = steps(flow, 2, 1, dt=0.25, scheme="euler")
    a, h = 0.5, 1e-6
    R = lambda a: U[2] @ expm(a * np.real(logm(U[2].T @ U[3])))
    R_dot = (R(a + h) - R(a - h)) / (2 * h)
    rate = CubicSpline(np.arange(5), np.log(sigma), axis=0)(2 + a, 1)
    A = R_dot @ R(a).T + R(a) @ np.diag(rate) @ R(a).T
    np.testing.assert_allclose(euler.M[2], np.eye(4) + 0.25 * A, atol=1e-7)
    np.testing.assert_allclose(euler.t, [2.0, 2.25, 2.5, 2.75])


def test_sigma_spline_and_log_spline_agree_on_the_layers():
    sigma = np.linspace(1.0, 3.0, 5)[:, None] * np.array([1.0, 2.0, 0.5, 4.0])
    U, S, _ = _rotating_chain(sigma=sigma)
    for log in (True, False):
        flow = langevin_flow(U, S, np.arange(5), log=log)
        np.testing.assert_allclose(
            flow.sigma.ratio(1, np.array([2.0, 4.0])), S[[2, 4]] / S[1], rtol=1e-10
        )
        assert flow.sigma.zero_crossings(0, 4) == 0


def test_vectorized_simulation_equals_a_direct_loop():
    rng = np.random.default_rng(8)
    U, S, _ = _rotating_chain(sigma=np.exp(rng.normal(0, 0.2, size=(5, 4))))
    st = steps(langevin_flow(U, S, np.arange(5)), 0, 2, dt=0.5)
    noise = exponential_noise(0.5, 0.2)
    X0 = rng.normal(size=(3, 4))
    out = simulate(X0, st, noise, n_samples=2, seed=9)
    draws = np.random.default_rng(9)
    x = [
        X0[i].astype(np.float32) for i in range(3) for _ in range(2)
    ]  # row order: start, then sample
    direct = [np.stack(x)]
    for step, (t, M) in enumerate(zip(st.t, st.M.astype(np.float32)), start=1):
        xi = draws.standard_normal((6, 4), dtype=np.float32)
        x = [M @ x[r] + np.float32(np.sqrt(noise(t) * st.dt)) * xi[r] for r in range(6)]
        if step % 2 == 0:
            direct.append(np.stack(x))
    np.testing.assert_allclose(
        out, np.stack(direct, axis=1).reshape(3, 2, 3, 4), rtol=1e-5, atol=1e-5
    )


def test_moments_match_the_sampled_ensemble():
    rng = np.random.default_rng(10)
    U, S, _ = _rotating_chain(sigma=np.exp(rng.normal(0, 0.2, size=(5, 4))))
    st = steps(langevin_flow(U, S, np.arange(5)), 1, 2, dt=0.25)
    noise = exponential_noise(0.3, 0.5)
    X0 = rng.normal(size=(400, 4)) * [2.0, 1.0, 0.5, 0.2] + 1.0
    means, covs = moments(X0.mean(0), np.cov(X0.T, bias=True), st, noise)
    sim = simulate(X0, st, noise, n_samples=100, seed=11)[:, :, -1].reshape(-1, 4)
    np.testing.assert_allclose(sim.mean(0), means[-1], atol=0.05)
    np.testing.assert_allclose(
        np.cov(sim.T, bias=True), covs[-1], atol=0.05 * np.abs(covs[-1]).max()
    )
    with pytest.raises(ValueError, match="dt"):
        steps(langevin_flow(U, S, np.arange(5)), 1, 1, dt=0.3)


def test_energy_distance():
    rng = np.random.default_rng(12)
    A, B = rng.normal(size=(600, 3)), rng.normal(size=(600, 3))
    assert abs(energy_distance(A, B)) < 0.03
    assert energy_distance(A, B + [1.0, 0, 0]) > 0.3
    a, b = A[:50], B[:40] + 0.5
    direct = (
        2 * np.mean([np.linalg.norm(x - y) for x in a for y in b])
        - np.mean(
            [
                np.linalg.norm(x - y)
                for i, x in enumerate(a)
                for j, y in enumerate(a)
                if i != j
            ]
        )
        - np.mean(
            [
                np.linalg.norm(x - y)
                for i, x in enumerate(b)
                for j, y in enumerate(b)
                if i != j
            ]
        )
    )
    assert np.isclose(energy_distance(a, b), direct)
    assert np.isclose(energy_distance(a, b), energy_distance(b, a))






def test_matched_noise_puts_eq2_on_the_accumulated_noise_at_every_layer():
    alpha, lam = 0.6, 0.2
    target = lambda s: alpha * np.exp(lam * s)
    D = 4
    still = langevin_flow(
        np.stack([np.eye(D)] * 6), np.ones((6, D)), np.arange(6)
    )  # no drift at all
    plan = steps(still, 1, 3, dt=0.25)
    rate = matched_noise(plan, target)
    # without drift: all of Eq. 2 over the first layer, then only the increments (the paper's rate, integrated)
    assert rate(1.5) == pytest.approx(target(2))
    assert rate(2.0) == pytest.approx(target(3) - target(2)) and rate(
        3.75
    ) == pytest.approx(target(4) - target(3))
    # with a drift that turns and stretches, the noise it carries is counted: the accumulated trace is on target
    rng = np.random.default_rng(16)
    U, S, _ = _rotating_chain(
        T=6, D=D, sigma=np.exp(np.cumsum(rng.normal(0.1, 0.2, size=(6, D)), axis=0))
    )
    plan = steps(langevin_flow(U, S, np.arange(6)), 1, 3, dt=0.25, scheme="exact")
    rate = matched_noise(plan, target)
    _, covs = moments(np.zeros(D), np.zeros((D, D)), plan, rate)
    for tau in range(1, 4):
        carried = np.trace(covs[tau]) / D
        if rate(tau + 0.5) > 0:  # the layer [tau, tau + 1] injects just what is missing
            assert carried == pytest.approx(target(1 + tau))
        else:  # the drift already carries more than the target: nothing injected
            assert carried >= target(1 + tau)
    assert rate(1.0) > 0


def test_propagators_compose_the_steps_and_carry_the_mean():
    rng = np.random.default_rng(17)
    U, S, _ = _rotating_chain(sigma=np.exp(rng.normal(0, 0.2, size=(5, 4))))
    plan = steps(langevin_flow(U, S, np.arange(5)), 1, 3, dt=0.5)
    P = propagators(plan)
    assert P.shape == (4, 4, 4)
    np.testing.assert_allclose(P[0], np.eye(4))
    np.testing.assert_allclose(
        P[2], plan.M[3] @ plan.M[2] @ plan.M[1] @ plan.M[0], atol=1e-12
    )
    m0 = rng.normal(size=4)
    means, _ = moments(m0, np.eye(4), plan, (lambda t: 0.3))
    np.testing.assert_allclose(means, m0 @ P.transpose(0, 2, 1), atol=1e-12)


def test_covariance_distance_has_no_sampling_floor_and_matches_its_definition():
    rng = np.random.default_rng(18)
    T = rng.normal(size=(300, 6)) * [3, 2, 1, 1, 0.5, 0.2]
    Z = T @ rng.normal(size=(6, 6)) * 0.3 + rng.normal(size=(300, 6))
    fixed = np.diag(rng.random(6))
    weights = np.vstack(
        [np.ones(300), np.bincount(rng.integers(0, 300, 300), minlength=300)]
    )
    for row, c in enumerate(
        weights
    ):  # the definition, pair by pair: sum over n != m of c_n c_m (p_n . q_m)^2
        drawn = np.repeat(np.arange(300), c.astype(int))
        Tc, Zc = (A[drawn] - A.mean(0) for A in (T, Z))
        inner = lambda P, Q, drawn=drawn, c=c: (
            (
                np.sum((P @ Q.T) ** 2)
                - np.sum(((P @ Q.T) ** 2)[drawn[:, None] == drawn[None, :]])
            )
            / (len(drawn) ** 2 - np.sum(c**2))
        )
        cov = lambda P, drawn=drawn: P.T @ P / len(drawn)
        squared = (
            inner(Tc, Tc)
            + inner(Zc, Zc)
            - 2 * inner(Zc, Tc)
            + np.sum(fixed**2)
            + 2 * np.sum(fixed * (cov(Zc) - cov(Tc)))
        )
        assert covariance_distance(T, weights, Z, fixed)[row] == pytest.approx(
            np.sqrt(squared / inner(Tc, Tc))
        )
    # two samples of one distribution: about 0, where the plain matrices differ by their sampling noise
    A, B = rng.normal(size=(2, 400, 30))
    naive = np.linalg.norm(np.cov(A.T) - np.cov(B.T)) / np.linalg.norm(np.cov(B.T))
    assert covariance_distance(B, np.ones((1, 400)), A)[0] < naive / 2
    assert covariance_distance(T, weights, 2 * T)[0] == pytest.approx(
        3.0, rel=0.05
    )  # Cov(2T) - Cov(T) = 3 Cov(T)


def test_pilot_distances_sum_every_pair_of_points():
    rng = np.random.default_rng(0)
    P, Q = rng.normal(size=(5, 3, 4)), rng.normal(size=(6, 2, 4))
    brute = np.linalg.norm(P[:, :, None, None] - Q[None, None], axis=-1).sum(
        axis=(1, 3)
    )
    np.testing.assert_allclose(pilot_distances(P, Q, block=4), brute)
