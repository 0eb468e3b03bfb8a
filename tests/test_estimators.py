"""Eq. 21's online noise-covariance estimator: its expectation (1 - 1/S) C (times N / (N - 1)
without replacement), the unbiased option, and the paper's claim of unbiasedness rejected.
Eq. 22's variational EM: the compiled loop against a NumPy reference, and its fixed point
E_q |theta|^2 = P / lambda checked by sampling q at the learnt lambda."""

import numpy as np
import pytest
import reference as R
from stats import assert_within_se

import sgsim
from sgsim import datasets, targets
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.estimators import OnlineNoiseCovariance, bias_factor, estimate_noise_covariance, variational_em
from sgsim.rng import chain_generator
from sgsim.targets.regression import per_example_gradients

X, Y = datasets.load("heart")
N = X.shape[0]


def target(batch_size, replace):
    return targets.logistic_regression(X, Y, batch_size=batch_size, replace=replace, prior_scale=2.0)


def per_example_cov(t, theta):
    g = per_example_gradients(t, theta)
    dev = g - g.mean(0)
    return dev.T @ dev / g.shape[0], g


def replicas(t, theta, n_rep, n_steps, unbias):
    return np.array([estimate_noise_covariance(t, theta, n_steps, seed=s, unbias=unbias) for s in range(n_rep)])


@pytest.mark.parametrize("replace", [True, False])
def test_the_expectation_is_one_minus_one_over_s_times_c(replace):
    s = 3  # a small batch: the bias 1 - 1/S = 2/3 is far outside the tolerance
    t = target(s, replace)
    theta = 0.1 * np.ones(t.dim)
    c, _ = per_example_cov(t, theta)
    est = replicas(t, theta, 60, 200, unbias=False)
    # the replicas are independent: SE of their mean = their sample sd / sqrt(R), per entry; 5 SE
    se = est.std(0, ddof=1) / np.sqrt(len(est)) + 1e-15
    idx = np.triu_indices(t.dim)
    truth = bias_factor(s, N, replace) * c
    assert_within_se(est.mean(0)[idx], truth[idx], se[idx], what="eq. 21 expectation")
    # negative control: the paper's claim that the estimate is unbiased for C
    with pytest.raises(AssertionError):
        assert_within_se(est.mean(0)[idx], c[idx], se[idx], what="unbiased claim")


def test_unbias_gives_c():
    s = 3
    t = target(s, False)
    theta = np.zeros(t.dim)
    c, _ = per_example_cov(t, theta)
    est = replicas(t, theta, 60, 200, unbias=True)
    se = est.std(0, ddof=1) / np.sqrt(len(est)) + 1e-15  # as above
    idx = np.triu_indices(t.dim)
    assert_within_se(est.mean(0)[idx], c[idx], se[idx], what="unbiased eq. 21")
    with pytest.raises(AssertionError):  # negative control: the biased expectation
        assert_within_se(est.mean(0)[idx], (1 - 1 / s) * c[idx], se[idx], what="biased")


def test_the_running_mean_is_the_mean_of_the_outer_products():
    rng = np.random.default_rng(0)
    pairs = rng.standard_normal((50, 2, 4))
    est = OnlineNoiseCovariance(4, 5, 100)
    for g1, gs in pairs:
        est.update(g1, gs)
    dev = pairs[:, 0] - pairs[:, 1]
    np.testing.assert_allclose(est.covariance, dev.T @ dev / 50, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(dim=0, batch_size=5, n_data=10), "dim"),
        (dict(dim=2, batch_size=1, n_data=10), "batch_size"),
        (dict(dim=2, batch_size=20, n_data=10, replace=False), "batch_size"),
    ],
)
def test_bad_input_is_named(kwargs, name):
    with pytest.raises(ParameterError) as info:
        OnlineNoiseCovariance(**kwargs)
    assert info.value.parameter == name
    est = OnlineNoiseCovariance(2, 5, 10)
    with pytest.raises(ParameterError, match="g_first"):
        est.update(np.ones(3), np.ones(2))


# ----------------------------------------------------------------------------- eq. 22


def test_variational_em_equals_the_reference():
    t = target(7, False)
    X, y = t.extras["X"], t.extras["y"]
    n_steps, eps, lam0, rho0, kappa = 300, 0.4, 2.0, 0.3, 0.6
    r = variational_em(t, n_steps, lr=eps, prior_precision=lam0, rho0=rho0, kappa=kappa, seed=9)
    drawer = R.MinibatchDrawer(chain_generator(9, 0), N, 7, False)
    theta, lam, lams = np.zeros(t.dim), lam0, []
    for k in range(n_steps):
        g = R.minibatch_grad_u(theta, X, y, lam, drawer())
        new_lam = lam - rho0 * (k + 1.0) ** (-kappa) * (0.5 * theta @ theta - 0.5 * t.dim / lam)
        theta, lam = theta - eps / N * g, new_lam
        lams.append(lam)
    np.testing.assert_allclose(r.theta, theta, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(r.prior_precision, lams, rtol=1e-11)


def test_variational_em_reaches_its_fixed_point():
    t = target(10, False)
    eps, p = 0.5, t.dim
    r = variational_em(t, 200_000, lr=eps, prior_precision=1.0, rho0=1.0, kappa=0.6, seed=1, record_every=1000)
    last = r.prior_precision[-100:]
    lam = last.mean()  # Polyak average of the last half
    # q_lambda: constant SGD at the learnt lambda, 2000 independent chains from VEM's last iterate
    # (1500 steps: about 10 relaxation times of the slowest direction, rate eps * lambda / N)
    fixed = targets.logistic_regression(X, Y, batch_size=10, replace=False, prior_scale=1 / np.sqrt(lam))
    res = sgsim.sample(fixed, "sgd", 1500, step_size=eps, n_chains=2000, seed=3, storage="final", init=r.theta)
    th = res.posterior["theta"].values[:, -1]
    sq = (th**2).sum(axis=1)
    # SE of the mean of iid |theta|^2 over chains; bias bound: the drift of P / lambda between the
    # two halves of the averaging window (lambda is still converging)
    se = sq.std(ddof=1) / np.sqrt(len(sq))
    drift = abs(p / last[:50].mean() - p / last[50:].mean())
    assert_within_se(sq.mean(), p / lam, se, bias=drift, what="E_q |theta|^2 = P / lambda")
    # negative control: the point-mass fixed point |E_q theta|^2 = P / lambda (EM with the MAP),
    # which the gradient noise's trace Tr Cov_q theta separates from the variational one
    with pytest.raises(AssertionError):
        assert_within_se((th.mean(0) ** 2).sum(), p / lam, se, bias=drift, what="point mass")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(lr=0.0), "lr"),
        (dict(prior_precision=-1.0), "prior_precision"),
        (dict(kappa=0.5), "kappa"),
        (dict(rho0=0.0), "rho0"),
        (dict(init=np.zeros(3)), "init"),
    ],
)
def test_variational_em_bad_input_is_named(kwargs, name):
    args = {**dict(lr=0.1, prior_precision=1.0, rho0=0.1, seed=0), **kwargs}
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        variational_em(target(5, False), 10, **args)
    assert info.value.parameter == name


def test_a_diverging_prior_precision_is_reported():
    with pytest.raises(FloatingPointError, match="rho0"):
        variational_em(target(5, False), 1000, lr=0.1, prior_precision=1.0, rho0=1e6, seed=0)
    with pytest.raises(ParameterTypeError) as info:
        variational_em(targets.standard_gaussian(2), 10, lr=0.1, prior_precision=1.0, rho0=0.1, seed=0)
    assert info.value.parameter == "target"
