"""SGLD-CV and SVRG-LD: the estimators, their exact law on linear regression, their variance on German credit.

Statistical checks compare sample means and second moments over many independent chains (or
draws) with exact values; each z-score divides by the standard error of that sample statistic
estimated from the same sample (sd of the summands / sqrt(count)), since the laws here are not
Gaussian (the minibatch noise is multiplicative). Each has a negative control: the same data
against a wrong law, which the same bound rejects.
"""

import itertools

import numpy as np
import pytest

import sgsim
from sgsim import theory
from sgsim._validate import ParameterError
from sgsim.targets import control_variates as cv
from sgsim.targets.regression import minibatch_gradient_covariance
from sgsim.theory.minibatch_law import linear_regression_examples, minibatch_sgld_moments

Z = 5.0


def _data(n_data=20, seed=5):
    # rows of very different sizes: the per-example Hessians differ, so the minibatch noise is large
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_data, 2)) * rng.exponential(1.0, (n_data, 1))
    return X, X @ np.array([1.0, -1.0]) + rng.standard_normal(n_data)


def _linear(batch_size, replace, n_data=20):
    X, y = _data(n_data)
    return sgsim.targets.linear_regression(
        X, y, noise_precision=1.0, batch_size=batch_size, replace=replace, standardise=False, intercept=False
    )


def _law(target, estimator, *, batch_size=None, replace=None, **kw):
    h, b = linear_regression_examples(target.extras["X"], target.extras["y"], target.extras["noise_precision"])
    return minibatch_sgld_moments(
        h,
        b,
        target.extras["prior_precision"],
        batch_size=target.extras["batch_size"] if batch_size is None else batch_size,
        replace=target.extras["replace"] if replace is None else replace,
        estimator=estimator,
        **kw,
    )


# ----------------------------------------------------------------------------- deterministic


def test_find_mode_is_the_exact_posterior_mean_of_linear_regression():
    target = _linear(4, True)
    mode = cv.find_mode(target)
    assert np.allclose(mode, target.mean, rtol=1e-10, atol=1e-12)
    assert cv.newton_decrement(target, mode) < 1e-9


def test_the_estimators_are_the_plain_minibatch_gradient_recentred_on_the_same_minibatch():
    # with the same stream both draw the same indices: CV(theta) = plain(theta) - plain(hat) + grad U(hat),
    # which fixes the N/n factor, the signs and the order of the draws; SVRG's first call is exact
    for replace in (True, False):
        target = _linear(3, replace)
        est = cv.control_variate(target)
        hat = est.extras["control_point"]
        theta = hat + np.array([0.7, -0.4])
        draws = est.stochastic_gradient(theta, np.random.default_rng(1), 6)
        plain = target.stochastic_gradient(theta, np.random.default_rng(1), 6)
        at_hat = target.stochastic_gradient(hat, np.random.default_rng(1), 6)
        want = plain - at_hat + target.gradient(hat)
        assert np.allclose(draws, want, rtol=1e-12, atol=1e-10 * np.abs(plain).max())
        assert np.allclose(est.stochastic_gradient(hat, np.random.default_rng(2), 3), target.gradient(hat), atol=1e-10)
        snap = cv.svrg(target, 4).stochastic_gradient(theta, np.random.default_rng(1), 6)
        assert np.allclose(snap[0], target.gradient(theta), rtol=1e-12, atol=1e-10)
        # calls 1-3 are around the snapshot (= theta here, so exact too); call 4 retakes it
        assert np.allclose(snap, target.gradient(theta), rtol=1e-12, atol=1e-10)


def test_a_full_batch_without_replacement_gives_the_exact_gradient():
    target = _linear(20, False)
    theta = np.array([0.3, 2.0])
    for est in (cv.control_variate(target), cv.svrg(target, 3)):
        draws = est.stochastic_gradient(theta, np.random.default_rng(0), 4)
        assert np.allclose(draws, target.gradient(theta), rtol=1e-12, atol=1e-10)


def _enumerated(target, estimator, x0, alpha, n_steps, batches, control=None, every=None):
    # the law of theta_K at T = 0 by enumerating every sequence of minibatches (each equally likely)
    X, y, tau = target.extras["X"], target.extras["y"], target.extras["noise_precision"]
    prec = target.extras["prior_precision"]
    n_data = X.shape[0]

    def grad(theta, i):  # gradient of example i's share of U, the likelihood only
        return -tau * (y[i] - X[i] @ theta) * X[i]

    ends = []
    for seq in itertools.product(batches, repeat=n_steps):
        theta, ref = x0.copy(), control
        for k, batch in enumerate(seq):
            if estimator == "svrg" and k % every == 0:
                ref = theta.copy()
            full = target.gradient(theta)
            scale = n_data / len(batch)
            if estimator == "plain":
                g = prec * theta + scale * sum(grad(theta, i) for i in batch)
            else:
                g = full + scale * sum(grad(theta, i) - grad(ref, i) for i in batch)
                g -= sum(grad(theta, i) - grad(ref, i) for i in range(n_data))
            theta = theta - alpha * g
        ends.append(theta)
    ends = np.array(ends)
    return ends.mean(0), np.cov(ends.T, bias=True)


@pytest.mark.parametrize("estimator", ["plain", "control_variate", "svrg"])
def test_the_moment_recursion_equals_an_enumeration_of_every_minibatch(estimator):
    # N = 4, n = 2, three steps at T = 0: every sequence of minibatches, with replacement (16 ordered
    # pairs a step) and without (6 subsets); the recursion must give their mean and covariance exactly
    target = _linear(1, True, n_data=4)
    hat = target.mean + np.array([0.05, -0.02])
    x0 = np.array([1.5, -2.0])
    alpha = 0.3 / np.linalg.eigvalsh(target.extras["precision"])[-1]
    for replace, batches in (
        (True, list(itertools.product(range(4), repeat=2))),
        (False, list(itertools.combinations(range(4), 2))),
    ):
        n = 2
        mean, cov = _enumerated(target, estimator, x0, alpha, 3, batches, control=hat, every=2)
        law = _law(target, estimator, batch_size=n, replace=replace, step_size=alpha, temperature=0.0,
                   n_steps=3, init_mean=x0, control_point=hat, snapshot_every=2)  # fmt: skip
        assert np.allclose(law.mean[-1], mean, rtol=1e-12, atol=1e-12)
        assert np.allclose(law.cov[-1], cov, rtol=1e-10, atol=1e-14)
        # negative control: the other sampling mode's law differs from the enumeration
        other = _law(target, estimator, batch_size=n, replace=not replace, step_size=alpha, temperature=0.0,
                     n_steps=3, init_mean=x0, control_point=hat, snapshot_every=2)  # fmt: skip
        assert not np.allclose(other.cov[-1], cov, rtol=1e-3)


def test_with_the_whole_data_set_as_batch_the_law_is_plain_sglds():
    target = _linear(20, False)
    alpha = 0.4 / np.linalg.eigvalsh(target.extras["precision"])[-1]
    exact = theory.sgld_law(target.extras["precision"], target.extras["shift"], alpha, n_steps=30, init_mean=[3.0, 1.0])
    for estimator in ("plain", "control_variate", "svrg"):
        law = _law(target, estimator, step_size=alpha, n_steps=30, init_mean=[3.0, 1.0], control_point=target.mean,
                   snapshot_every=4)  # fmt: skip
        assert np.allclose(law.mean, exact.mean, rtol=1e-12, atol=1e-12)
        assert np.allclose(law.cov, exact.cov, rtol=1e-10, atol=1e-14)


# ----------------------------------------------------------------------------- the samplers against the law


def _z_scores(theta, law):
    """z of the sample mean and of every sample (co)variance entry against the law's last step."""
    n = theta.shape[0]
    mean, cov = law.mean[-1], law.cov[-1]
    z_mean = (theta.mean(0) - mean) / np.sqrt(np.diag(cov) / n)
    c = theta - theta.mean(0)
    prods = c[:, :, None] * c[:, None, :]
    # the SE of a sample covariance: sd of the centred products / sqrt(n)
    z_cov = (prods.sum(0) / (n - 1) - cov) / (prods.std(0) / np.sqrt(n))
    return np.concatenate([z_mean, z_cov[np.triu_indices(len(mean))]])


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("method", ["sgld_cv", "svrg_ld"])
def test_the_samplers_follow_their_exact_moments_on_linear_regression(method, replace):
    # 40000 chains, 5 steps of alpha = 0.5 / lambda_max(P) at T = 1 from 10 posterior sds away
    # (where the multiplicative noise is large); n = 4 of N = 20
    target = _linear(4, replace)
    alpha = 0.5 / np.linalg.eigvalsh(target.extras["precision"])[-1]
    x0 = target.mean + 10 * np.sqrt(np.diag(target.extras["covariance"]))
    estimator, options = ("control_variate", {}) if method == "sgld_cv" else ("svrg", {"snapshot_every": 2})
    chains, n_steps = 40_000, 5
    run = sgsim.sample(target, method, n_steps, n_chains=chains, step_size=alpha, seed=11, storage="final",
                       init=np.tile(x0, (chains, 1)), **options)  # fmt: skip
    theta = run.posterior["theta"].values[:, -1]
    kw = dict(step_size=alpha, n_steps=n_steps, init_mean=x0, control_point=cv.find_mode(target), snapshot_every=2)
    own = _z_scores(theta, _law(target, estimator, **kw))
    assert np.abs(own).max() <= Z, own
    # negative controls: the plain minibatch gradient's law, N / n halved, the other sampling mode
    for wrong in (
        _law(target, "plain", **kw),
        _law(target, estimator, batch_size=8, **kw),
        _law(target, estimator, replace=not replace, **kw),
    ):
        assert np.abs(_z_scores(theta, wrong)).max() > Z


# ----------------------------------------------------------------------------- variance on German credit


def test_the_control_variate_reduces_the_gradient_variance_on_german_credit_by_the_predicted_factor():
    # at a typical point of the posterior's Laplace approximation, the exact covariances of both
    # estimators, N^2 f / n times the per-example covariance of the gradients (plain) or of their
    # differences from the mode's (control variate), against Monte Carlo traces of 4000 draws each
    target = sgsim.targets.logistic_regression(dataset="german", batch_size=10, replace=True)
    est = cv.control_variate(target)
    hat = est.extras["control_point"]
    laplace = np.linalg.inv(cv.hessian(target, hat))
    theta = hat + np.linalg.cholesky(laplace) @ np.random.default_rng(3).standard_normal(target.dim)
    plain_cov = minibatch_gradient_covariance(target, theta)
    cv_cov = cv.control_variate_covariance(target, theta, hat)
    draws = 4000

    def z_trace(samples, predicted):
        sq = ((samples - samples.mean(0)) ** 2).sum(1)  # the trace of the sample covariance is their mean
        return (sq.sum() / (len(sq) - 1) - np.trace(predicted)) / (sq.std() / np.sqrt(len(sq)))

    g_plain = target.stochastic_gradient(theta, np.random.default_rng(4), draws)
    g_cv = est.stochastic_gradient(theta, np.random.default_rng(5), draws)
    factor = np.trace(plain_cov) / np.trace(cv_cov)
    assert factor > 5  # the reduction the theory predicts at this point (11)
    assert abs(z_trace(g_plain, plain_cov)) <= Z
    assert abs(z_trace(g_cv, cv_cov)) <= Z
    # negative controls: the plain prediction for the CV draws, and N / n off by a factor 2
    assert abs(z_trace(g_cv, plain_cov)) > Z
    assert abs(z_trace(g_cv, cv.control_variate_covariance(target, theta, hat, batch_size=20))) > Z
    assert abs(z_trace(g_plain, minibatch_gradient_covariance(target, theta, batch_size=20))) > Z


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_refused_before_any_work_naming_the_parameter():
    target = _linear(4, True)
    X, y = _data()
    cases = [
        ((target, "sgld_cv"), {"control_point": np.zeros(2)}, "control_point", "not a stationary point"),
        ((target, "sgld_cv"), {"control_point": np.zeros(3)}, "control_point", "shape"),
        ((target, "svrg_ld"), {"snapshot_every": 0}, "snapshot_every", ">= 1"),
        (("standard_gaussian", "sgld_cv"), {}, "target", "has no data"),
        (("standard_gaussian", "svrg_ld"), {}, "target", "has no data"),
        ((sgsim.targets.linear_regression(X, y), "sgld_cv"), {}, "target", "needs minibatches"),
    ]
    for args, options, parameter, words in cases:
        with pytest.raises(ParameterError, match=words) as err:
            sgsim.sample(*args, 10, step_size=0.01, **options)
        assert err.value.parameter == parameter
    # the mode itself is accepted, and gives the default's bits
    given = sgsim.sample(target, "sgld_cv", 20, n_chains=2, step_size=0.01, seed=1, control_point=cv.find_mode(target))
    found = sgsim.sample(target, "sgld_cv", 20, n_chains=2, step_size=0.01, seed=1)
    assert np.array_equal(given.posterior["theta"].values, found.posterior["theta"].values)
