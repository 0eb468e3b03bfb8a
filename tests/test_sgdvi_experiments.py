"""The constant-SGD stationary-law experiment of "Stochastic Gradient Descent as Approximate
Bayesian Inference" (§7.1): its predictions are the theory module's, its exact minibatch
covariance is a brute-force fixed point, the sampler reaches it, and the scripts run."""

import dataclasses
import importlib
import itertools

import numpy as np
import pytest
from scipy.linalg import solve_continuous_lyapunov, solve_discrete_lyapunov
from stats import assert_within_se

from sgsim import sample, targets
from sgsim.experiments import constant_sgd_stationary as cs
from sgsim.targets.regression import per_example_gradients
from sgsim.theory import ou


def _close(got, want, rtol=1e-8, what=""):
    # entries that vanish by symmetry come out at rounding level: tolerance relative to the matrix
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max(), err_msg=what)


def _synthetic(n, batch_size, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
    y = 1.0 + X @ np.array([0.5, -1.0]) + rng.standard_normal(n)
    return cs.problem_from_target(targets.linear_regression(X, y, batch_size=batch_size), "synthetic")


@pytest.fixture(scope="module")
def problem():
    return _synthetic(400, 10)


def test_ou_predictions_are_the_theory_modules(problem):
    p, tuned = problem, cs.tunings(problem)
    a, c, s, n = p.A, p.C_noise, p.batch_size, p.n_data
    assert np.allclose(c, p.C * (n - s) / (n - 1))  # without replacement
    expected = {
        "sgd": ou.sgd_cov(a, c, tuned["sgd"].lr, s),
        "sgd_d": ou.preconditioned_sgd_cov(a, c, tuned["sgd_d"].H, s),
        "sgd_f": ou.preconditioned_sgd_cov(a, c, tuned["sgd_f"].H, s),
        "sgld": ou.sgld_cov(a, c, tuned["sgld"].lr, n, s),
        "sgfs_d": ou.sgfs_cov(a, c / s, tuned["sgfs_d"].H, np.sqrt(tuned["sgfs_d"].injected), tuned["sgfs_d"].lr),
        "sgfs_f": ou.sgfs_cov(a, c / s, tuned["sgfs_f"].H, np.sqrt(tuned["sgfs_f"].injected), tuned["sgfs_f"].lr),
    }
    for label, tuning in tuned.items():
        got = cs.predicted_cov(p, tuning, "ou")
        _close(got, expected[label], 1e-10, label)
        # and independently: the OU limit of the linearised step, M Sigma + Sigma M^T = Q
        m, q = cs.linearisation(p, tuning)
        _close(got, solve_continuous_lyapunov(m, q), 1e-8, label)
        disc = cs.predicted_cov(p, tuning, "discrete")
        _close(disc, solve_discrete_lyapunov(np.eye(p.dim) - m, q), 1e-8, label)
    np.testing.assert_allclose(
        cs.predicted_cov(p, tuned["sgd"], "discrete"), ou.sgd_cov(a, c, tuned["sgd"].lr, s, exact=True), rtol=1e-10
    )


def test_tuning_rules():
    p = _synthetic(400, 10)
    tuned = cs.tunings(p)
    n, s, d = p.n_data, p.batch_size, p.dim
    assert tuned["sgd"].lr == pytest.approx(2 * s * d / (n * np.trace(p.C)))  # Theorem 1
    np.testing.assert_allclose(tuned["sgd_f"].H, 2 * s / n * np.linalg.inv(p.C))  # Theorem 2
    # SGFS: the injected noise makes Corollary 6's diagonal constant (h_max), non-negative, zero once
    sgfs = tuned["sgfs_d"]
    h = np.diag(sgfs.H)
    assert np.allclose(h, h[0]) and np.all(np.diag(sgfs.injected) >= 0) and np.min(np.diag(sgfs.injected)) == 0
    # Theorems 2 and 5 make the OU law the posterior (whatever E is) for the noise the rules assume, C / S;
    # the sampler's noise without replacement is f C / S, so the prediction is f times the posterior there
    with_replacement = dataclasses.replace(p, noise_factor=1.0)
    for label in ("sgd_f", "sgfs_f"):
        _close(cs.predicted_cov(with_replacement, tuned[label], "ou"), p.posterior_cov, 1e-8, label)
    _close(cs.predicted_cov(p, tuned["sgd_f"], "ou"), p.noise_factor * p.posterior_cov, 1e-8)
    # SGLD: a power of ten below 4 / lambda_max(N A), mean-square stable, and the next decade up is not both
    lr = tuned["sgld"].lr
    assert np.log10(lr) == pytest.approx(round(np.log10(lr)))
    assert lr < 4 / np.linalg.eigvalsh(p.hessian)[-1] and cs.mean_square_radius(p, tuned["sgld"]) < 1
    up = dataclasses.replace(tuned["sgld"], lr=10 * lr)
    assert 10 * lr >= 4 / np.linalg.eigvalsh(p.hessian)[-1] or cs.mean_square_radius(p, up) >= 1


@pytest.mark.parametrize("label", cs.METHODS)
def test_exact_covariance_is_the_fixed_point_over_every_minibatch(label):
    # N = 7, S = 3 without replacement: average the step's second moments over all 35 minibatches
    p = _synthetic(7, 3, seed=1)
    tuning = cs.tunings(p)[label]
    while cs.mean_square_radius(p, tuning) >= 0.9:  # seven examples make the paper's rates unstable: scale down
        tuning = dataclasses.replace(tuning, lr=tuning.lr / 2)
    sigma = cs.predicted_cov(p, tuning, "exact")
    X, tau = p.target.extras["X"], p.target.extras["noise_precision"]
    prior = np.diag(p.target.extras["prior_precision"]) / p.n_data
    grads = -per_example_gradients(p.target, p.theta_star) + prior @ p.theta_star  # grad of l_n, the averaged loss
    gain = 0.5 * tuning.lr * p.n_data * np.eye(p.dim) if tuning.method == "sgld_wt" else tuning.lr * tuning.H
    injected = tuning.lr * np.eye(p.dim) if tuning.method == "sgld_wt" else gain @ tuning.injected @ gain.T
    batches = list(itertools.combinations(range(p.n_data), p.batch_size))
    total = np.zeros_like(sigma)
    for b in batches:
        idx = list(b)
        k_b = tau * X[idx].T @ X[idx] / p.batch_size + prior
        g_b = grads[idx].mean(axis=0)
        f = np.eye(p.dim) - gain @ k_b
        total += f @ sigma @ f.T + np.outer(gain @ g_b, gain @ g_b)
    np.testing.assert_allclose(total / len(batches) + injected, sigma, rtol=1e-9, atol=1e-14 * np.abs(sigma).max())


def test_constant_sgd_reaches_the_exact_covariance_and_not_the_approximations(problem):
    # a rate at which the approximations differ: eps lambda_max(A) = 0.8, mean-square radius 0.65, so
    # the covariance after 100 steps from theta* is the stationary one to 0.65^100 ~ 1e-19
    p = problem
    eps = 0.5
    tuning = dataclasses.replace(cs.tunings(p)["sgd"], options={"step_size": eps}, lr=eps)
    r = 10_000
    run = sample(
        p.target, "sgd", 100, n_chains=r, init=np.tile(p.theta_star, (r, 1)), step_size=eps, storage="final", seed=3
    )
    x = run.posterior["theta"].values[:, -1]
    dev = x - x.mean(axis=0)
    i, j = np.triu_indices(p.dim)
    prod = dev[:, i] * dev[:, j]
    est = prod.mean(axis=0)
    # the final states of independent chains are iid, so each sample covariance is a mean of R iid
    # products: SE = sd(products) / sqrt(R) (delta method; the law is not Gaussian, so no 2 sigma^4 rule)
    se = prod.std(axis=0, ddof=1) / np.sqrt(r)
    exact = cs.predicted_cov(p, tuning, "exact")
    assert_within_se(est, exact[i, j], se, what="SGD vs exact minibatch covariance")
    # the mean is theta* exactly (SE sqrt(Sigma_ii / R))
    assert_within_se(x.mean(axis=0), p.theta_star, np.sqrt(np.diag(exact) / r), what="SGD mean")
    # negative controls: the OU law (40 % low), the recursion without minibatch Hessians (16 % low), the posterior
    for wrong, what in (
        (cs.predicted_cov(p, tuning, "ou"), "OU"),
        (cs.predicted_cov(p, tuning, "discrete"), "additive noise"),
        (p.posterior_cov, "posterior"),
    ):
        with pytest.raises(AssertionError):
            assert_within_se(est, wrong[i, j], se, what=what)


def test_pooled_moments_equal_the_moments_of_the_pooled_draws():
    rng = np.random.default_rng(5)
    chains = [rng.standard_normal((n, 3)) + k for k, n in enumerate((40, 55, 70))]
    mean, cov = cs.pooled_moments([c.mean(0) for c in chains], [np.cov(c.T) for c in chains], [len(c) for c in chains])
    allx = np.concatenate(chains)
    np.testing.assert_allclose(mean, allx.mean(0))
    np.testing.assert_allclose(cov, np.cov(allx.T))


@pytest.fixture
def small_budgets(monkeypatch):
    tiny = cs.Budget(n_relax=8, n_chains=2, min_steps=500)
    mods = {}
    for name in ("sgdvi_figs12_covariances", "sgdvi_table1_kl"):
        mod = importlib.import_module(f"sgsim._paper_figures.{name}")
        monkeypatch.setattr(mod, "QUICK", tiny)
        mods[name] = mod
    return mods


def test_scripts_write_their_figures_and_sections(tmp_path, small_budgets):
    for name, mod in small_budgets.items():
        section = mod.run(tmp_path, full=False, progress=False, seed=1)
        assert section.name == name and section.title.startswith("[SGDVI]")
        assert "| quantity | paper value | ours | note |" in section.markdown
        assert "*What to look at*" in section.markdown
        for fig in section.figures:
            assert (tmp_path / fig).read_bytes()[:4] == b"\x89PNG"
        if name == "sgdvi_table1_kl":
            assert "| method | Wine (paper) | fair (ours) | fair (OU-predicted) |" in section.markdown
