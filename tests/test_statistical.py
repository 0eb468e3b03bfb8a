"""Monte Carlo tests of the samplers against exact discrete-time laws.

docs: theory-sgld, theory-sghmc, theory-exact-sgld, theory-exact-sghmc, theory-tolerances.

Design: R independent chains of ``sgsim.sample`` (replicas, not one autocorrelated chain),
compared at fixed steps with the exact law of the iterate at that step, so the bias term is
zero. Tolerance: z = 5 standard errors of the replica estimate (false alarm 6e-7 per entry).
Every test also runs a negative control: a plausible wrong law that the same check rejects.
Fixed seeds.
"""

import numpy as np
import pytest
from stats import assert_within_se, check_gaussian_law

import sgsim
from sgsim import schedules, targets
from sgsim.theory import exact_law

P = np.array([[2.0, 0.5], [0.5, 1.0]])
B = np.array([0.3, -0.2])
V = np.array([[0.5, 0.2], [0.2, 0.3]])  # non-diagonal gradient-noise covariance
LINEAR = targets.linear_gaussian(P, B, V)
INIT = np.array([1.0, 2.0])
K, CYCLES, BETA = 300, 3, 0.3
# keep one mid-run draw: the first sampling step of cycle 2 (step 131), right after an
# exploration stage, where the law still remembers both the stage and the initial point
MID = dict(burn_in=130, thin=1000)


def mid_and_final(result, *final_names):
    step = int(result.sample_stats["step"].values[0, 0])
    assert step == 131
    final = np.concatenate([result.constant_data[name].values for name in final_names], axis=1)
    return step, result.posterior["theta"].values[:, 0], final


def test_cyclical_sgld_matches_the_exact_law_f1():
    alpha0 = 0.1
    result = sgsim.sample(
        LINEAR, "csgld", K, n_chains=20_000, seed=101, init=INIT, step_size=alpha0, n_cycles=CYCLES,
        explore_fraction=BETA, **MID,
    )  # fmt: skip
    step, mid, final = mid_and_final(result, "final_theta")
    sched = schedules.cyclical(alpha0, K, n_cycles=CYCLES, explore_fraction=BETA)

    def law(temperature):
        return exact_law.sgld_law(P, B, sched.step_size, temperature, V, init_mean=INIT)

    path = law(sched.temperature)
    check_gaussian_law(mid, path.mean[step - 1], path.cov[step - 1], "step 131")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "final step")
    # negative controls: injected variance alpha instead of 2 alpha (Welling-Teh's epsilon
    # read as the cSG alpha); exploration steps run at T = 1 instead of 0
    for wrong in (sched.temperature / 2, np.ones(K)):
        w = law(wrong)
        with pytest.raises(AssertionError, match="variance"):
            check_gaussian_law(mid, w.mean[step - 1], w.cov[step - 1], "step 131, wrong law")


@pytest.mark.parametrize("correction, seed", [(False, 102), (True, 103)])
def test_sgld_scalar_stationary_variance_a1(correction, seed):
    a, alpha, temp, v = 1.0, 0.5, 1.0, 1.0
    target = targets.linear_gaussian([[a]], grad_noise_cov=v)
    result = sgsim.sample(
        target, "sgld", 100, n_chains=10_000, seed=seed, init=[0.0], step_size=alpha, temperature=temp,
        noise_correction=correction, burn_in=99,
    )  # fmt: skip
    x = result.constant_data["final_theta"].values[:, 0]
    # (1 - alpha a)^(2 * 100) = 4^-100: the 100-step law is the stationary one to 1e-60
    total = 2 * temp if correction else 2 * temp + alpha * v  # noise per step / alpha
    var = total / (a * (2 - alpha * a))
    n = x.size
    assert_within_se(x.mean(), 0.0, np.sqrt(var / n), what="mean")  # SE = sqrt(Var / R)
    assert_within_se(x.var(ddof=1), var, var * np.sqrt(2 / (n - 1)), what="variance")  # SE = Var sqrt(2/(R-1))
    # negative control: the continuous-time T / a is off by alpha a / 2 = 25 % and more
    with pytest.raises(AssertionError):
        assert_within_se(x.var(ddof=1), temp / a, temp / a * np.sqrt(2 / (n - 1)), what="variance")


def test_sghmc_scalar_stationary_law_a2():
    a, alpha, eta, gamma_hat, temp, v = 1.0, 0.2, 0.3, 0.1, 1.0, 1.0
    target = targets.linear_gaussian([[a]], grad_noise_cov=v)
    result = sgsim.sample(
        target, "sghmc", 300, n_chains=10_000, seed=104, init=[0.0], step_size=alpha, friction=eta,
        gamma_hat=gamma_hat, temperature=temp, burn_in=299,
    )  # fmt: skip
    theta = result.constant_data["final_theta"].values[:, 0]
    vel = result.constant_data["final_velocity"].values[:, 0]
    # spectral radius of the state recursion is sqrt(1 - eta) = 0.84: stationary to 1e-22
    q = 2 * (eta - gamma_hat) * alpha * temp + alpha**2 * v
    var_theta = (2 - eta) * q / (eta * alpha * a * (2 * (2 - eta) - alpha * a))
    var_v = 2 * alpha * a * var_theta / (2 - eta)
    # stationarity of theta_k = theta_{k-1} + v_{k-1} forces Cov(theta, v) = -Var v / 2 in cSG order
    cov = np.array([[var_theta, -var_v / 2], [-var_v / 2, var_v]])
    x = np.stack([theta, vel], 1)
    check_gaussian_law(x, np.zeros(2), cov, "SGHMC stationary")
    # negative controls: the naive Var v = alpha; the gradient-first order's Cov(theta, v) = +Var v / 2
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(x, np.zeros(2), np.array([[var_theta, -alpha / 2], [-alpha / 2, alpha]]), "naive")
    with pytest.raises(AssertionError, match="covariance"):
        check_gaussian_law(x, np.zeros(2), np.abs(cov), "other order")


def test_cyclical_sghmc_matches_the_exact_law_f5():
    alpha0, eta, gamma_hat = 0.02, 0.2, 0.05
    result = sgsim.sample(
        LINEAR, "csghmc", K, n_chains=20_000, seed=105, init=INIT, step_size=alpha0, n_cycles=CYCLES,
        explore_fraction=BETA, friction=eta, gamma_hat=gamma_hat, **MID,
    )  # fmt: skip
    step, mid, final = mid_and_final(result, "final_theta", "final_velocity")
    sched = schedules.cyclical(alpha0, K, n_cycles=CYCLES, explore_fraction=BETA)

    def law(temperature, g):
        # init_mean of theta alone: v_0 = 0
        return exact_law.sghmc_law(P, B, sched.step_size, eta, temperature, V, init_mean=INIT, gamma_hat=g)

    path = law(sched.temperature, gamma_hat)
    theta = path.marginal(slice(0, 2))
    check_gaussian_law(mid, theta.mean[step - 1], theta.cov[step - 1], "step 131")
    check_gaussian_law(final, path.mean[-1], path.cov[-1], "final (theta, v)")
    # negative controls: exploration at T = 1; gamma_hat ignored (noise 2 eta alpha T)
    w = law(np.ones(K), gamma_hat).marginal(slice(0, 2))
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(mid, w.mean[step - 1], w.cov[step - 1], "no exploration")
    w = law(sched.temperature, 0.0)
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(final, w.mean[-1], w.cov[-1], "gamma_hat ignored")
