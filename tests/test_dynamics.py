"""The per-step mathematics (sgsim.dynamics) against an independent computation of the noise
(tests/reference.py), and the kernels' factorisation of it (integrators._noise)."""

import numpy as np
import pytest
import reference as R

from sgsim import dynamics
from sgsim.integrators._noise import noise_basis, noise_factors

ALPHA = np.array([0.1, 0.05, 0.02, 0.3])
TEMP = np.array([1.0, 0.0, 2.0, 1.0])
V = {
    "zero": np.zeros((2, 2)),
    "diagonal": np.diag([0.4, 0.1]),
    "full": np.array([[0.5, 0.2], [0.2, 0.3]]),
}


def reference_cov(v, alpha, temp, factor, corrected, correction):
    lk = R.noise_transform(v, alpha, temp, factor, corrected, correction)
    return np.einsum("kij,klj->kil", lk, lk)


@pytest.mark.parametrize("name", list(V))
@pytest.mark.parametrize("correction", [False, True])
def test_sgld_noise_is_the_independently_computed_covariance(name, correction):
    v = V[name]
    alpha = ALPHA if not correction else ALPHA * 0.5  # the correction needs alpha V <= 2 T I where T > 0
    noise = dynamics.sgld_noise(alpha, TEMP, v, correction)
    want = reference_cov(v, alpha, TEMP, 1.0, 1.0, correction)
    for k in range(len(alpha)):
        np.testing.assert_allclose(noise.at(k), want[k], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", list(V))
@pytest.mark.parametrize("gamma_hat, correction", [(0.0, False), (0.05, False), (0.0, True)])
def test_sghmc_noise_is_the_independently_computed_covariance(name, gamma_hat, correction):
    v, eta = V[name], 0.6
    noise = dynamics.sghmc_noise(ALPHA * 0.5, TEMP, v, eta, gamma_hat, correction)
    want = reference_cov(v, ALPHA * 0.5, TEMP, eta - gamma_hat, eta, correction)
    for k in range(len(ALPHA)):
        np.testing.assert_allclose(noise.at(k), want[k], rtol=1e-13, atol=1e-15)


def test_noise_comparison_detects_a_wrong_factor():
    # negative control: SGHMC's friction factor left out is caught by the same comparison
    noise = dynamics.sghmc_noise(ALPHA, TEMP, V["full"], 0.6)
    wrong = reference_cov(V["full"], ALPHA, TEMP, 1.0, 1.0, False)
    assert not np.allclose(noise.at(0), wrong[0], rtol=1e-3)


def test_correction_beyond_its_bound_names_the_parameter():
    with pytest.raises(ValueError, match="noise_correction needs") as info:
        dynamics.sgld_noise([1.0], [1.0], np.eye(2) * 3.0, True)
    assert info.value.parameter == "noise_correction"


@pytest.mark.parametrize("name", list(V))
def test_kernel_factors_rebuild_the_covariance(name):
    noise = dynamics.sgld_noise(ALPHA, TEMP, V[name])
    basis = noise_basis(noise, 2)
    sd, noisy = noise_factors(noise, basis, len(ALPHA), 2)
    assert np.array_equal(noisy, np.any(sd > 0, axis=1))
    assert basis.rotate == (name == "full")
    for k in range(len(ALPHA)):
        rebuilt = basis.basis @ np.diag(sd[k] ** 2) @ basis.basis.T
        np.testing.assert_allclose(rebuilt, noise.at(k), rtol=1e-12, atol=1e-15)


def test_kernel_factors_refuse_matrices_without_a_common_basis():
    a = np.array([[2.0, 1.0], [1.0, 1.0]])
    b = np.array([[1.0, 0.0], [0.0, 3.0]]) + np.array([[0.0, 0.5], [0.5, 0.0]]) * 0.3
    noise = dynamics.Noise((np.ones(2), np.ones(2)), (a, b))
    with pytest.raises(ValueError, match="share no eigenbasis"):
        noise_basis(noise, 2)


def test_linear_steps_are_the_documented_recursions():
    p, b, v = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([0.3, -0.2]), V["full"]
    step = dynamics.sgld_linear(p, b, ALPHA, TEMP, v)
    for k in range(len(ALPHA)):
        np.testing.assert_allclose(step.f0 + step.s[k] * step.f1, np.eye(2) - ALPHA[k] * p)
        np.testing.assert_allclose(step.s[k] * step.shift, ALPHA[k] * b)
    hmc = dynamics.sghmc_linear(p, b, ALPHA, TEMP, v, 0.3)
    f = hmc.f0 + ALPHA[1] * hmc.f1
    np.testing.assert_allclose(f[:2, :2], np.eye(2))
    np.testing.assert_allclose(f[2:, :2], -ALPHA[1] * p)
    np.testing.assert_allclose(f[2:, 2:], 0.7 * np.eye(2) - ALPHA[1] * p)
    q = hmc.noise.at(2)
    assert np.all(q[:2] == 0) and np.allclose(q[2:, 2:], ALPHA[2] ** 2 * v + 2 * 0.3 * ALPHA[2] * TEMP[2] * np.eye(2))
