"""The exact laws of sgsim.theory.exact_law (docs: theory-exact-laws) against Monte Carlo, Lyapunov and closed forms.

Monte Carlo design (docs: theory-tolerances): R = 20 000 independent replicas, compared at fixed steps with
the exact discrete-time law of that step, so there is no bias term; z = 5 standard errors
(false alarm 6e-7 per entry; SEs derived in ``stats.check_gaussian_law``). Each Monte Carlo
test also runs a negative control, a plausible wrong law the same check must reject. SGLD
and SGHMC replicas come from the compiled integrators (``sgsim.sample``) under a cyclical
schedule with exploration stages, so plain and momentum SGD are covered as their
temperature-0 stages; the [SGDVI] family (preconditioned SGD, SGFS, momentum SGD in
[SGDVI] order) is simulated here in plain NumPy, a second implementation beside the
compiled one of ``sgsim/integrators/constant_sgd.py`` (whose tests are test_constant_sgd.py).

The complementary cases (point start, no noise correction, gamma_hat > 0) are in
test_statistical.py.
"""

import ast
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import solve_discrete_lyapunov
from stats import check_gaussian_law

import sgsim
from sgsim import schedules, targets
from sgsim.theory import (
    GaussianPath,
    gaussian_w2,
    langevin_law,
    momentum_sgd_law,
    preconditioned_sgd_law,
    sgd_law,
    sgfs_law,
    sghmc_law,
    sghmc_scalar_stationary,
    sgld_law,
    sgld_scalar_stationary,
    stationary_covariance,
    time_average_cov,
)

R = 20_000
P = np.array([[2.0, 0.4, 0.1], [0.4, 1.0, -0.2], [0.1, -0.2, 0.6]])
B = np.array([0.3, -0.2, 0.5])
V = np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])  # large, so the correction matters
M0 = np.array([1.0, -1.0, 2.0])
S0 = np.array([[0.5, 0.1, 0.0], [0.1, 0.3, 0.05], [0.0, 0.05, 0.2]])
EYE = np.eye(3)


def stored(result, step):
    """Replicas of theta after the 1-based ``step`` (which must be a stored draw)."""
    steps = result.sample_stats["step"].values[0]
    (i,) = np.flatnonzero(steps == step)
    return result.posterior["theta"].values[:, i]


def gaussian_draws(rng, mean, cov, n=R):
    return mean + rng.standard_normal((n, len(mean))) @ np.linalg.cholesky(cov).T


def rel(x, y):
    return np.linalg.norm(x - y) / np.linalg.norm(y)


# ----------------------------------------------------------------------------- replicas of the compiled integrators


def test_sgld_law_matches_compiled_replicas_with_correction_and_gaussian_start():
    alpha0, k_steps = 0.1, 300
    sched = schedules.cyclical(alpha0, k_steps, n_cycles=3, explore_fraction=0.3)
    init = gaussian_draws(np.random.default_rng(11), M0, S0)
    result = sgsim.sample(
        targets.linear_gaussian(P, B, V), "csgld", k_steps, n_chains=R, seed=201, init=init, step_size=alpha0,
        n_cycles=3, explore_fraction=0.3, noise_correction=True, burn_in=130, thin=10,
    )  # fmt: skip
    # step 131 is the first sampling step after cycle 2's exploration stage; step 141 is ten
    # steps into it, where the step size (and so the corrected noise alpha^2 V) is largest
    draws = {k: stored(result, k) for k in (131, 141)}
    final = result.constant_data["final_theta"].values

    def law(temperature, correction=True):
        return sgld_law(P, B, sched.step_size, temperature, V, M0, S0, noise_correction=correction)

    path = law(sched.temperature)
    for k, x in draws.items():
        check_gaussian_law(x, path.mean[k - 1], path.cov[k - 1], f"SGLD step {k}")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "SGLD final step")
    # negative controls: the correction ignored (total noise 2 alpha T + alpha^2 V on sampling
    # steps: 13 SE off at step 141); the exploration stage run at T = 1
    wrong = law(sched.temperature, correction=False)
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(draws[141], wrong.mean[140], wrong.cov[140], "correction ignored")
    wrong = law(np.ones(k_steps))
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(draws[131], wrong.mean[130], wrong.cov[130], "no exploration")


def test_sghmc_law_matches_compiled_replicas_ending_in_an_exploration_stage():
    alpha0, eta, k_steps = 0.05, 0.2, 230
    full = schedules.cyclical(alpha0, 300, n_cycles=3, explore_fraction=0.3)
    # the first 230 steps: the run ends on the last exploration (momentum SGD) step of cycle 3
    sched = schedules.Schedule(
        step_size=full.step_size[:k_steps], temperature=full.temperature[:k_steps], stage=full.stage[:k_steps],
        cycle=full.cycle[:k_steps], collect=full.collect[:k_steps], description={"schedule": "cyclical, truncated"},
    )  # fmt: skip
    assert sched.temperature[-1] == 0 and sched.temperature[-31] > 0
    m0 = np.concatenate([M0, [0.2, -0.1, 0.0]])
    s0 = np.zeros((6, 6))
    s0[:3, :3] = S0
    s0[3:, 3:] = 0.05 * EYE
    s0[:3, 3:] = s0[3:, :3] = -0.02 * EYE  # a correlated start
    init = gaussian_draws(np.random.default_rng(12), m0, s0)
    result = sgsim.sample(
        targets.linear_gaussian(P, B, V), "csghmc", schedule=sched, n_chains=R, seed=202, init=init[:, :3],
        init_velocity=init[:, 3:], friction=eta, noise_correction=True, burn_in=130, thin=10,
    )  # fmt: skip
    draws = {k: stored(result, k) for k in (131, 141)}
    final = np.concatenate([result.constant_data[f"final_{x}"].values for x in ("theta", "velocity")], axis=1)

    def law(temperature, correction=True):
        return sghmc_law(P, B, sched.step_size, eta, temperature, V, m0, s0, noise_correction=correction)

    path = law(sched.temperature)
    theta = path.marginal(slice(0, 3))
    for k, x in draws.items():
        check_gaussian_law(x, theta.mean[k - 1], theta.cov[k - 1], f"SGHMC step {k}")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "SGHMC final (theta, v)")
    # negative controls: the correction ignored (32 SE off at step 141); the last exploration
    # stage run at T = 1
    wrong = law(sched.temperature, correction=False).marginal(slice(0, 3))
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(draws[141], wrong.mean[140], wrong.cov[140], "correction ignored")
    wrong = law(np.ones(k_steps))
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(final, wrong.mean[-1], wrong.cov[-1], "no exploration")


# ----------------------------------------------------------------------------- [SGDVI] family: NumPy replicas

A = np.array([[1.0, 0.3, 0.0], [0.3, 0.8, 0.2], [0.0, 0.2, 0.5]])
C = np.array([[2.0, 0.5, 0.3], [0.5, 1.0, 0.0], [0.3, 0.0, 1.5]])
S = 4
H = np.array([[1.5, -0.4, 0.0], [-0.4, 0.7, 0.1], [0.0, 0.1, 2.0]])
E = np.array([[0.6, 0.0, 0.0], [0.3, 0.4, 0.0], [-0.2, 0.1, 0.5]])
LR = schedules.cyclical(0.5, 200, n_cycles=2).step_size  # cosine cyclical learning rates
MID_STEP = 60


def simulate(step, state, seed):
    """Run ``state <- step(state, lr, gradient noise)`` over ``LR``; keep step MID_STEP and the last."""
    rng = np.random.default_rng(seed)
    chol = np.linalg.cholesky(C / S)
    mid = None
    for k, eps in enumerate(LR):
        noise = rng.standard_normal((R, 3)) @ chol.T  # minibatch-gradient noise, Cov = C / S
        state = step(state, eps, noise, rng)
        if k + 1 == MID_STEP:
            mid = state.copy()
    return mid, state


def test_preconditioned_sgd_law_matches_numpy_replicas():
    def step(theta, eps, noise, rng):
        return theta - eps * (theta @ A + noise) @ H  # A, H symmetric: rows of H (A theta + noise)

    mid, final = simulate(step, gaussian_draws(np.random.default_rng(21), M0, S0), 221)
    path = preconditioned_sgd_law(A, C, H, LR, S, M0, S0)
    check_gaussian_law(mid, path.mean[MID_STEP - 1], path.cov[MID_STEP - 1], "preconditioned SGD mid")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "preconditioned SGD final")
    # negative control: the gradient noise not preconditioned (C instead of H C H)
    h_inv = np.linalg.inv(H)
    wrong = preconditioned_sgd_law(A, h_inv @ C @ h_inv, H, LR, S, M0, S0)
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(final, wrong.mean[-1], wrong.cov[-1], "noise not preconditioned")


def test_sgfs_law_matches_numpy_replicas():
    def step(theta, eps, noise, rng):
        zeta = rng.standard_normal(theta.shape)
        return theta - eps * (theta @ A + noise) @ H + eps * (zeta @ E.T) @ H

    mid, final = simulate(step, gaussian_draws(np.random.default_rng(22), M0, S0), 222)
    path = sgfs_law(A, C, H, E, LR, S, M0, S0)
    check_gaussian_law(mid, path.mean[MID_STEP - 1], path.cov[MID_STEP - 1], "SGFS mid")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "SGFS final")
    # negative control: the injected noise E zeta left out (preconditioned SGD's law)
    wrong = sgfs_law(A, C, H, 0 * E, LR, S, M0, S0)
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(final, wrong.mean[-1], wrong.cov[-1], "no injected noise")


def test_momentum_sgd_law_matches_numpy_replicas_in_sgdvi_order():
    mu = 0.3
    m0 = np.concatenate([M0, [0.1, 0.0, -0.2]])
    s0 = np.zeros((6, 6))
    s0[:3, :3] = S0
    s0[3:, 3:] = 0.02 * EYE
    s0[:3, 3:] = s0[3:, :3] = 0.01 * EYE

    def step(state, eps, noise, rng):
        theta, v = state[:, :3], state[:, 3:]
        v = (1 - mu) * v - eps * (theta @ A + noise)  # velocity first, gradient at the old theta
        return np.concatenate([theta + v, v], axis=1)

    mid, final = simulate(step, gaussian_draws(np.random.default_rng(23), m0, s0), 223)
    path = momentum_sgd_law(A, C, LR, mu, S, m0, s0)
    check_gaussian_law(mid, path.mean[MID_STEP - 1], path.cov[MID_STEP - 1], "momentum SGD mid")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "momentum SGD final")
    # negative control: the [cSG] order (position first, then the gradient at the new theta),
    # whose Cov(theta, v) has the other sign (docs: theory-sghmc): 60 SE off at step 60 (at the last
    # step the learning rate, and with it v, is nearly 0)
    wrong = sghmc_law(A, None, LR, mu, 0.0, C / S, m0, s0)
    with pytest.raises(AssertionError, match="covariance"):
        check_gaussian_law(mid, wrong.mean[MID_STEP - 1], wrong.cov[MID_STEP - 1], "cSG order")


# ----------------------------------------------------------------------------- stationarity: Lyapunov and closed forms


def test_sgld_and_sgd_converge_to_the_lyapunov_solution():
    alpha, temp = 0.1, 0.7
    # spectral radius of I - alpha P is 0.96: after 2000 steps the start is forgotten to 1e-70
    path = sgld_law(P, B, alpha, temp, V, M0, S0, n_steps=2000)
    f = EYE - alpha * P
    assert rel(path.cov[-1], stationary_covariance(f, alpha**2 * V + 2 * alpha * temp * EYE)) < 1e-10
    assert rel(path.mean[-1], np.linalg.solve(P, B)) < 1e-10
    sgd = sgd_law(P, B, alpha, V, M0, S0, n_steps=2000)
    assert rel(sgd.cov[-1], stationary_covariance(f, alpha**2 * V)) < 1e-10


@pytest.mark.parametrize("correction", [False, True])
def test_sgld_matches_the_scalar_closed_form(correction):
    a, alpha, temp, v = 1.5, 0.4, 1.0, 2.0
    path = sgld_law([[a]], None, alpha, temp, v, noise_correction=correction, n_steps=400)
    expected = sgld_scalar_stationary(a, alpha, temp, v, noise_correction=correction)
    assert path.cov[-1, 0, 0] == pytest.approx(expected, rel=1e-10)


def test_sghmc_converges_to_the_lyapunov_solution_and_the_scalar_closed_form():
    alpha, eta, gamma_hat, temp = 0.05, 0.3, 0.1, 1.0
    path = sghmc_law(P, B, alpha, eta, temp, V, M0, gamma_hat=gamma_hat, n_steps=3000)
    f = np.block([[EYE, EYE], [-alpha * P, (1 - eta) * EYE - alpha * P]])
    q = np.zeros((6, 6))
    q[3:, 3:] = alpha**2 * V + 2 * (eta - gamma_hat) * alpha * temp * EYE
    assert rel(path.cov[-1], stationary_covariance(f, q)) < 1e-10
    assert rel(path.mean[-1], np.concatenate([np.linalg.solve(P, B), np.zeros(3)])) < 1e-10
    scalar = sghmc_law([[1.2]], None, 0.3, 0.4, 1.0, 0.5, gamma_hat=0.1, n_steps=600)
    var_theta, var_v = sghmc_scalar_stationary(1.2, 0.3, 0.4, 1.0, 0.5, 0.1)
    assert scalar.cov[-1, 0, 0] == pytest.approx(var_theta, rel=1e-10)
    assert scalar.cov[-1, 1, 1] == pytest.approx(var_v, rel=1e-10)
    # cSG order: Cov(theta, v) = -Var v / 2 at stationarity (docs: theory-sghmc)
    assert scalar.cov[-1, 0, 1] == pytest.approx(-var_v / 2, rel=1e-10)


def test_sgdvi_family_converges_to_lyapunov_and_the_closed_forms():
    eps, mu = 0.3, 0.4
    # preconditioned SGD (F2)
    path = preconditioned_sgd_law(A, C, H, eps, S, M0, n_steps=3000)
    f = EYE - eps * H @ A
    assert rel(path.cov[-1], stationary_covariance(f, eps**2 * H @ C @ H / S)) < 1e-10
    # SGFS (F4)
    path = sgfs_law(A, C, H, E, eps, S, M0, n_steps=3000)
    assert rel(path.cov[-1], stationary_covariance(f, eps**2 * H @ (C / S + E @ E.T) @ H)) < 1e-10
    # momentum in [SGDVI] order (F5)
    path = momentum_sgd_law(A, C, eps, mu, S, M0, n_steps=3000)
    f = np.block([[EYE - eps * A, (1 - mu) * EYE], [-eps * A, (1 - mu) * EYE]])
    q = eps**2 / S * np.block([[C, C], [C, C]])
    assert rel(path.cov[-1], stationary_covariance(f, q)) < 1e-10
    # scalar closed forms: SGD eps c / (S a (2 - eps a)) (docs: theory-conventions); momentum (C10)
    a, c, s, beta = 0.8, 1.7, 3.0, 1 - mu
    sgd = preconditioned_sgd_law([[a]], [[c]], [[1.0]], eps, s, n_steps=2000)
    assert sgd.cov[-1, 0, 0] == pytest.approx(eps * c / (s * a * (2 - eps * a)), rel=1e-10)
    mom = momentum_sgd_law([[a]], [[c]], eps, mu, s, n_steps=2000)
    expected = eps * c * (1 + beta) / (s * a * (1 - beta) * (2 * (1 + beta) - eps * a))
    assert mom.cov[-1, 0, 0] == pytest.approx(expected, rel=1e-10)


def test_sgfs_with_the_optimal_preconditioner_has_the_c12_discrete_law():
    # Theorem 5 (S = 1): H* = 2 (C + E E^T)^{-1} / (eps N); the exact discrete law is
    # A^{-1}/N + dlyap(I - PA, PAP/N) with P = eps H* (docs: theory-sgfs)
    eps, n_data = 0.01, 50
    noise = C + E @ E.T
    h_star = 2 * np.linalg.inv(noise) / (eps * n_data)
    path = sgfs_law(A, C, h_star, E, eps, 1, n_steps=4000)
    pa = eps * h_star
    expected = np.linalg.inv(A) / n_data + solve_discrete_lyapunov(EYE - pa @ A, pa @ A @ pa / n_data)
    assert rel(path.cov[-1], expected) < 1e-10


def test_sghmc_at_zero_temperature_is_momentum_sgd_with_the_velocity_reordered():
    # docs: theory-sghmc: the theta recursions agree (mu = eta, eps = alpha, C / S = V); the
    # velocities differ by the update order, so Cov(theta, v) = -Var v / 2 in cSG order and
    # +Var v / 2 in [SGDVI] order
    alpha, eta = 0.2, 0.35
    csg = sghmc_law(A, None, alpha, eta, 0.0, C / S, n_steps=2000).cov[-1]
    sgdvi = momentum_sgd_law(A, C, alpha, eta, S, n_steps=2000).cov[-1]
    assert rel(csg[:3, :3], sgdvi[:3, :3]) < 1e-10
    assert rel(csg[3:, 3:], sgdvi[3:, 3:]) < 1e-10
    sym = lambda x: 0.5 * (x + x.T)  # noqa: E731
    assert rel(sym(csg[:3, 3:]), -csg[3:, 3:] / 2) < 1e-10
    assert rel(sym(sgdvi[:3, 3:]), sgdvi[3:, 3:] / 2) < 1e-10


def test_units_csg_sgd_equals_sgdvi_sgd():
    # SGD on U = N L with step alpha is SGD on L with eps = N alpha; Cov of grad U is N^2 C / S
    n_data, alpha, s = 40.0, 0.01, 5.0
    steps = alpha * (1 + 0.5 * np.sin(np.arange(300)))
    csg = sgd_law(P, None, steps, V, M0, S0)
    sgdvi = preconditioned_sgd_law(P / n_data, V * s / n_data**2, EYE, n_data * steps, s, M0, S0)
    np.testing.assert_allclose(csg.cov, sgdvi.cov, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(csg.mean, sgdvi.mean, rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(sgd_law(P, B, steps, V).cov, sgld_law(P, B, steps, 0.0, V).cov)


# ----------------------------------------------------------------------------- batches, shapes, initial laws


def test_batched_schedules_equal_the_unbatched_ones():
    k = 150
    alphas = np.stack(
        [
            schedules.cyclical(0.1, k, n_cycles=3, explore_fraction=0.3).step_size,
            np.full(k, 0.05),
            0.2 / np.sqrt(np.arange(1, k + 1)),
        ]
    )
    temps = schedules.cyclical(0.1, k, n_cycles=3, explore_fraction=0.3).temperature
    inits = np.array([M0, -M0, 0 * M0])
    batched = sgld_law(P, B, alphas, temps, V, inits, S0)
    assert batched.mean.shape == (3, k, 3) and batched.cov.shape == (3, k, 3, 3)
    for i in range(3):
        one = sgld_law(P, B, alphas[i], temps, V, inits[i], S0)
        np.testing.assert_allclose(batched.cov[i], one.cov, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(batched.mean[i], one.mean, rtol=1e-12, atol=1e-15)
    # SGHMC: temperatures (2, 1, K) against step sizes (3, K) broadcast to a (2, 3) batch
    two_temps = np.stack([temps, np.ones(k)])[:, None, :]
    batched = sghmc_law(P, B, alphas * 0.3, 0.2, two_temps, V, M0)
    assert batched.cov.shape == (2, 3, k, 6, 6)
    for i in range(2):
        for j in range(3):
            one = sghmc_law(P, B, alphas[j] * 0.3, 0.2, two_temps[i, 0], V, M0)
            np.testing.assert_allclose(batched.cov[i, j], one.cov, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(batched.mean[i, j], one.mean, rtol=1e-12, atol=1e-15)
    lrs = np.stack([LR[:k], np.full(k, 0.2)])
    for fn, args in [
        (momentum_sgd_law, (A, C, lrs, 0.3, S)),
        (preconditioned_sgd_law, (A, C, H, lrs, S)),
        (sgfs_law, (A, C, H, E, lrs, S)),
    ]:
        batched = fn(*args, init_mean=M0)
        for i in range(2):
            one = fn(*[lrs[i] if x is lrs else x for x in args], init_mean=M0)
            np.testing.assert_allclose(batched.cov[i], one.cov, rtol=1e-12, atol=1e-15)


def test_initial_law_defaults_and_velocity_padding():
    # a point at 0 by default; theta-only initial laws mean v_0 = 0
    p1 = sgld_law(P, B, 0.1, 1.0, n_steps=1)
    np.testing.assert_allclose(p1.mean[0], 0.1 * B)
    np.testing.assert_allclose(p1.cov[0], 0.2 * EYE, atol=1e-15)  # the eigenbasis path rounds at 1e-17
    full_m0 = np.concatenate([M0, np.zeros(3)])
    full_s0 = np.zeros((6, 6))
    full_s0[:3, :3] = S0
    short = sghmc_law(P, B, 0.05, 0.2, 1.0, V, M0, S0, n_steps=20)
    full = sghmc_law(P, B, 0.05, 0.2, 1.0, V, full_m0, full_s0, n_steps=20)
    np.testing.assert_array_equal(short.cov, full.cov)
    np.testing.assert_array_equal(short.mean, full.mean)
    # a long schedule in one call (K = 10^5 steps stays cheap: a loop of small products)
    big = sgld_law(P, B, 1e-3, 1.0, V, n_steps=100_000)
    assert isinstance(big, GaussianPath) and big.n_steps == 100_000
    assert np.allclose(big.cov, np.swapaxes(big.cov, -1, -2), rtol=0, atol=0)


def test_theory_modules_import_no_integrator():
    root = Path(sgsim.__file__).parent / "theory"
    for name in ("exact_law.py", "distances.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not any(x in (node.module or "") for x in ("integrators", "sampling")), (name, node.module)
            if isinstance(node, ast.Import):
                assert not any("integrators" in a.name or "sampling" in a.name for a in node.names), name


# ----------------------------------------------------------------------------- time averages (F6)


def test_time_average_cov_equals_the_direct_double_sum():
    rng = np.random.default_rng(3)
    f = np.array([[0.9, 0.2, 0.0], [-0.1, 0.7, 0.1], [0.0, 0.3, -0.5]])
    q = np.cov(rng.standard_normal((3, 10)))
    p = stationary_covariance(f, q)
    assert rel(p, f @ p @ f.T + q) < 1e-12
    for t in (1, 2, 3, 7, 16, 33):
        # Cov(x_j, x_i) = F^{j-i} P for j >= i
        powers = [np.linalg.matrix_power(f, k) for k in range(t)]
        direct = sum((powers[j - i] @ p if j >= i else p @ powers[i - j].T) for i in range(t) for j in range(t))
        assert rel(time_average_cov(f, p, t), direct / t**2) < 1e-12


def test_time_average_cov_long_window_and_near_identity():
    # F = I - M: T Cov(mean) -> M^{-1} Q M^{-T} exactly in discrete time (docs: theory-iterate-averaging), with an
    # O(1 / (T lambda_min(M))) correction
    eps = 0.05
    m = eps * A
    q = eps**2 * C / S
    p = stationary_covariance(EYE - m, q)
    limit = np.linalg.solve(m, np.linalg.solve(m, q).T)
    for t in (10**4, 10**6):
        err = rel(t * time_average_cov(EYE - m, p, t), limit)
        assert err < 5 / (t * eps * np.linalg.eigvalsh(A)[0])
    # F within 1e-7 of I: every term enters with a plus sign, so no cancellation
    tiny = 1e-7 * A
    p = stationary_covariance(EYE - tiny, 1e-14 * C)
    t = 10
    powers = [np.linalg.matrix_power(EYE - tiny, k) for k in range(t)]
    direct = sum((powers[j - i] @ p if j >= i else p @ powers[i - j].T) for i in range(t) for j in range(t))
    assert rel(time_average_cov(EYE - tiny, p, t), direct / t**2) < 1e-12


# ----------------------------------------------------------------------------- the Langevin diffusion (F7)


def test_langevin_law_limits_and_semigroup():
    mean, cov = langevin_law(P, B, 0.0, M0, S0)
    np.testing.assert_allclose(mean, M0, rtol=1e-14)
    np.testing.assert_allclose(cov, S0, rtol=1e-14, atol=1e-16)
    # lambda_min(P) > 0.4: by t = 100 the start is forgotten to e^{-80}
    mean, cov = langevin_law(P, B, 100.0, M0, S0)
    assert rel(mean, np.linalg.solve(P, B)) < 1e-10
    assert rel(cov, np.linalg.inv(P)) < 1e-10
    # nu_{s+t} from nu_0 is nu_t from nu_s
    ms, cs = langevin_law(P, B, 0.3, M0, S0)
    m1, c1 = langevin_law(P, B, 1.0, ms, cs)
    m2, c2 = langevin_law(P, B, 1.3, M0, S0)
    assert rel(m1, m2) < 1e-13 and rel(c1, c2) < 1e-13
    # vectorised over times
    means, covs = langevin_law(P, B, np.array([[0.3, 1.3]]), M0, S0)
    assert means.shape == (1, 2, 3) and covs.shape == (1, 2, 3, 3)
    np.testing.assert_allclose(covs[0, 1], c2, rtol=1e-13)


def test_sgld_law_tends_to_the_langevin_law_at_first_order():
    # SGLD with step alpha over time t = K alpha: O(alpha) error (halving alpha halves it)
    _, cov_t = langevin_law(P, B, 1.0, M0, S0)
    errs = [
        rel(sgld_law(P, B, alpha, 1.0, None, M0, S0, n_steps=round(1 / alpha)).cov[-1], cov_t) for alpha in (2e-3, 1e-3)
    ]
    assert 1.8 < errs[0] / errs[1] < 2.2


@pytest.mark.parametrize("seed", range(5))
def test_langevin_contracts_in_w2_at_rate_lambda_min(seed):
    # W2(nu_t, nu_inf) <= exp(-lambda_min t) W2(nu_0, nu_inf) (docs: theory-langevin-law)
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    prec = (q * rng.uniform(0.2, 3.0, 4)) @ q.T
    b = rng.standard_normal(4)
    x = rng.standard_normal((4, 4))
    m0, s0 = 3 * rng.standard_normal(4), x @ x.T
    lam_min = np.linalg.eigvalsh(prec)[0]
    target = (np.linalg.solve(prec, b), np.linalg.inv(prec))
    w0 = gaussian_w2(m0, s0, *target)
    times = np.array([0.1, 0.5, 2.0, 8.0])
    means, covs = langevin_law(prec, b, times, m0, s0)
    w_t = gaussian_w2(means, covs, *target)
    assert np.all(w_t <= np.exp(-lam_min * times) * w0 * (1 + 1e-12))


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sgld_law(P, B, np.full(5, 0.1), np.ones(6)), "temperature has 6 steps"),
        (lambda: sgld_law(P, B, 0.1, 1.0), "n_steps is required"),
        (lambda: sgld_law(P, B, np.full(5, 0.1), n_steps=6), "n_steps = 6"),
        (lambda: sgld_law(P, B, np.full((2, 5), 0.1), np.ones((3, 5))), "do not broadcast"),
        (lambda: sgld_law(P, B, np.zeros((2, 0))), "at least one step"),
        (lambda: sgld_law(-P, B, 0.1, n_steps=3), "precision must be positive definite"),
        (lambda: sgld_law(P[:2], B, 0.1, n_steps=3), "precision must be a square"),
        (lambda: sgld_law(P, B[:2], 0.1, n_steps=3), "shift"),
        (lambda: sgld_law(P, B, np.array([0.1, -0.1]), 1.0), "step_size must be > 0"),
        (lambda: sgld_law(P, B, 0.1, np.array([1.0, -1.0])), "temperature must be >= 0"),
        (lambda: sgld_law(P, B, 0.1, 1.0, -V, n_steps=3), "grad_noise_cov must be positive semidefinite"),
        (lambda: sgld_law(P, B, 0.1, 1.0, -1.0, n_steps=3), "grad_noise_cov"),
        (lambda: sgld_law(P, B, 0.1, 1.0, init_mean=[1.0, 2.0], n_steps=3), "init_mean"),
        (lambda: sgld_law(P, B, 0.1, 1.0, init_cov=-S0, n_steps=3), "init_cov must be positive semidefinite"),
        (lambda: sgld_law(P, B, 1.0, 1.0, 10 * V, noise_correction=True, n_steps=3), "noise_correction"),
        (lambda: sghmc_law(P, B, 0.1, 0.0, n_steps=3), "friction"),
        (lambda: sghmc_law(P, B, 0.1, 1.5, n_steps=3), "friction"),
        (lambda: sghmc_law(P, B, 0.1, 0.2, gamma_hat=0.3, n_steps=3), "gamma_hat"),
        (lambda: sghmc_law(P, B, 0.1, 0.2, gamma_hat=0.1, noise_correction=True, n_steps=3), "gamma_hat"),
        (lambda: sghmc_law(P, B, 0.1, 0.2, 1.0, V, noise_correction=True, n_steps=3), "2 \\* friction"),
        (lambda: sghmc_law(P, B, 0.1, 0.2, init_cov=np.eye(4), n_steps=3), "init_cov"),
        (lambda: momentum_sgd_law(A, C, 0.1, 0.0, S, n_steps=3), "momentum"),
        (lambda: momentum_sgd_law(A, C, 0.1, 0.5, 0, n_steps=3), "batch_size"),
        (lambda: momentum_sgd_law(A, C, -0.1, 0.5, S, n_steps=3), "lr must be > 0"),
        (lambda: momentum_sgd_law(A, -C, 0.1, 0.5, S, n_steps=3), "C must be positive semidefinite"),
        (lambda: preconditioned_sgd_law(-A, C, H, 0.1, S, n_steps=3), "A must be positive definite"),
        (lambda: preconditioned_sgd_law(A, C, -H, 0.1, S, n_steps=3), "H must be positive definite"),
        (lambda: preconditioned_sgd_law(A, C, H, np.ones(3), S, n_steps=4), "lr has 3 steps"),
        (lambda: sgfs_law(A, C, H, E[:2], 0.1, S, n_steps=3), "E must have shape"),
        (lambda: stationary_covariance(1.01 * EYE, EYE), "spectral radius"),
        (lambda: stationary_covariance(0.5 * EYE, -EYE), "Q must be positive semidefinite"),
        (lambda: time_average_cov(0.5 * EYE, EYE, 0), "T must be"),
        (lambda: langevin_law(P, B, -1.0), "t must be >= 0"),
        (lambda: langevin_law(P, B, 1.0, init_cov=-S0), "init_cov"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_eigenbasis_path_equals_the_general_recursion():
    # V commuting with P (a function of P, and V = c I), from a point and from an isotropic
    # start: the variances in P's eigenbasis against the dense recursion, 1e-12 relative
    from sgsim import dynamics
    from sgsim.theory import exact_law as el

    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    p = q @ np.diag([0.5, 1.0, 2.0, 3.0, 4.0]) @ q.T
    alpha = schedules.cyclical(0.1, 200, n_cycles=3, explore_fraction=0.3)
    for v, s0 in ((0.3 * p @ p, np.zeros((5, 5))), (0.7 * np.eye(5), 0.2 * np.eye(5))):
        step = dynamics.sgld_linear(p, np.ones(5), alpha.step_size, alpha.temperature, v)
        m0 = np.full(5, 0.5)
        fast = el._propagate(step, m0, s0)
        assert fast._cov is None  # took the eigenbasis path
        dense = el._propagate_general(step, m0, s0)
        np.testing.assert_allclose(fast.mean, dense.mean, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(fast.cov, dense.cov, rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(fast.variances, np.diagonal(dense.cov, axis1=-2, axis2=-1), rtol=1e-11)
    # negative control: a V that does not commute with P takes the dense path
    v = rng.standard_normal((5, 5))
    step = dynamics.sgld_linear(p, np.ones(5), alpha.step_size, alpha.temperature, v @ v.T)
    assert el._propagate(step, np.zeros(5), np.zeros((5, 5)))._cov is not None
