"""The scalar closed forms used as truths by the statistical tests, against dlyap."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import solve_discrete_lyapunov

from sgsim.theory import sghmc_scalar_stationary, sgld_scalar_stationary

unit = st.floats(0.01, 0.99)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(0.1, 10.0), frac=unit, temp=st.floats(0.0, 3.0), v=st.floats(0.0, 5.0))
def test_sgld_closed_form_is_the_lyapunov_fixed_point(a, frac, temp, v):
    alpha = frac * 2 / a
    q = 2 * alpha * temp + alpha**2 * v
    expected = solve_discrete_lyapunov(np.array([[1 - alpha * a]]), np.array([[q]]))[0, 0]
    assert sgld_scalar_stationary(a, alpha, temp, v) == pytest.approx(expected, rel=1e-10, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(0.1, 10.0), frac=unit, eta=st.floats(0.01, 1.0), g=unit, temp=st.floats(0.0, 3.0), v=st.floats(0, 5))
def test_sghmc_closed_form_is_the_lyapunov_fixed_point(a, frac, eta, g, temp, v):
    alpha = frac * 2 * (2 - eta) / a
    gamma_hat = g * eta
    q = 2 * (eta - gamma_hat) * alpha * temp + alpha**2 * v
    # state (theta, v) in [cSG] order: theta' = theta + v, v' = (1 - eta) v - alpha a theta'
    f = np.array([[1.0, 1.0], [-alpha * a, 1 - eta - alpha * a]])
    cov = solve_discrete_lyapunov(f, np.diag([0.0, q]))
    var_theta, var_v = sghmc_scalar_stationary(a, alpha, eta, temp, v, gamma_hat)
    assert var_theta == pytest.approx(cov[0, 0], rel=1e-9, abs=1e-300)
    assert var_v == pytest.approx(cov[1, 1], rel=1e-9, abs=1e-300)


def test_limits_and_friction_factor():
    assert sgld_scalar_stationary(2.0, 1e-7) == pytest.approx(0.5, rel=1e-6)
    _, var_v = sghmc_scalar_stationary(1.0, 1e-6, 0.1)
    assert var_v / 1e-6 == pytest.approx(1 / (1 - 0.05), rel=1e-5)  # not 1 (docs: theory-sghmc)


def test_noise_correction_removes_gradient_noise():
    assert sgld_scalar_stationary(1.0, 0.1, 1.0, 2.0, noise_correction=True) == sgld_scalar_stationary(1.0, 0.1)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sgld_scalar_stationary(1.0, 2.5), "step_size"),
        (lambda: sgld_scalar_stationary(-1.0, 0.1), "a must"),
        (lambda: sgld_scalar_stationary(1.0, 0.1, 1.0, 30.0, noise_correction=True), "noise_correction"),
        (lambda: sghmc_scalar_stationary(1.0, 0.1, 1.5), "friction"),
        (lambda: sghmc_scalar_stationary(1.0, 0.1, 0.5, gamma_hat=0.6), "gamma_hat"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
