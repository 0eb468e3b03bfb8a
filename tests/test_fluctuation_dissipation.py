"""The fluctuation-dissipation ratio of constant SGD (sgsim.diagnostics.fluctuation_dissipation).

Exact first: on the quadratic loss of the constant-SGD paper the ratio computed from the exact
discrete stationary moments (sgsim.theory) is 1 to 1e-10, for SGD and for its momentum form,
while the continuous OU law's moments give 1 / (1 + (epsilon / 2) tr(A Sigma A) / tr(A Sigma)),
off by O(epsilon). Then sampled runs: within 4 standard errors of 1 at stationarity, and a run
started far away is rejected by the same check (negative control). Units and bad input last.
"""

import numpy as np
import pytest
from stats import assert_within_se

import sgsim
from sgsim import diagnostics
from sgsim._validate import ParameterError
from sgsim.theory import ou, stationary_covariance

A = np.array([[1.0, 0.3, 0.1], [0.3, 2.0, -0.2], [0.1, -0.2, 0.7]])
C = np.array([[1.5, -0.4, 0.2], [-0.4, 0.8, 0.1], [0.2, 0.1, 1.1]])
S, N = 4, 100
TARGET = sgsim.targets.ou_quadratic(A, C, S, N)


def sgd_ratio(sigma, eps):
    """E[theta . g] / ((eps / 2) E|g|^2) for theta ~ N(0, Sigma), g = A theta + N(0, C / S)."""
    return np.trace(A @ sigma) / (eps / 2 * (np.trace(A @ sigma @ A) + np.trace(C) / S))


@pytest.mark.parametrize("eps", [0.05, 0.3, 0.9])
def test_exact_discrete_moments_give_one_and_the_ou_law_does_not(eps):
    exact = ou.sgd_cov(A, C, eps, S, exact=True)
    assert abs(sgd_ratio(exact, eps) - 1.0) < 1e-10
    # the OU law solves A Sigma + Sigma A = (eps / S) C, so 2 tr(A Sigma) = eps tr(C) / S and the
    # ratio is 1 / (1 + (eps / 2) tr(A Sigma A) / tr(A Sigma)) = 1 - O(eps): the negative control
    limit = ou.sgd_cov(A, C, eps, S)
    want = 1.0 / (1.0 + eps / 2 * np.trace(A @ limit @ A) / np.trace(A @ limit))
    np.testing.assert_allclose(sgd_ratio(limit, eps), want, rtol=1e-12)
    assert 1.0 - sgd_ratio(limit, eps) > 0.2 * eps
    # in one dimension: exactly 1 / (1 + eps a / 2)
    a, c = 1.7, 0.6
    sig = ou.sgd_cov([[a]], [[c]], eps, S)[0, 0]
    np.testing.assert_allclose(a * sig / (eps / 2 * (a * a * sig + c / S)), 1 / (1 + eps * a / 2), rtol=1e-12)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0])
def test_momentum_form_from_the_exact_stationary_law(mu):
    # v' = (1 - mu) v - eps (A theta + zeta), theta' = theta + v' (the momentum_sgd_law recursion):
    # E[theta . g] = ((2 - mu) / (2 eps)) E|v|^2 at stationarity (docs: theory-fdr)
    eps, d, eye = 0.2, 3, np.eye(3)
    f = np.block([[eye - eps * A, (1 - mu) * eye], [-eps * A, (1 - mu) * eye]])
    q = eps**2 / S * np.block([[C, C], [C, C]])
    sigma = stationary_covariance(f, q)
    s_tt, s_vv = sigma[:d, :d], sigma[d:, d:]
    lhs = np.trace(A @ s_tt)
    assert abs(lhs / ((2 - mu) / (2 * eps) * np.trace(s_vv)) - 1.0) < 1e-10
    if mu < 1:  # negative control: the plain-SGD form does not hold with momentum
        assert abs(sgd_ratio(s_tt, eps) - 1.0) > 0.05


START = np.array([3.0, -3.0, 3.0])  # far outside the stationary spread (sd about 0.25)


@pytest.fixture(scope="module")
def runs():
    """Stationary runs (500 steps of burn-in) and the first 60 steps from START, per method."""
    out = {}
    for method, options in [("sgd", {}), ("momentum_sgd", {"damping": 0.3})]:
        out[method] = (
            sgsim.sample(TARGET, method, 2000, n_chains=32, step_size=0.2, burn_in=500, seed=1, **options),
            sgsim.sample(TARGET, method, 60, n_chains=32, step_size=0.2, init=START, seed=2, **options),
        )
    return out


@pytest.mark.parametrize("method", ["sgd", "momentum_sgd"])
def test_sampled_runs_stationary_and_not(runs, method):
    # SE: a ratio estimator over 32 independent chains (the docstring's formula); z = 4.
    stationary, far = runs[method]
    fdr = diagnostics.fluctuation_dissipation(stationary)
    assert (fdr.n_chains, fdr.n_steps) == (32, 1499 if method == "sgd" else 1498)
    assert_within_se(fdr.ratio, 1.0, fdr.se, z=4.0, what=f"{method} ratio")  # measured z: -0.46, -0.78
    # negative control: the first 60 steps from START (measured z: 50, -21)
    early = diagnostics.fluctuation_dissipation(far)
    with pytest.raises(AssertionError, match="ratio"):
        assert_within_se(early.ratio, 1.0, early.se, z=4.0, what=f"{method} ratio")


def test_units_gradients_and_centre(runs):
    run = runs["sgd"][0]
    theta = run.posterior["theta"].values
    from_iterates = diagnostics.fluctuation_dissipation(run)
    # the minibatch gradient of L = U / N at theta_k, read back from the step, with the
    # paper's rate epsilon; and the gradient of U with sgsim's alpha = epsilon / N: the same ratio
    g = (theta[:, :-1] - theta[:, 1:]) / 0.2
    on_l = diagnostics.fluctuation_dissipation(theta[:, :-1], g, step_size=0.2)
    on_u = diagnostics.fluctuation_dissipation(theta[:, :-1], N * g, step_size=0.2 / N)
    np.testing.assert_allclose([on_l.ratio, on_l.se], [from_iterates.ratio, from_iterates.se], rtol=1e-10)
    np.testing.assert_allclose([on_u.ratio, on_u.se], [on_l.ratio, on_l.se], rtol=1e-12)
    # a wrong unit (gradients of U with the rate on L) is off by N
    wrong = diagnostics.fluctuation_dissipation(theta[:, :-1], N * g, step_size=0.2)
    np.testing.assert_allclose(wrong.ratio, on_l.ratio / N, rtol=1e-12)
    # any fixed centre: still within its SE of 1
    centred = diagnostics.fluctuation_dissipation(run, center=np.array([0.5, -0.5, 0.2]))
    assert abs(centred.z) < 4 and centred.ratio != from_iterates.ratio


def test_bad_input_names_its_parameter():
    x = np.random.default_rng(0).standard_normal((4, 20, 2))
    cases = [
        (lambda: diagnostics.fluctuation_dissipation(x[:1]), "draws", "at least 2 independent chains"),
        (lambda: diagnostics.fluctuation_dissipation(x[0]), "draws", r"\(chain, draw, d\)"),
        (lambda: diagnostics.fluctuation_dissipation(x, step_size=0.1), "step_size", "goes with gradients"),
        (lambda: diagnostics.fluctuation_dissipation(x, x), "step_size", "goes with gradients"),
        (lambda: diagnostics.fluctuation_dissipation(x, x[:, :3], step_size=0.1), "gradients", "shape"),
        (lambda: diagnostics.fluctuation_dissipation(x, x, step_size=0.1, damping=0.5), "damping", "plain SGD"),
        (lambda: diagnostics.fluctuation_dissipation(x, damping=1.5), "damping", r"\(0.0, 1.0\]"),
        (lambda: diagnostics.fluctuation_dissipation(x, center=[0.0]), "center", "shape"),
        (lambda: diagnostics.fluctuation_dissipation(np.zeros((4, 20, 2))), "draws", "never move"),
    ]
    for call, parameter, match in cases:
        with pytest.raises(ParameterError, match=match) as info:
            call()
        assert info.value.parameter == parameter


def test_runs_it_cannot_read(runs):
    run = runs["sgd"][0]
    with pytest.raises(ParameterError, match="thin=1") as info:
        diagnostics.fluctuation_dissipation(run.isel(draw=slice(None, None, 2)))
    assert info.value.parameter == "draws"
    other = run.copy()
    other.attrs["method"] = "sgld"
    with pytest.raises(ParameterError, match="'sgd' or 'momentum_sgd'"):
        diagnostics.fluctuation_dissipation(other)
