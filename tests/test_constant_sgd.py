"""The constant-SGD family of "Stochastic Gradient Descent as Approximate Bayesian Inference"
(sgd, sgfs, momentum_sgd, sgld_wt, iasg): each compiled step against the NumPy reference
(tests/reference.py) to 1e-12 given the same injected normals, each stationary covariance
against its exact discrete-time value with the OU (continuous-time) value as the negative
control, the stability limits and bad input."""

import numpy as np
import pytest
import reference as R

import sgsim
from sgsim import dynamics
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.sampling import prepare, run_chain
from sgsim.theory import ou, stationary_covariance, time_average_cov

A = np.array([[1.0, 0.3, 0.1], [0.3, 2.0, -0.2], [0.1, -0.2, 0.7]])
C = np.array([[1.5, -0.4, 0.2], [-0.4, 0.8, 0.1], [0.2, 0.1, 1.1]])
S, N = 4, 100
D = 3
TARGET = sgsim.targets.ou_quadratic(A, C, S, N)
H_FULL = np.array([[1.2, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]])
E_FULL = np.array([[0.3, 0.0, 0.0], [0.1, 0.2, 0.0], [0.0, 0.05, 0.25]])
R_CHAINS = 4000


def grad_u(theta):
    return R.linear_gaussian_grad_u(theta, TARGET.extras["precision"], TARGET.extras["shift"])


def injected_run(method, n_steps, init_state, **options):
    run, steps = prepare(TARGET, method, n_steps, **options)
    xi = np.random.default_rng(3).standard_normal((n_steps, 1, D))
    state = tuple(np.array(s, float) for s in init_state)
    out = np.full((run.n_draws, D), np.nan)
    assert run_chain(run, state, None, out, injected=xi[:, 0]) == -1
    return run, steps, xi, state, out


@pytest.mark.parametrize(
    "preconditioner",
    [None, 0.7, np.array([1.3, 0.6, 0.9]), np.diag([1.3, 0.6, 0.9]), H_FULL],
    ids=["identity", "scalar", "diagonal", "diagonal-matrix", "full"],
)
def test_sgd_step_equals_the_reference(preconditioner):
    theta0 = np.array([1.0, -2.0, 0.5])
    run, steps, xi, state, out = injected_run("sgd", 300, (theta0,), step_size=0.3, preconditioner=preconditioner)
    h = sgsim.integrators.constant_sgd.preconditioner_matrix(preconditioner, D)
    q = h @ TARGET.grad_noise_cov @ h / N**2
    path = R.preconditioned_sgd(grad_u, theta0[None], np.full(300, 0.3), 1 / N, h, q, xi)
    np.testing.assert_allclose(out, path[steps, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state[0], path[-1, 0], rtol=1e-12, atol=1e-12)


def test_sgfs_step_equals_the_reference():
    theta0 = np.array([0.2, 0.4, -0.5])
    ee = E_FULL @ E_FULL.T
    run, steps, xi, state, out = injected_run(
        "sgfs", 300, (theta0,), step_size=0.4, preconditioner=H_FULL, injected_cov=ee
    )
    q = H_FULL @ (TARGET.grad_noise_cov / N**2 + ee) @ H_FULL
    path = R.preconditioned_sgd(grad_u, theta0[None], np.full(300, 0.4), 1 / N, H_FULL, q, xi)
    np.testing.assert_allclose(out, path[steps, 0], rtol=1e-12, atol=1e-12)


def test_momentum_step_equals_the_reference():
    theta0, v0 = np.array([1.0, 0.0, -1.0]), np.array([0.1, 0.2, 0.0])
    run, steps, xi, state, out = injected_run("momentum_sgd", 300, (theta0, v0), step_size=0.2, damping=0.3)
    v = TARGET.grad_noise_cov
    path, vpath = R.momentum_sgd(grad_u, theta0[None], v0[None], np.full(300, 0.2), 1 / N, 0.3, v, xi)
    np.testing.assert_allclose(out, path[steps, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state[1], vpath[-1, 0], rtol=1e-12, atol=1e-12)


def test_sgld_wt_is_the_cyclical_papers_sgld_at_half_the_rate():
    theta0 = np.array([0.3, 0.3, 0.3])
    eps = 0.004
    run, steps, xi, state, out = injected_run("sgld_wt", 300, (theta0,), step_size=eps, temperature=0.5)
    path = R.sgld(grad_u, theta0[None], np.full(300, eps / 2), np.full(300, 0.5), TARGET.grad_noise_cov, xi)
    np.testing.assert_allclose(out, path[steps, 0], rtol=1e-12, atol=1e-12)


def test_iasg_keeps_the_window_means_of_sgd():
    theta0 = np.array([1.0, -1.0, 2.0])
    window, warmup, n = 7, 10, 80
    run, steps, xi, state, out = injected_run(
        "iasg", n, (theta0, np.zeros(D)), step_size=0.3, window=window, warmup=warmup
    )
    np.testing.assert_array_equal(steps, np.arange(warmup + window - 1, n, window))
    path, means = R.iasg(grad_u, theta0[None], np.full(n, 0.3), 1 / N, window, warmup, TARGET.grad_noise_cov, xi)
    np.testing.assert_allclose(out, means[steps, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state[0], path[-1, 0], rtol=1e-12, atol=1e-12)
    # the kept draws are the averages, not the iterates (which differ from them)
    assert np.max(np.abs(out - path[steps, 0])) > 1e-3


# ----------------------------------------------------------------------------- stationary covariances


def rejected(samples, cov) -> bool:
    # empirical covariance of R independent draws, entry by entry: SE sqrt((S_ij^2 + S_ii S_jj) / R), 5 SE
    emp = np.cov(samples, rowvar=False)
    se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / len(samples))
    return bool(np.any(np.abs(emp - cov) > 5 * se))


def final_draws(method, n_steps, seed, **options):
    r = sgsim.sample(
        TARGET, method, n_steps, n_chains=R_CHAINS, seed=seed, storage="final", init=np.zeros(D), **options
    )
    return r.posterior["theta"].values[:, -1]


def discrete(step, eps):
    f = step.f0 + eps * step.f1
    q = sum(c[..., 0] * m for c, m in zip(step.noise.coef, step.noise.mats, strict=True))
    return stationary_covariance(f, q), f


def test_preconditioned_sgd_reaches_its_exact_discrete_covariance():
    # eps ||H A|| ~ 1.3: discrete and OU covariances differ by tens of percent
    eps = 0.6
    x = final_draws("sgd", 300, 1, step_size=eps, preconditioner=H_FULL)
    exact, _ = discrete(dynamics.preconditioned_sgd_linear(A, C, H_FULL, np.array([eps]), S), eps)
    assert not rejected(x, exact)
    assert rejected(x, ou.preconditioned_sgd_cov(A, C, eps * H_FULL, S))  # negative control: OU


def test_sgfs_reaches_its_exact_discrete_covariance():
    eps = 0.6
    x = final_draws("sgfs", 300, 2, step_size=eps, preconditioner=H_FULL, injected_cov=E_FULL @ E_FULL.T)
    exact, _ = discrete(dynamics.sgfs_linear(A, C, H_FULL, E_FULL, np.array([eps]), S), eps)
    assert not rejected(x, exact)
    # negative control: the OU covariance of the same algorithm (eq. 27 with C / S)
    assert rejected(x, ou.lyapunov(H_FULL @ A, eps * H_FULL @ (C / S + E_FULL @ E_FULL.T) @ H_FULL))


def test_momentum_sgd_reaches_its_exact_discrete_covariance():
    eps, mu = 0.3, 0.5
    x = final_draws("momentum_sgd", 500, 3, step_size=eps, damping=mu)
    exact, _ = discrete(dynamics.momentum_sgd_linear(A, C, np.array([eps]), mu, S), eps)
    assert not rejected(x, exact[:D, :D])
    assert rejected(x, ou.momentum_cov(A, C, eps, mu, S))  # negative control: OU with the commutator


def test_sgld_wt_reaches_its_exact_discrete_covariance():
    # eps N lambda_max(A) ~ 0.9 (limit 4): the discretisation term is visible
    eps = 0.004
    x = final_draws("sgld_wt", 400, 4, step_size=eps)
    assert not rejected(x, ou.sgld_cov(A, C, eps, N, S, exact=True))
    assert rejected(x, ou.sgld_cov(A, C, eps, N, S))  # negative control: the OU form of §5.1


def test_iasg_window_means_have_the_exact_time_average_covariance():
    eps, window, warmup = 0.5, 20, 100
    x = final_draws("iasg", warmup + 2 * window, 5, step_size=eps, window=window, warmup=warmup)
    p, f = discrete(dynamics.preconditioned_sgd_linear(A, C, np.eye(D), np.array([eps]), S), eps)
    assert not rejected(x, time_average_cov(f, p, window))
    # negative controls: the single iterate's covariance, and independent iterates (Sigma / T)
    assert rejected(x, p)
    assert rejected(x, p / window)


# ----------------------------------------------------------------------------- stability and bad input


@pytest.mark.parametrize(
    "method, limit, options",
    [
        ("sgd", 2 / np.linalg.eigvalsh(A)[-1], {}),
        ("sgd", 2 / np.max(np.linalg.eigvals(H_FULL @ A).real), {"preconditioner": H_FULL}),
        ("iasg", 2 / np.linalg.eigvalsh(A)[-1], {"window": 5}),
        ("momentum_sgd", 2 * (2 - 0.4) / np.linalg.eigvalsh(A)[-1], {"damping": 0.4}),
        ("sgld_wt", 4 / (N * np.linalg.eigvalsh(A)[-1]), {}),
    ],
)
def test_a_rate_beyond_the_stability_limit_is_refused(method, limit, options):
    with pytest.raises(ParameterError, match="step_size") as info:
        prepare(TARGET, method, 50, step_size=limit * 1.001, **options)
    assert info.value.parameter == "step_size"
    prepare(TARGET, method, 50, step_size=limit * 0.999, **options)  # just inside: accepted


@pytest.mark.parametrize(
    "method, options, name",
    [
        ("sgd", {"preconditioner": -np.eye(D)}, "preconditioner"),
        ("sgd", {"preconditioner": np.array([1.0, -1.0, 1.0])}, "preconditioner"),
        ("sgd", {"preconditioner": np.ones(4)}, "preconditioner"),
        ("sgd", {"preconditioner": np.ones((3, 3, 1))}, "preconditioner"),
        ("sgd", {"preconditioner": np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])}, "preconditioner"),
        ("sgfs", {}, "preconditioner"),
        ("sgfs", {"preconditioner": H_FULL, "injected_cov": -np.eye(D)}, "injected_cov"),
        ("sgfs", {"preconditioner": H_FULL, "injected_cov": np.ones(2)}, "injected_cov"),
        ("iasg", {}, "window"),
        ("iasg", {"window": 0}, "window"),
        ("momentum_sgd", {"damping": 1.5}, "damping"),
        ("sgd", {"n_data": 7}, "n_data"),
    ],
)
def test_bad_options_are_named(method, options, name):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        prepare(TARGET, method, 50, step_size=0.1, **options)
    assert info.value.parameter == name


def test_a_target_without_n_data_is_refused_with_a_way_out():
    with pytest.raises(ParameterTypeError, match="n_data|N") as info:
        prepare("mixture_25", "sgd", 50, step_size=0.1)
    assert info.value.parameter == "target"


def test_window_and_warmup_reach_both_the_schedule_and_the_dynamics(tmp_path):
    r = sgsim.sample(TARGET, "iasg", 200, step_size=0.3, window=30, warmup=20, seed=4, n_chains=3)
    assert r.posterior["theta"].shape == (3, 6, D)
    path = sgsim.io.write_result(r, tmp_path / "iasg.nc")
    again = sgsim.replay(path)
    np.testing.assert_array_equal(again.posterior["theta"].values, r.posterior["theta"].values)
