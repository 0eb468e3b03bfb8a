"""BAOAB, OBABO, SGNHT and pSGLD (sgsim.integrators.splitting, .sgnht, .psgld) against their theory.

The conformance kit checks each of them (tests/test_conformance.py): the exact laws of the two
splittings through many chains, the compiled steps of SGNHT and pSGLD against their NumPy oracles.
Here: the stationary laws the papers claim, each with a negative control that the same check
rejects. Statistical checks use independent chains' final states, so that the standard error of
a mean over C chains is the sample sd / sqrt(C); tolerances are 5 SE plus a stated bound on the
discretisation bias.
"""

import numpy as np
import pytest

import sgsim
from sgsim import schedules, targets
from sgsim._validate import ParameterError
from sgsim.algorithms import affine_steps
from sgsim.testing import kit_target


def _final(result, name):
    return result["constant_data"][f"final_{name}"].values


def _stationary_theta_cov(method, target, step, **options):
    # the stationary law of the step repeated forever: a run's second step (the first opens with a half kick)
    maps = affine_steps(method, target, schedule=schedules.constant(step, 2), **options)
    mean, cov = maps.stationary()
    d = target.dim
    return mean[:d], cov[:d, :d]


@pytest.mark.parametrize("step", [0.05, 0.5, 0.9])  # SGLD, the negative control, is stable below 2 / 2.06
def test_baoab_samples_a_gaussian_position_exactly_at_every_stable_step(step):
    target = kit_target(gradient_noise=False)
    want_cov = np.linalg.inv(target.extras["precision"])
    mean, cov = _stationary_theta_cov("baoab", target, step, friction=0.7)
    np.testing.assert_allclose(cov, want_cov, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mean, target.mean, rtol=1e-10, atol=1e-12)
    # negative controls, the same check: SGLD's Euler step (O(alpha)) and OBABO (O(h^2)) are not exact
    for other in ("sgld", "obabo"):
        _, off = _stationary_theta_cov(other, target, step, **({"friction": 0.7} if other == "obabo" else {}))
        assert not np.allclose(off, want_cov, rtol=1e-3), other


def test_obabo_position_variance_is_velocity_verlets():
    # on U = w^2 q^2 / 2 OBABO's stationary position variance is T / (w^2 (1 - h^2 w^2 / 4)) [derived here:
    # the O parts leave p ~ N(0, T) invariant and the Verlet map preserves q^2 w^2 (1 - h^2 w^2/4) + p^2]
    w2, step = 3.0, 0.4
    target = targets.linear_gaussian(np.array([[w2]]))
    _, cov = _stationary_theta_cov("obabo", target, step, friction=1.3)
    assert cov[0, 0] == pytest.approx(1.0 / (w2 * (1.0 - step * w2 / 4.0)), rel=1e-10)
    _, cov_b = _stationary_theta_cov("baoab", target, step, friction=1.3)
    assert cov_b[0, 0] != pytest.approx(1.0 / (w2 * (1.0 - step * w2 / 4.0)), rel=1e-3)


def test_splittings_refuse_bad_input_before_any_work():
    exact = kit_target(gradient_noise=False)
    lam = float(np.linalg.eigvalsh(exact.extras["precision"])[-1])
    for method in ("baoab", "obabo"):
        with pytest.raises(ParameterError, match="step_size") as err:
            sgsim.sample(exact, method, 10, step_size=4.0 / lam, seed=1)
        assert "stability limit" in str(err.value)
        with pytest.raises(ParameterError, match="friction"):
            sgsim.sample(exact, method, 10, step_size=0.1, friction=0.0, seed=1)
        with pytest.raises(ParameterError, match="target"):
            sgsim.sample(kit_target(), method, 10, step_size=0.1, seed=1)
        with pytest.raises(ParameterError, match="noise_correction"):
            sgsim.sample(exact, method, 10, step_size=0.1, noise_correction=True, seed=1)


@pytest.mark.parametrize("friction_step", ["euler", "exponential"])
def test_sgnht_holds_the_kinetic_temperature_and_its_thermostat_absorbs_gradient_noise(friction_step):
    # standard 2-D Gaussian, gradient noise V = s^2 I, A = 1, h = 0.02: the thermostat settles at
    # A + h s^2 / (2T) = 1.5 up to O(h) terms; to first order on this target they are
    # (c h / 2) (E xi^2 + T/d) - ... with c = 1 (Euler) or 2 (exponential) [derived here from
    # E|p_{k+1}|^2 = E|p_k|^2], bounded by h (xi^2 + T/d) = 0.055 at xi = 1.5; the kinetic temperature
    # is T exactly
    s2, step, n_chains = 50.0, 0.0004, 4000
    h = np.sqrt(step)
    target = targets.standard_gaussian(2).with_gradient_noise(s2 * np.eye(2))
    run = sgsim.sample(
        target, "sgnht", 1500, n_chains=n_chains, seed=3, step_size=step, storage="final", friction_step=friction_step
    )
    p, xi, theta = _final(run, "velocity"), _final(run, "thermostat")[:, 0], _final(run, "theta")
    kinetic = (p**2).mean(axis=1)
    assert abs(kinetic.mean() - 1.0) <= 5 * kinetic.std(ddof=1) / np.sqrt(n_chains)
    se_xi = xi.std(ddof=1) / np.sqrt(n_chains)
    predicted = 1.0 + h * s2 / 2.0
    allowance = h * (predicted**2 + 1.0 / 2)
    assert abs(xi.mean() - predicted) <= 5 * se_xi + allowance
    # negative control: the thermostat's value without the gradient noise it absorbs
    assert abs(xi.mean() - 1.0) > 5 * se_xi + allowance

    # theta's variance within SE of the target's (1) and SGHMC at the same friction without the
    # thermostat, overheated by the same gradient noise, rejected by the same check (SE of a sample
    # variance: sqrt(2 / C) at variance 1; a 3% allowance for the O(h) bias)
    def within(x):
        return np.all(np.abs(x.var(axis=0, ddof=1) - 1.0) <= 5 * np.sqrt(2.0 / n_chains) + 0.03)

    assert within(theta)
    hot = sgsim.sample(target, "sghmc", 1500, n_chains=n_chains, seed=3, step_size=step, friction=h, storage="final")
    assert not within(_final(hot, "theta"))


def test_sgnht_exponential_friction_survives_the_start_that_euler_does_not():
    # chains started in the 25-Gaussian mixture's box meet gradients of ~100: Algorithm 1's 1 - h xi
    # turns negative within a few steps and the chains diverge; exp(-h xi) contracts for any xi >= 0
    target = targets.mixture_25()
    kw = dict(n_chains=16, seed=1, step_size=0.025)
    with pytest.raises(sgsim.sampling.DivergenceError):
        sgsim.sample(target, "sgnht", 400, **kw)
    run = sgsim.sample(target, "sgnht", 400, friction_step="exponential", **kw)
    assert np.all(np.isfinite(run.posterior["theta"].values))
    with pytest.raises(ParameterError, match="friction_step"):
        sgsim.sample(target, "sgnht", 10, step_size=0.01, friction_step="exact", seed=1)


def test_sgnht_at_another_temperature_and_bad_input():
    # the thermostat's set point is the step's temperature (the update reads it): at T = 0.5 the
    # kinetic temperature settles at 0.5 and theta's variance at 0.5 (tolerances as above)
    n_chains, step = 2000, 0.0025
    run = sgsim.sample(
        targets.standard_gaussian(2), "sgnht", 600, n_chains=n_chains, seed=4, step_size=step, temperature=0.5,
        storage="final",
    )  # fmt: skip
    kinetic = (_final(run, "velocity") ** 2).mean(axis=1)
    assert abs(kinetic.mean() - 0.5) <= 5 * kinetic.std(ddof=1) / np.sqrt(n_chains)
    assert abs(kinetic.mean() - 1.0) > 5 * kinetic.std(ddof=1) / np.sqrt(n_chains)  # the set point at T = 1
    var = _final(run, "theta").var(axis=0, ddof=1)
    assert np.all(np.abs(var - 0.5) <= 5 * 0.5 * np.sqrt(2.0 / n_chains) + 0.03)
    with pytest.raises(ParameterError, match="diffusion"):
        sgsim.sample(targets.standard_gaussian(2), "sgnht", 10, step_size=0.01, diffusion=-1.0, seed=1)


def test_psgld_gamma_term_removes_the_preconditioners_bias():
    # a 1-D two-component mixture, exact gradients, beta = 0.5, lambda = 1: without the Gamma term the
    # chain samples exp(-U) / G(theta) (2.52 against E theta^2 = 1.94 in a long run); with it, the
    # target (SE of a mean of theta^2 over C chains; SGLD's O(alpha) bias at this step, -0.02, is
    # within the 5-SE allowance of 0.2)
    target = targets.gaussian_mixture(np.array([[-1.2], [1.2]]), 0.5)
    want = float(target.second_moment[0, 0])
    n_chains, step = 2000, 0.01
    results = {}
    for method in ("psgld_gamma", "psgld"):
        run = sgsim.sample(
            target, method, 2500, n_chains=n_chains, seed=5, step_size=step, rms_decay=0.5, floor=1.0, storage="final"
        )
        x2 = _final(run, "theta")[:, 0] ** 2
        results[method] = abs(x2.mean() - want) <= 5 * x2.std(ddof=1) / np.sqrt(n_chains)
    assert results == {"psgld_gamma": True, "psgld": False}


def test_psgld_refuses_bad_input_before_any_work():
    target = kit_target(gradient_noise=False)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ParameterError, match="rms_decay"):
            sgsim.sample(target, "psgld", 10, step_size=0.01, rms_decay=bad, seed=1)
    with pytest.raises(ParameterError, match="floor"):
        sgsim.sample(target, "psgld", 10, step_size=0.01, floor=0.0, seed=1)
    with pytest.raises(ParameterError, match="target"):
        sgsim.sample(kit_target(), "psgld", 10, step_size=0.01, seed=1)
