"""The splitting-accuracy experiment (sgsim.experiments.splitting_accuracy): its exact numbers and its fits.

Deterministic checks to 1e-10 (the Gaussian panel read off the compiled steps, the grid laws on a
Gaussian, where every scheme's stationary law is known in closed form), the slope fit on
synthetic data, and one Monte Carlo run against the grid within 5 standard errors. Each check
has a negative control that the same check rejects.
"""

import numpy as np
import pytest

from sgsim import targets
from sgsim._validate import ParameterError
from sgsim.experiments import splitting_accuracy as sa

LAM = 2.5  # a precision other than 1, so that a slip between alpha and alpha lambda shows
STEPS = np.array([0.02, 0.2, 0.6, 1.5])  # alpha; alpha lambda up to 3.75 < 4 (the splittings' limit)


def _forms(steps):
    a = steps * LAM
    return {m: sa.closed_form_error(m, a, step_size=steps) for m in sa.GAUSSIAN_METHODS}


def test_gaussian_panel_matches_the_closed_forms_and_baoab_is_exact():
    got = sa.gaussian_errors(STEPS, precision=LAM)
    want = _forms(STEPS)
    assert np.all(np.abs(got["baoab"]) <= 1e-10)
    for method in ("sgld", "obabo", "sghmc"):
        np.testing.assert_allclose(got[method], want[method], rtol=1e-10, equal_nan=True)
    # SGLD has no stationary law at alpha lambda = 3.75, SGHMC none with eta = sqrt(1.5) > 1
    assert np.isnan(got["sgld"][-1]) and np.isnan(got["sghmc"][-1]) and np.all(np.isfinite(got["obabo"]))
    a = STEPS[:-1] * LAM
    np.testing.assert_allclose(got["sgld"][:-1], a / (2.0 - a), rtol=1e-10)
    # negative controls, the same checks: SGLD's and OBABO's errors are not BAOAB's zero, and SGLD's
    # error is not OBABO's closed form (nor its own with alpha in place of alpha lambda)
    assert np.all(np.abs(got["obabo"]) > 1e-3) and np.all(np.abs(got["sgld"][:-1]) > 1e-3)
    assert not np.allclose(got["sgld"][:-1], a / (4.0 - a), rtol=1e-10)
    assert not np.allclose(got["sgld"][:-1], STEPS[:-1] / (2.0 - STEPS[:-1]), rtol=1e-10)


def test_the_grid_laws_are_exact_on_a_gaussian():
    # on U = lambda theta^2 / 2 the grid's E theta^2 is (1 + closed form) / lambda, to 1e-10
    target = targets.linear_gaussian(np.array([[LAM]]))
    for method, step in (("sgld", 0.3), ("baoab", 0.3), ("obabo", 0.3)):
        want = (1.0 + float(sa.closed_form_error(method, step * LAM))) / LAM
        assert sa.grid_moment(method, target, step) == pytest.approx(want, rel=1e-10, abs=0), (method, step)
    # negative control: BAOAB's grid is exact on the Gaussian, not on the mixture
    mix = sa.mixture()
    value, refined = sa.grid_moment("baoab", mix, 0.4, refine=True)
    assert refined < 1e-10
    assert abs(value - float(mix.second_moment[0, 0])) > 1e-3


def test_the_slope_fit_recovers_a_power_law():
    x = np.array([0.05, 0.1, 0.2, 0.4])
    exact = sa.fit_power(x, -0.03 * x**2)
    assert exact.slope == pytest.approx(2.0, abs=1e-12) and exact.coef == pytest.approx(0.03, rel=1e-12)
    assert exact.slope_se == 0.0
    # noisy synthetic errors 0.2 alpha with known standard errors (fixed seed): the fitted slope is
    # within 4 of its standard errors of 1, and the same test rejects slope 2
    se = np.full(x.size, 2e-3)
    y = 0.2 * x + se * np.random.default_rng(7).standard_normal(x.size)
    fit = sa.fit_power(x, y, se)
    assert 0 < fit.slope_se < 0.1
    assert abs(fit.slope - 1.0) <= 4 * fit.slope_se
    assert abs(fit.slope - 2.0) > 4 * fit.slope_se
    with pytest.raises(ParameterError, match="y"):
        sa.fit_power(x, np.array([0.1, -0.1, 0.2, 0.3]))
    with pytest.raises(ParameterError, match="se"):
        sa.fit_power(x, y, -se)


def test_monte_carlo_runs_agree_with_the_grid_and_see_sglds_bias():
    # SGLD at alpha = 0.4 on the mixture: 20,000 independent chains, each averaging theta^2 over 200
    # steps; tolerance 5 SE of the mean of the chains' averages. The same test against the target's
    # E theta^2 (no discretisation bias) rejects: SGLD's bias there is 0.15, about 100 SE
    target = sa.mixture()
    est, se = sa.monte_carlo_moment("sgld", target, 0.4, n_chains=20_000, n_steps=300, burn_in=100, seed=11)
    exact_chain = sa.grid_moment("sgld", target, 0.4)
    assert abs(est - exact_chain) <= 5 * se
    assert abs(est - float(target.second_moment[0, 0])) > 5 * se


def test_bad_input_is_named():
    with pytest.raises(ParameterError, match="method"):
        sa.grid_moment("sghmc", sa.mixture(), 0.1)
    with pytest.raises(ParameterError, match="target"):
        sa.grid_moment("sgld", targets.standard_gaussian(2), 0.1)
    with pytest.raises(ParameterError, match="method"):
        sa.closed_form_error("svgd", 0.1)
