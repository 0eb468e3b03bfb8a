"""Property-based tests of the OU stationary covariances and the KL-optimal rates of constant SGD.

Random symmetric positive definite A and C with controlled conditioning (eigenvalues
log-uniform in [1, kappa], kappa <= 100, random orthogonal bases), derandomized so that a run
is reproducible. Closed-form identities are checked to 1e-10 relative; the solvers are
backward stable, so that is rounding (D <= 6, condition <= 1e4).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import solve_continuous_lyapunov

from sgsim.theory import kl, ou, stationary_covariance

SETTINGS = settings(max_examples=40, derandomize=True, deadline=None)


def spd(seed: int, d: int, kappa: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.exp(rng.uniform(0.0, np.log(kappa), d))
    return q @ np.diag(lam) @ q.T


pairs = st.tuples(st.integers(0, 2**31), st.integers(2, 6), st.floats(1.0, 100.0), st.floats(1.0, 100.0)).map(
    lambda t: (spd(t[0], t[1], t[2]), spd(t[0] + 1, t[1], t[3]))
)


def rel(x, y) -> float:
    return float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300))


@SETTINGS
@given(pairs, st.floats(1e-4, 0.5), st.integers(1, 64))
def test_sgd_ou_solves_its_lyapunov_equation_and_matches_the_general_solver(ac, frac, s):
    a, c = ac
    eps = frac * 2 / np.linalg.eigvalsh(a)[-1]
    sig = ou.sgd_cov(a, c, eps, s)
    assert rel(a @ sig + sig @ a, eps / s * c) < 1e-10  # eq. 13
    assert rel(sig, solve_continuous_lyapunov(a, eps / s * c)) < 1e-10  # fast path = general solver
    exact = ou.sgd_cov(a, c, eps, s, exact=True)
    assert rel(a @ exact + exact @ a - eps * a @ exact @ a, eps / s * c) < 1e-10
    d = a.shape[0]
    assert rel(exact, stationary_covariance(np.eye(d) - eps * a, eps**2 / s * c)) < 1e-9


@SETTINGS
@given(pairs)
def test_discrete_approaches_ou_at_first_order(ac):
    # the gap between exact discrete and OU covariances is O(eps ||A||): halving eps halves it
    a, c = ac
    eps = 0.02 / np.linalg.eigvalsh(a)[-1]
    gaps = [rel(ou.sgd_cov(a, c, e, 1, exact=True), ou.sgd_cov(a, c, e, 1)) for e in (eps, eps / 2)]
    assert 1.8 < gaps[0] / gaps[1] < 2.2


@SETTINGS
@given(pairs, st.integers(1, 64), st.integers(100, 10_000))
def test_preconditioned_sgd_identities_and_the_optimal_preconditioner(ac, s, n):
    a, c = ac
    h = spd(int(np.abs(a).sum() * 1e6) % 2**31, a.shape[0], 10.0) / np.linalg.eigvalsh(a)[-1]
    sig = ou.preconditioned_sgd_cov(a, c, h, s)
    assert rel(h @ a @ sig + sig @ a @ h, h @ c @ h / s) < 1e-9  # eq. 18
    assert abs(np.trace(a @ sig) - np.trace(c @ h) / (2 * s)) < 1e-9 * np.trace(c @ h) / s  # eq. 19
    h_star = kl.optimal_preconditioner(c, n, s)
    post = np.linalg.inv(n * a)
    assert rel(ou.preconditioned_sgd_cov(a, c, h_star, s), post) < 1e-9  # Theorem 2 / Corollary 4
    assert kl.kl_to_posterior(ou.preconditioned_sgd_cov(a, c, h_star, s), a, n) < 1e-9


def _momentum_full_ou(a, c, eps, mu, s):
    # d theta = v dt, dv = -mu v dt - eps A theta dt + (eps / sqrt(S)) B dW, solved as one 2D system
    d = a.shape[0]
    m = np.block([[np.zeros((d, d)), -np.eye(d)], [eps * a, mu * np.eye(d)]])
    q = np.zeros((2 * d, 2 * d))
    q[d:, d:] = eps**2 / s * c
    return solve_continuous_lyapunov(m, q)[:d, :d]


@SETTINGS
@given(pairs, st.floats(0.05, 1.0), st.floats(0.01, 0.5))
def test_momentum_covariance_with_the_commutator_term_is_the_ou_law(ac, mu, frac):
    a, c = ac
    eps = frac * mu**2 / np.linalg.eigvalsh(a)[-1]
    assert rel(ou.momentum_cov(a, c, eps, mu, 4), _momentum_full_ou(a, c, eps, mu, 4)) < 1e-7
    # eq. 25 is exact when A and C commute
    commuting = a @ a + np.eye(a.shape[0])
    assert (
        rel(ou.momentum_cov(a, commuting, eps, mu, 4, exact_ou=False), _momentum_full_ou(a, commuting, eps, mu, 4))
        < 1e-7
    )


def test_eq25_is_off_when_a_and_c_do_not_commute():
    # negative control: at eps ||A|| / mu^2 ~ 5 the commutator term changes the covariance by percents
    a, c = spd(3, 4, 50.0), spd(4, 4, 50.0)
    eps = 5.0 * 0.5**2 / np.linalg.eigvalsh(a)[-1]
    full = _momentum_full_ou(a, c, eps, 0.5, 1)
    assert rel(ou.momentum_cov(a, c, eps, 0.5, 1, exact_ou=False), full) > 1e-2
    assert rel(ou.momentum_cov(a, c, eps, 0.5, 1), full) < 1e-7


@SETTINGS
@given(pairs, st.floats(0.01, 0.5), st.integers(100, 10_000), st.integers(1, 32))
def test_sgld_covariance_matches_its_recursion_and_tends_to_the_posterior(ac, frac, n, s):
    a, c = ac
    eps = frac * 4 / (n * np.linalg.eigvalsh(a)[-1])
    d = a.shape[0]
    # theta' = (I - (eps N / 2) A) theta + (eps N / 2) noise_S + sqrt(eps) xi
    recursion = stationary_covariance(np.eye(d) - eps * n / 2 * a, eps * np.eye(d) + (eps * n / 2) ** 2 * c / s)
    assert rel(ou.sgld_cov(a, c, eps, n, s, exact=True), recursion) < 1e-8
    tiny = 1e-9 / (n * np.linalg.eigvalsh(a)[-1] * (1 + np.linalg.eigvalsh(c)[-1] * n))
    assert rel(ou.sgld_cov(a, c, tiny, n, s), np.linalg.inv(n * a)) < 1e-6


@SETTINGS
@given(pairs, st.floats(1e-4, 1e-2), st.integers(100, 10_000))
def test_sgfs_with_its_optimal_preconditioner_is_the_posterior(ac, eps, n):
    a, c = ac
    e = np.linalg.cholesky(spd(7, a.shape[0], 5.0))
    for kind in ("full", "diagonal", "scalar"):
        h = kl.sgfs_optimal_preconditioner(c, e, eps, n, kind)
        sig = ou.sgfs_cov(a, c, h, e, eps)
        assert rel(h @ a @ sig + sig @ a @ h, eps * h @ (c + e @ e.T) @ h) < 1e-9
        if kind == "full":  # Theorem 5: exactly the posterior
            assert rel(sig, np.linalg.inv(n * a)) < 1e-9


@SETTINGS
@given(pairs, st.integers(1, 32), st.integers(100, 10_000))
def test_kl_optimal_rates_beat_nearby_rates(ac, s, n):
    a, c = ac
    eps = kl.optimal_lr(c, n, s)
    k0 = kl.kl_to_posterior(ou.sgd_cov(a, c, eps, s), a, n)
    for f in (0.9, 1.1):
        assert k0 < kl.kl_to_posterior(ou.sgd_cov(a, c, eps * f, s), a, n)
    # Theorem 7: the square-root preconditioner G^{-1} with its rate
    g_inv = np.diag(1 / np.sqrt(np.diag(c)))
    eps = kl.sqrt_preconditioner_lr(c, n, s)
    k0 = kl.kl_to_posterior(ou.preconditioned_sgd_cov(a, c, eps * g_inv, s), a, n)
    for f in (0.9, 1.1):
        assert k0 < kl.kl_to_posterior(ou.preconditioned_sgd_cov(a, c, f * eps * g_inv, s), a, n)


def test_reverse_kl_rate_is_optimal_when_a_and_c_commute():
    a = spd(11, 4, 20.0)
    c = a @ a + 0.5 * a
    n, s = 1000, 8
    eps = kl.reverse_kl_optimal_lr(c, n, s)
    k0 = kl.reverse_kl_to_posterior(ou.sgd_cov(a, c, eps, s), a, n)
    assert all(k0 < kl.reverse_kl_to_posterior(ou.sgd_cov(a, c, f * eps, s), a, n) for f in (0.95, 1.05))


def test_the_paper_diagonal_rule_is_a_surrogate_and_the_true_diagonal_optimum_beats_it():
    a, c, n, s = spd(5, 4, 30.0), spd(6, 4, 30.0), 1000, 5
    rule = kl.diagonal_preconditioner(c, n, s)
    best = kl.kl_optimal_diagonal_preconditioner(a, c, n, s)
    k_rule = kl.kl_to_posterior(ou.preconditioned_sgd_cov(a, c, rule, s), a, n)
    k_best = kl.kl_to_posterior(ou.preconditioned_sgd_cov(a, c, best, s), a, n)
    assert k_best < k_rule - 1e-3
    # with a diagonal C the rule is the optimum
    c_diag = np.diag(np.diag(c))
    best = kl.kl_optimal_diagonal_preconditioner(a, c_diag, n, s)
    assert rel(best, kl.diagonal_preconditioner(c_diag, n, s)) < 1e-4


def test_window_mean_covariance_reaches_the_long_window_limit():
    a, c, s = spd(8, 3, 10.0), spd(9, 3, 10.0), 4
    eps = 0.01
    sig = ou.sgd_cov(a, c, eps, s)
    errors = []
    for t in (10_000, 100_000):
        d = ou.window_mean_cov(a, sig, eps * t)
        errors.append(rel(d, ou.long_window_mean_cov(a, c, t, s)))
    assert errors[1] < errors[0] / 5  # the correction is O(1 / tau)
    # the autocovariance decays as exp(-A t)
    assert rel(ou.autocovariance(a, sig, 0.0), sig) < 1e-15


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ou.sgd_cov(-np.eye(2), np.eye(2), 0.1, 1), "A must be positive definite"),
        (lambda: ou.sgd_cov(np.eye(2), [[1.0, 2.0], [0.0, 1.0]], 0.1, 1), "C must be symmetric"),
        (lambda: ou.sgd_cov(np.eye(2), np.eye(2), 2.5, 1, exact=True), "lr"),
        (lambda: ou.sgd_cov(np.eye(2), np.eye(2), 0.1, 0), "batch_size"),
        (lambda: ou.momentum_cov(np.eye(2), np.eye(2), 0.1, 1.5, 1), "momentum"),
        (lambda: ou.preconditioned_sgd_cov(np.eye(2), np.eye(2), -np.eye(2), 1), "H must"),
        (lambda: ou.sgd_cov(np.eye(2), np.eye(3), 0.1, 1), "C must have shape"),
        (lambda: kl.sgfs_stability_noise(np.eye(2) * 10, 0.1, 10, 1.0), "h_max"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
