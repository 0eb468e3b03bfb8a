"""Data-backed targets (sgsim.targets.regression): exact gradient against finite differences
and the NumPy oracle, the minibatch gradient's law (docs: theory-conventions), the kernels driven
by it against the oracle given the same indices and normals, and reproducibility; the
linear family's exact posterior and the softmax family's stability and label checks."""

import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import numba
import numpy as np
import pytest
import reference as R
from scipy.special import logsumexp
from stats import assert_within_se, check_gaussian_law

import sgsim
from sgsim import datasets, targets
from sgsim.integrators import get_method
from sgsim.integrators._kernel_cache import cached_chain_loop
from sgsim.sampling import prepare, run_chain
from sgsim.targets import regression

X_HEART, Y_HEART = datasets.load_heart(standardise=False)
X_FAIR, Y_FAIR = datasets.load_fair(standardise=False)
X_FAIR, Y_FAIR = X_FAIR[:270], Y_FAIR[:270]
# digits 0-2 of optdigits, 270 of them (86, 95, 89 per class), four of the most variable pixels
_X_OPT, _Y_OPT = datasets.load_optdigits(standardise=False)
X_DIGITS, Y_DIGITS = _X_OPT[_Y_OPT < 3][:270][:, [26, 27, 35, 42]], _Y_OPT[_Y_OPT < 3][:270]


def heart(batch_size=None, replace=False, prior_scale=2.0):
    return regression.logistic_regression(
        X_HEART, Y_HEART, prior_scale=prior_scale, batch_size=batch_size, replace=replace
    )


def fair(batch_size=None, replace=False):
    # dim 9; tau = 0.2 is about 1 / Var(affairs) on these rows
    return regression.linear_regression(
        X_FAIR, Y_FAIR, noise_precision=0.2, prior_scale=2.0, batch_size=batch_size, replace=replace
    )


def digits(batch_size=None, replace=False):
    # dim (4 + 1) x 3 = 15
    return regression.softmax_regression(X_DIGITS, Y_DIGITS, prior_scale=2.0, batch_size=batch_size, replace=replace)


FAMILIES = {"logistic": heart, "linear": fair, "softmax": digits}


def small(batch_size=5, replace=False, n=40):
    # a subset keeps the reference loops short
    return regression.logistic_regression(
        X_HEART[:n, :4], Y_HEART[:n], prior_scale=1.5, batch_size=batch_size, replace=replace
    )


def theta_at(target, seed=0, scale=0.3):
    return scale * np.random.default_rng(seed).standard_normal(target.dim)


# ----------------------------------------------------------------------------- exact gradient


def test_standardised_design_has_an_intercept_and_unit_columns():
    t = heart()
    X = t.extras["X"]
    assert t.dim == 14 and X.shape == (270, 14)
    assert np.all(X[:, 0] == 1.0)
    np.testing.assert_allclose(X[:, 1:].mean(axis=0), 0.0, atol=1e-13)
    np.testing.assert_allclose(X[:, 1:].std(axis=0), 1.0, rtol=1e-13)
    np.testing.assert_allclose(t.extras["prior_precision"], 0.25)
    assert t.stochastic_grad_u is None and t.workspace.size == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_central_finite_differences_of_the_log_density(seed):
    t = heart()
    theta = theta_at(t, seed)
    h = 1e-5
    fd = np.array([(t.log_density(theta - h * e) - t.log_density(theta + h * e)) / (2 * h) for e in np.eye(t.dim)])
    g = t.gradient(theta)
    # central differences: O(h^2) truncation plus rounding |U| eps / h ~ 1e-9
    assert np.max(np.abs(fd - g)) < 1e-6 * max(1.0, np.max(np.abs(g)))


def test_gradient_and_log_density_match_the_numpy_oracle():
    t = heart()
    X, y, prec = t.extras["X"], t.extras["y"], t.extras["prior_precision"]
    for seed in range(3):
        theta = theta_at(t, seed, scale=2.0)
        g = R.logistic_grad_u(theta, X, y, prec)
        assert np.max(np.abs(t.gradient(theta) - g)) < 1e-12 * max(1.0, np.max(np.abs(g)))
        lp = R.logistic_log_density(theta, X, y, prec)
        assert abs(t.log_density(theta) - lp) < 1e-12 * abs(lp)
        np.testing.assert_allclose(
            regression.per_example_gradients(t, theta), R.example_gradients(theta, X, y), rtol=0, atol=1e-14
        )


def test_log_likelihood_is_stable_for_large_linear_predictors():
    t = regression.data_target(regression.LOGISTIC, [[1.0], [-1.0]], [1.0, 0.0], prior_precision=1e-6, name="separable")
    theta = np.array([800.0])  # e^800 overflows; log(1 + e^-800) does not
    assert np.isfinite(t.log_density(theta)) and abs(t.log_density(theta) + 0.5e-6 * 800**2) < 1e-9
    assert np.all(np.isfinite(t.gradient(theta)))


def test_full_batch_without_replacement_is_the_exact_gradient():
    t = small(batch_size=40)
    theta = theta_at(t)
    draws = t.stochastic_gradient(theta, np.random.default_rng(0), 5)
    # the same sum in another order: equal up to rounding
    np.testing.assert_allclose(draws, np.broadcast_to(t.gradient(theta), draws.shape), rtol=1e-12, atol=1e-12)
    assert t.extras["noise_factor"] == 0.0


def test_the_machinery_takes_another_likelihood():
    # linear regression with known noise precision tau: U is quadratic, so grad U must equal
    # that of the linear-Gaussian target with P = tau X^T X + Lambda, b = tau X^T y
    @numba.njit
    def log_lik(theta, X, i, y, lik):
        r = y[i] - X[i] @ theta
        return -0.5 * lik[0] * r * r

    @numba.njit
    def grad_log_lik(theta, X, i, y, lik, weight, out):
        r = lik[0] * (y[i] - X[i] @ theta) * weight
        for j in range(theta.shape[0]):
            out[j] += r * X[i, j]

    rng = np.random.default_rng(4)
    X = rng.standard_normal((30, 3))
    y = rng.standard_normal(30)
    tau, lam = 2.0, np.array([0.5, 1.0, 2.0])
    t = regression.data_target(
        regression.Likelihood("gaussian", log_lik, grad_log_lik), X, y, prior_precision=lam, lik_params=[tau],
        batch_size=7,
    )  # fmt: skip
    lg = targets.linear_gaussian(tau * X.T @ X + np.diag(lam), tau * X.T @ y)
    theta = rng.standard_normal(3)
    np.testing.assert_allclose(t.gradient(theta), lg.gradient(theta), rtol=1e-12, atol=1e-12)
    assert t.stochastic_gradient(theta, np.random.default_rng(0), 3).shape == (3, 3)


def test_shipped_families_are_cached_by_name_and_a_users_copy_gives_the_same_bits(tmp_path, monkeypatch):
    # the shipped families' gradients are module-level functions, so their loops can be cached on
    # disk; a user's family (here: the logistic per-example functions under another name) is
    # compiled in memory, from the same templates, and must give the same bits
    monkeypatch.setenv("SGSIM_CACHE_DIR", str(tmp_path))
    X, y = X_HEART[:60, :4], Y_HEART[:60]
    mine = regression.Likelihood("my_logistic", regression.LOGISTIC.log_lik, regression.LOGISTIC.grad_log_lik)
    move, update = get_method("sgld").algorithm.step
    draws = []
    for family in (regression.LOGISTIC, mine):
        t = regression.data_target(family, X, y, prior_precision=0.5, batch_size=7)
        cached = cached_chain_loop(move, update, t.grad_u, t.stochastic_grad_u)
        assert (cached is not None) == (family is regression.LOGISTIC)
        # a step within SGLD's limit on this unscaled design (2 / L = 6.5e-6)
        draws.append(theta(sgsim.sample(t, "sgld", 40, n_chains=2, step_size=5e-6, seed=5)))
    assert np.array_equal(draws[0], draws[1])


# ----------------------------------------------------------------------------- minibatch law (docs: theory-conventions)


def _moments(draws):
    """Sample mean and covariance of iid draws, with plug-in standard errors of each entry."""
    r = draws.shape[0]
    mean = draws.mean(axis=0)
    dev = draws - mean
    prods = dev[:, :, None] * dev[:, None, :]
    cov = prods.mean(axis=0)
    # SE of a mean of iid products: sd / sqrt(R) (CLT; no Gaussian assumption)
    return mean, draws.std(axis=0) / np.sqrt(r), cov, prods.std(axis=0) / np.sqrt(r)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("replace_", [False, True])
def test_minibatch_gradient_has_the_full_mean_and_the_theory_0_covariance(family, replace_):
    # N = 270, n = 90 for every family: the finite-population factor (N - n)/(N - 1) = 0.669
    # is far from 1
    t = FAMILIES[family](batch_size=90, replace=replace_)
    assert t.extras["n_data"] == 270
    theta = theta_at(t, 3)
    draws = t.stochastic_gradient(theta, np.random.default_rng(11), 40_000)
    mean, mean_se, cov, cov_se = _moments(draws)
    truth = regression.minibatch_gradient_covariance(t, theta)
    assert_within_se(mean, t.gradient(theta), mean_se, what="minibatch gradient mean")
    iu = np.triu_indices(t.dim)
    assert_within_se(cov[iu], truth[iu], cov_se[iu], what="minibatch gradient covariance")
    # negative controls: the other sampling mode's factor, and a missing N/n factor, are rejected
    wrong = regression.minibatch_gradient_covariance(t, theta, replace=not replace_)
    with pytest.raises(AssertionError):
        assert_within_se(cov[iu], wrong[iu], cov_se[iu])
    prior = t.extras["prior_precision"] * theta
    without_n_over_n = (90 / 270) * (t.gradient(theta) - prior) + prior
    with pytest.raises(AssertionError):
        assert_within_se(mean, without_n_over_n, mean_se)


def test_noise_factor():
    assert regression.noise_factor(100, 10, True) == 1.0
    assert regression.noise_factor(100, 10, False) == pytest.approx(90 / 99)
    assert regression.noise_factor(100, 100, False) == 0.0
    with pytest.raises(ValueError, match="exceeds"):
        regression.noise_factor(10, 11, False)


def test_minibatches_without_replacement_have_distinct_indices_and_match_the_oracle():
    t = small(batch_size=7, n=40)
    theta = theta_at(t)
    X, y, prec = t.extras["X"], t.extras["y"], t.extras["prior_precision"]
    work = t.new_workspace()
    got = t.stochastic_gradient(theta, np.random.default_rng(5), 200, work=work)
    drawer = R.MinibatchDrawer(np.random.default_rng(5), 40, 7, False)
    batches = [drawer() for _ in range(200)]
    assert all(len(set(b)) == 7 for b in batches)
    want = np.array([R.minibatch_grad_u(theta, X, y, prec, b) for b in batches])
    assert np.max(np.abs(got - want)) < 1e-12 * np.max(np.abs(want))
    assert np.array_equal(np.sort(work), np.arange(40)) and np.array_equal(work, drawer.perm)


def test_minibatches_with_replacement_match_the_oracle():
    t = small(batch_size=9, replace=True)
    theta = theta_at(t)
    got = t.stochastic_gradient(theta, np.random.default_rng(6), 100)
    drawer = R.MinibatchDrawer(np.random.default_rng(6), 40, 9, True)
    X, y, prec = t.extras["X"], t.extras["y"], t.extras["prior_precision"]
    want = np.array([R.minibatch_grad_u(theta, X, y, prec, drawer()) for _ in range(100)])
    assert np.max(np.abs(got - want)) < 1e-12 * np.max(np.abs(want))


# ----------------------------------------------------------------------------- kernels against the oracle

METHODS = {
    "sgld": dict(step_size=2e-3),
    "csgld": dict(step_size=4e-3, n_cycles=3, explore_fraction=0.25),
    "sghmc": dict(step_size=5e-4, friction=0.2),
    "csghmc": dict(step_size=1e-3, n_cycles=3, explore_fraction=0.25, friction=0.2),
}


def run_both(target, method, n_steps=300, seed=3, v=None):
    """Kernel and oracle on the same minibatch stream (generator seed) and the same normals."""
    if v is not None:
        target = target.with_gradient_noise(v)
    run, steps = prepare(target, method, n_steps, **METHODS[method])
    d = target.dim
    xi = np.random.default_rng(100 + seed).standard_normal((n_steps, d))
    theta0 = np.linspace(-0.5, 0.5, d)
    hmc = method.endswith("hmc")
    state = (theta0.copy(), np.zeros(d)) if hmc else (theta0.copy(),)
    out = np.full((run.n_draws, d), np.nan)
    assert run_chain(run, state, np.random.default_rng(seed), out, injected=xi) == -1
    ex = target.extras
    drawer = R.MinibatchDrawer(np.random.default_rng(seed), ex["n_data"], ex["batch_size"], ex["replace"])

    def grad(theta):
        return R.minibatch_grad_u(theta, ex["X"], ex["y"], ex["prior_precision"], drawer())

    def chains_grad(theta):  # the oracle integrators take (chains, d) states
        return grad(theta[0])[None]

    s = run.schedule
    noise = np.zeros((d, d)) if v is None else v
    if hmc:
        path, _ = R.sghmc(
            chains_grad, theta0[None], np.zeros((1, d)), s.step_size, s.temperature, noise, xi[:, None],
            run.options["friction"],
        )  # fmt: skip
    else:
        path = R.sgld(chains_grad, theta0[None], s.step_size, s.temperature, noise, xi[:, None])
    return out, state[0], path[steps, 0], path[-1, 0]


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("replace_", [False, True])
def test_kernel_matches_the_oracle_given_the_same_minibatches_and_noise(method, replace_):
    out, final, ref, ref_final = run_both(small(replace=replace_), method)
    scale = max(1.0, np.max(np.abs(ref)))
    assert np.max(np.abs(out - ref)) < 1e-12 * scale
    assert np.max(np.abs(final - ref_final)) < 1e-12 * scale


@pytest.mark.parametrize("method", ["sgld", "csghmc"])
def test_kernel_adds_emulated_gradient_noise_on_top_of_the_minibatch_noise(method):
    a = np.random.default_rng(9).standard_normal((5, 5))
    v = 0.1 * a @ a.T  # non-diagonal: the kernel rotates into its eigenbasis
    out, _, ref, _ = run_both(small(), method, v=v)
    assert np.max(np.abs(out - ref)) < 1e-12 * max(1.0, np.max(np.abs(ref)))


def test_oracle_comparison_detects_a_wrong_minibatch_rule():
    # negative control: the oracle drawing with replacement differs from the kernel without
    t = small(replace=False)
    out, _, _, _ = run_both(t, "sgld")
    _, _, ref, _ = run_both(replace(t, extras={**t.extras, "replace": True}), "sgld")
    assert np.max(np.abs(out - ref)) > 1e-6


def test_blocks_of_steps_with_the_chain_workspace_give_the_same_bits():
    t = small()
    run, _ = prepare(t, "csghmc", 300, **METHODS["csghmc"])
    outs = []
    for bounds in ([0, 300], [0, 7, 150, 151, 300]):
        state = (np.zeros(t.dim), np.zeros(t.dim))
        out = np.full((run.n_draws, t.dim), np.nan)
        gen, work = np.random.default_rng(5), t.new_workspace()
        for k0, k1 in zip(bounds[:-1], bounds[1:], strict=True):
            assert run_chain(run, state, gen, out, k0, k1, work=work) == -1
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])


def test_run_chain_checks_the_workspace_and_the_generator():
    t = small()
    run, _ = prepare(t, "sgld", 10, step_size=1e-3)
    state = (np.zeros(t.dim),)
    out = np.empty((run.n_draws, t.dim))
    with pytest.raises(ValueError, match="work must be"):
        run_chain(run, state, np.random.default_rng(0), out, work=np.arange(3))
    with pytest.raises(ValueError, match="work must be"):
        run_chain(run, state, np.random.default_rng(0), out, work=np.arange(40.0))
    with pytest.raises(ValueError, match="work must be"):
        run_chain(run, state, np.random.default_rng(0), out, work=t.workspace)  # the read-only template
    with pytest.raises(TypeError, match="gen must be given"):
        run_chain(run, state, None, out)


# ----------------------------------------------------------------------------- reproducibility


def draw(seed=7, n_chains=3, method="csghmc", **kwargs):
    return sgsim.sample(small(), method, 200, n_chains=n_chains, seed=seed, **{**METHODS[method], **kwargs})


def theta(result):
    return result.posterior["theta"].values


@pytest.mark.parametrize("method", ["sgld", "csghmc"])
def test_same_seed_same_bits_and_chain_c_independent_of_n_chains_and_threads(method):
    a, b = draw(method=method), draw(method=method)
    assert np.array_equal(theta(a), theta(b))
    eight = draw(n_chains=8, method=method)
    one = draw(n_chains=1, method=method)
    assert np.array_equal(theta(a), theta(eight)[:3]) and np.array_equal(theta(one)[0], theta(eight)[0])
    assert np.array_equal(theta(draw(n_chains=4, method=method, n_threads=1)), theta(eight)[:4])
    assert np.array_equal(theta(draw(n_chains=4, method=method, n_threads=2)), theta(eight)[:4])
    assert not np.any(theta(a)[0] == theta(a)[1])
    assert not np.any(theta(a) == theta(draw(seed=8, method=method)))


def test_blocking_inside_sample_does_not_change_the_bits(monkeypatch):
    reference = draw(n_chains=2)
    monkeypatch.setattr(sgsim.driver, "_BLOCK_STEPS", 7)
    assert np.array_equal(theta(reference), theta(draw(n_chains=2)))


def test_sample_records_the_minibatch_rule():
    import json

    config = json.loads(draw(n_chains=1).attrs["sgsim_config"])
    assert "minibatch of n = 5 of N = 40" in config["stochastic_gradient"]


def test_zero_temperature_with_full_batches_is_gradient_descent():
    # deterministic identity: T = 0 and n = N leave plain gradient descent on U (up to the
    # order of the sum, hence allclose rather than equal bits)
    t = small(batch_size=40)
    result = sgsim.sample(t, "sgld", 50, seed=1, init=np.zeros(t.dim), step_size=1e-2, temperature=0.0)
    x, expected = np.zeros(t.dim), []
    for _ in range(50):
        x = x - 1e-2 * t.gradient(x)
        expected.append(x)
    np.testing.assert_allclose(theta(result)[0], np.array(expected), rtol=1e-12, atol=1e-13)


# ----------------------------------------------------------------------------- linear and softmax families


def np_families(t, theta):
    """NumPy oracle: per-example log-likelihoods and their gradients, shapes (N,) and (N, dim)."""
    X, y, lik = t.extras["X"], t.extras["y"], t.extras["lik_params"]
    if t.extras["likelihood"] == "linear":
        tau, r = lik[0], y - X @ theta
        return 0.5 * np.log(tau / (2 * np.pi)) - 0.5 * tau * r**2, tau * r[:, None] * X
    k = int(lik[0])
    z = X @ theta.reshape(X.shape[1], k)
    lse = logsumexp(z, axis=1)
    onehot = np.eye(k)[y.astype(int)]
    grads = X[:, :, None] * (onehot - np.exp(z - lse[:, None]))[:, None, :]
    return (z * onehot).sum(axis=1) - lse, grads.reshape(len(y), -1)


@pytest.mark.parametrize("family", ["linear", "softmax"])
def test_new_families_match_the_numpy_oracle(family):
    t = FAMILIES[family]()
    prec = t.extras["prior_precision"]
    for seed in range(3):
        theta = theta_at(t, seed, scale=1.0)
        ll, g = np_families(t, theta)
        lp = ll.sum() - 0.5 * prec @ theta**2
        assert abs(t.log_density(theta) - lp) < 1e-12 * abs(lp)
        scale = max(1.0, np.max(np.abs(g)))
        assert np.max(np.abs(regression.per_example_gradients(t, theta) - g)) < 1e-13 * scale
        assert np.max(np.abs(t.gradient(theta) - (prec * theta - g.sum(axis=0)))) < 1e-12 * scale * len(g)


def central_differences(f, theta, h=1e-5):
    return np.array([(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(theta.size)])


@pytest.mark.parametrize("family", ["linear", "softmax"])
def test_new_families_gradients_match_finite_differences_of_the_log_density(family):
    t = FAMILIES[family]()
    ex = t.extras
    for seed in range(2):
        theta = theta_at(t, seed, scale=1.0)
        g = t.gradient(theta)
        fd = -central_differences(t.log_density, theta)
        # O(h^2) truncation plus rounding |U| eps / h ~ 1e-9 at h = 1e-5
        assert np.max(np.abs(fd - g)) < 1e-6 * max(1.0, np.max(np.abs(g)))
        # per-example gradients: the log density of a one-example target, less its prior term
        per_example = regression.per_example_gradients(t, theta)
        for i in (0, 101, 269):
            one = regression.data_target(
                ex["family"], ex["X"][[i]], ex["y"][[i]], prior_precision=ex["prior_precision"],
                lik_params=ex["lik_params"],
            )  # fmt: skip
            fd = central_differences(one.log_density, theta) + ex["prior_precision"] * theta
            assert np.max(np.abs(fd - per_example[i])) < 1e-7 * max(1.0, np.max(np.abs(per_example[i])))


def test_linear_regression_posterior_is_where_the_gradient_vanishes_with_the_hessian_its_inverse_covariance():
    t = fair()
    mean, cov, p = t.mean, t.extras["covariance"], t.extras["precision"]
    # grad U(mean) = P mean - b: zero up to the rounding of sums of terms as large as b's
    assert np.max(np.abs(t.gradient(mean))) < 1e-10 * np.max(np.abs(t.extras["shift"]))
    # U is quadratic, so central differences of grad U are exact at any step up to rounding: h = 1
    hessian = np.array([(t.gradient(mean + e) - t.gradient(mean - e)) / 2 for e in np.eye(t.dim)])
    tol = 1e-8 * np.max(np.abs(p))
    assert np.max(np.abs(hessian - np.linalg.inv(cov))) < tol
    assert np.max(np.abs(cov @ hessian - np.eye(t.dim))) < 1e-8
    np.testing.assert_allclose(t.second_moment, cov + np.outer(mean, mean), rtol=1e-14)
    # the same quadratic as the linear-Gaussian target of (P, b)
    lg = targets.linear_gaussian(p, t.extras["shift"])
    np.testing.assert_allclose(lg.mean, mean, rtol=1e-10)
    np.testing.assert_allclose(lg.gradient(mean + 0.1), t.gradient(mean + 0.1), rtol=1e-9, atol=1e-9 * np.max(p))
    # negative control: the posterior of the likelihood alone (the prior forgotten) is detected
    forgot_prior = np.linalg.inv(p - np.diag(t.extras["prior_precision"]))
    assert np.max(np.abs(hessian - np.linalg.inv(forgot_prior))) > 1e3 * tol


def test_linear_regression_exact_draws_follow_its_posterior():
    t = fair()
    x = t.exact_draws(np.random.default_rng(8), 20_000)
    # SEs of the replica mean, variances and covariances from the exact law (stats.check_gaussian_law)
    check_gaussian_law(x, t.mean, t.extras["covariance"], "exact posterior draws")
    # negative control: a covariance 10% too large (about 14 SEs on each variance) is rejected
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(x, t.mean, 1.1 * t.extras["covariance"], "inflated covariance")


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_softmax_log_sum_exp_does_not_overflow(sign):
    # logits 800, 0, -800 (sign 1: the largest comes first; -1: last, so the running maximum is
    # replaced twice); e^800 overflows a float64
    theta = sign * np.array([800.0, 0.0, -800.0])
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.log(np.sum(np.exp(theta))))  # the naive formula fails here
    y = np.array([0.0, 1.0, 2.0])
    t = regression.data_target(regression.SOFTMAX, np.ones((3, 1)), y, prior_precision=1e-6, lik_params=[3])
    prior = 0.5e-6 * theta @ theta
    # log p(y = k) = z_k - 800 in floats (the other terms of the sum are below e^-800)
    assert t.log_density(theta) == pytest.approx(np.sum(theta - 800.0) - prior, abs=1e-9)
    top = np.eye(3)[np.argmax(theta)]  # the softmax probabilities, exactly one-hot here
    expected = 1e-6 * theta - (np.eye(3)[y.astype(int)] - top).sum(axis=0)
    np.testing.assert_allclose(t.gradient(theta), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(t.gradient(10 * theta), 10 * 1e-6 * theta - (np.eye(3) - top).sum(axis=0), atol=1e-9)


def test_softmax_labels_are_checked_and_named():
    X = np.random.default_rng(0).standard_normal((6, 2))
    cases = [
        ([0, 1, 2, 1.5, 0, 1], {}, "class labels 0, 1, 2"),
        ([0, 1, 2, -1, 0, 1], {}, "class labels"),
        ([0, 1, 2, 3, 0, 1], {"n_classes": 3}, r"0, \.\.\., 2"),
        ([0, 0, 0, 0, 0, 0], {}, "only the label 0"),
        ([0, 1, 2, 1, 0], {}, r"shape \(6,\)"),
    ]
    for y, kwargs, match in cases:
        with pytest.raises(ValueError, match=match) as info:
            regression.softmax_regression(X, y, **kwargs)
        assert info.value.parameter == "y"
    for bad, error in ((1, ValueError), (2.0, TypeError)):
        with pytest.raises(error) as info:
            regression.softmax_regression(X, [0, 1, 1, 0, 1, 0], n_classes=bad)
        assert info.value.parameter == "n_classes"
    with pytest.raises(ValueError, match="integer K >= 2") as info:
        regression.data_target(regression.SOFTMAX, X, [0, 1, 1, 0, 1, 0], prior_precision=1.0, lik_params=[2.5])
    assert info.value.parameter == "lik_params"
    with pytest.raises(ValueError, match="class labels") as info:
        regression.data_target(regression.SOFTMAX, X, [0, 1, 3, 0, 1, 0], prior_precision=1.0, lik_params=[3])
    assert info.value.parameter == "y"
    # negative control: integer labels as floats with a class absent, or more classes than seen, build
    t = regression.softmax_regression(X, [0.0, 2.0, 2.0, 0.0, 0.0, 2.0])
    assert t.extras["n_classes"] == 3 and t.dim == 9
    assert regression.softmax_regression(X, [0, 1, 1, 0, 1, 0], n_classes=4, intercept=False).dim == 8


def test_linear_regression_names_bad_input_before_reading_data(monkeypatch):
    nan_x = X_FAIR.copy()
    nan_x[3, 2] = np.nan
    collinear = np.column_stack([X_FAIR[:, :2], X_FAIR[:, 1]])
    cases = [
        (dict(X=X_FAIR[:, 0], y=Y_FAIR), "X", r"shape \(N, p\)"),
        (dict(X=X_FAIR, y=Y_FAIR[:-1]), "y", r"shape \(270,\)"),
        (dict(X=X_FAIR, y=Y_FAIR[:, None]), "y", r"shape \(270,\)"),
        (dict(X=nan_x, y=Y_FAIR), "X", "finite"),
        (dict(X=X_FAIR, y=np.where(Y_FAIR > 1, np.inf, Y_FAIR)), "y", "finite"),
        (dict(X=X_FAIR, y=Y_FAIR, noise_precision=0.0), "noise_precision", "> 0"),
        (dict(X=X_FAIR, y=Y_FAIR, noise_precision=np.nan), "noise_precision", "finite"),
        (dict(X=X_FAIR, y=Y_FAIR, noise_precision=1e306), "noise_precision", "overflow"),
        (dict(X=collinear, y=Y_FAIR, prior_scale=1e150), "X", "positive definite"),
        (dict(X=X_FAIR, y=Y_FAIR, batch_size=271), "batch_size", "exceeds"),
        (dict(X=X_FAIR, y=Y_FAIR, standardise=1), "standardise", "bool"),
        (dict(dataset="heart"), "dataset", "binary data set; linear_regression takes fair, diamonds"),
        (dict(dataset="fair", X=X_FAIR), "dataset", "not both"),
        (dict(dataset="wine"), "dataset", "unknown"),
        (dict(dataset="diamonds", noise_precision=-1.0), "noise_precision", "> 0"),
        (dict(dataset="diamonds", prior_scale=0.0), "prior_scale", "> 0"),
        (dict(dataset="diamonds", batch_size=0), "batch_size", ">= 1"),
    ]
    monkeypatch.setattr(regression, "load", lambda *a, **k: pytest.fail("data were read before the checks"))
    for kwargs, parameter, match in cases:
        with pytest.raises((ValueError, TypeError), match=match) as info:
            regression.linear_regression(**kwargs)
        assert info.value.parameter == parameter, kwargs
    # negative control: the collinear design with a proper prior, and large finite tau, build
    assert regression.linear_regression(collinear, Y_FAIR, prior_scale=1.0).dim == 4
    assert np.all(np.isfinite(regression.linear_regression(X_FAIR, Y_FAIR, noise_precision=1e250).mean))


# ----------------------------------------------------------------------------- validation


def test_validation():
    with pytest.raises(ValueError, match="labels 0 and 1"):
        regression.logistic_regression(X_HEART, Y_HEART + 1)
    with pytest.raises(ValueError, match="constant"):
        regression.logistic_regression(np.ones((5, 2)), [0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="exceeds"):
        regression.logistic_regression(X_HEART[:10], Y_HEART[:10], batch_size=11)
    with pytest.raises(ValueError, match="prior_precision must be > 0"):
        regression.data_target(regression.LOGISTIC, [[1.0]], [1.0], prior_precision=0.0)
    with pytest.raises(TypeError, match="replace must be a bool"):
        regression.logistic_regression(X_HEART, Y_HEART, batch_size=3, replace="no")
    with pytest.raises(TypeError, match="not a data-backed target"):
        regression.per_example_gradients(targets.standard_gaussian(2), [0.0, 0.0])
    with pytest.raises(NotImplementedError, match="exact gradient only"):
        targets.standard_gaussian(2).stochastic_gradient([0.0, 0.0], np.random.default_rng(0), 1)
    t = small()
    with pytest.raises(TypeError, match="stochastic_grad_u must be a compiled function"):
        replace(t, stochastic_grad_u=lambda *a: None)
    with pytest.raises(TypeError, match="workspace must be"):
        replace(t, workspace=np.arange(40.0))


# ----------------------------------------------------------------------------- pure Python

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import sgsim
    from sgsim import datasets
    from sgsim._jit import JIT_DISABLED
    from sgsim.targets import logistic_regression

    assert JIT_DISABLED
    X, y = datasets.load_heart(standardise=False)
    out = {}
    for flag in (False, True):
        t = logistic_regression(X[:40, :4], y[:40], prior_scale=1.5, batch_size=5, replace=flag)
        r = sgsim.sample(t, "sghmc", 30, n_chains=2, seed=3, step_size=1e-3, friction=0.2)
        out[str(flag)] = r.posterior["theta"].values
    np.savez(sys.argv[1], **out)
    """
)


def test_pure_python_data_target_gives_the_compiled_bits(tmp_path):
    path = tmp_path / "nojit.npz"
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    nojit = np.load(path)
    for flag in (False, True):
        compiled = sgsim.sample(small(replace=flag), "sghmc", 30, n_chains=2, seed=3, step_size=1e-3, friction=0.2)
        assert np.array_equal(nojit[str(flag)], theta(compiled))
