"""Constant SGD and SGD with momentum on the OU quadratic of "Stochastic Gradient Descent as
Approximate Bayesian Inference": simulated stationary covariances against the exact discrete
ones of sgsim.theory.ou, with the OU (continuous) covariance as the negative control."""

import numpy as np
import pytest

import sgsim
from sgsim import dynamics
from sgsim.theory import ou, stationary_covariance

A = np.array([[1.0, 0.3], [0.3, 2.0]])
C = np.array([[1.5, -0.4], [-0.4, 0.8]])
S, N = 4, 100
R = 4000


def rejected(samples, cov) -> bool:
    # empirical covariance of R independent draws, entry by entry: SE sqrt((S_ij^2 + S_ii S_jj) / R), 5 SE
    emp = np.cov(samples, rowvar=False)
    se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / len(samples))
    return bool(np.any(np.abs(emp - cov) > 5 * se))


def test_the_target_is_the_posterior_with_the_minibatch_noise():
    t = sgsim.targets.ou_quadratic(A, C, S, N)
    np.testing.assert_allclose(t.extras["covariance"], np.linalg.inv(N * A), rtol=1e-12)
    np.testing.assert_allclose(t.grad_noise_cov, N**2 * C / S, rtol=1e-12)
    assert sgsim.targets.build(t.spec).fingerprint() == t.fingerprint()


def test_constant_sgd_reaches_the_exact_discrete_covariance():
    # lr eps = 0.5 on the averaged loss: eps ||A|| ~ 1, where OU and discrete differ by ~30%
    eps = 0.5
    t = sgsim.targets.ou_quadratic(A, C, S, N)
    r = sgsim.sample(t, "sgld", 400, n_chains=R, step_size=eps / N, temperature=0.0, seed=1, storage="final",
                     init=np.zeros((R, 2)))  # fmt: skip
    x = r.posterior["theta"].values[:, -1]
    assert not rejected(x, ou.sgd_cov(A, C, eps, S, exact=True))
    assert rejected(x, ou.sgd_cov(A, C, eps, S))  # negative control: the OU covariance


def test_momentum_sgd_reaches_the_exact_discrete_covariance():
    eps, mu = 0.3, 0.5
    t = sgsim.targets.ou_quadratic(A, C, S, N)
    r = sgsim.sample(t, "sghmc", 600, n_chains=R, step_size=eps / N, friction=mu, temperature=0.0, seed=2,
                     storage="final", init=np.zeros((R, 2)))  # fmt: skip
    x = r.posterior["theta"].values[:, -1]
    step = dynamics.momentum_sgd_linear(A, C, np.array([eps]), mu, S)
    f = step.f0 + step.s[..., 0] * step.f1
    q = sum(c[..., 0] * m for c, m in zip(step.noise.coef, step.noise.mats, strict=True))
    exact = stationary_covariance(f, q)[:2, :2]
    assert not rejected(x, exact)
    assert rejected(x, ou.momentum_cov(A, C, eps, mu, S))  # negative control: the OU covariance


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(hessian=-A), "hessian"),
        (dict(noise_cov=-C), "noise_cov"),
        (dict(batch_size=200), "batch_size"),
        (dict(hessian=np.ones((2, 3))), "hessian"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    args = {**dict(hessian=A, noise_cov=C, batch_size=S, n_data=N), **kwargs}
    with pytest.raises(ValueError, match=match):
        sgsim.targets.ou_quadratic(**args)
