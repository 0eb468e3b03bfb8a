"""Eq. 21's online noise-covariance estimator: its expectation (1 - 1/S) C (times N / (N - 1)
without replacement), the unbiased option, and the paper's claim of unbiasedness rejected."""

import numpy as np
import pytest
from stats import assert_within_se

from sgsim import datasets, targets
from sgsim._validate import ParameterError
from sgsim.estimators import OnlineNoiseCovariance, bias_factor, estimate_noise_covariance
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
