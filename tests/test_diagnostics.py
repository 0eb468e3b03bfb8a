"""Diagnostics on draws with known laws: mode coverage against the binomial oracle (docs: theory-mixture-25),
moment errors, ESS/R-hat through ArviZ, and the cycle weights of [cSG] eq. 4 (docs: theory-cycle-weights)."""

import math

import numpy as np
import pytest
from scipy import integrate, stats
from stats import assert_within_se

from sgsim import diagnostics as D
from sgsim import targets

MIX25 = targets.mixture_25()
P_BALL = D.ball_probability(0.25, math.sqrt(0.03))


def test_ball_probability():
    assert P_BALL == pytest.approx(0.64713, abs=5e-6)
    assert P_BALL == pytest.approx(1 - math.exp(-(0.25**2) / (2 * 0.03)), rel=1e-12)
    assert D.ball_probability(1.0, 1.0, dim=1) == pytest.approx(stats.norm.cdf(1) - stats.norm.cdf(-1), rel=1e-12)


def test_expected_mode_coverage_oracle():
    assert D.expected_mode_coverage(2500, 25, P_BALL)[0] < 0.005
    mean, sd = D.expected_mode_coverage(5000, 25, P_BALL)
    assert mean == pytest.approx(24.90, abs=0.005) and 0 < sd < 1
    assert D.expected_mode_coverage(50_000, 25, P_BALL) == pytest.approx((25.0, 0.0), abs=1e-9)
    # one mode: the binomial survival function itself
    assert D.expected_mode_coverage(5000, 1, 0.02)[0] == pytest.approx(stats.binom.sf(100, 5000, 0.02), rel=1e-12)


def coverage_of_sets(draw, n_sets=100, n=5000, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    return np.array([D.mode_coverage(draw(rng, n), MIX25.mode_centres, **kwargs) for _ in range(n_sets)])


def test_mode_coverage_of_exact_draws_matches_the_binomial_oracle():
    cov = coverage_of_sets(MIX25.exact_draws)
    mean, sd = D.expected_mode_coverage(5000, 25, P_BALL)
    se = sd / math.sqrt(cov.size)  # mean of independent replicate sets: oracle sd / sqrt(sets)
    assert_within_se(cov.mean(), mean, se, what="mean coverage at n = 5000")
    # negative controls, same check: a sampler stuck in 12 of the 25 modes; a radius set to 0.15
    stuck = targets.gaussian_mixture(MIX25.mode_centres[:12], 0.03)
    with pytest.raises(AssertionError):
        assert_within_se(coverage_of_sets(stuck.exact_draws, 20).mean(), mean, se)
    with pytest.raises(AssertionError):
        assert_within_se(coverage_of_sets(MIX25.exact_draws, 20, radius=0.15).mean(), mean, se)


def test_mode_coverage_at_the_extremes():
    rng = np.random.default_rng(1)
    assert D.mode_coverage(MIX25.exact_draws(rng, 2500), MIX25.mode_centres) == 0
    assert D.mode_coverage(MIX25.exact_draws(rng, 50_000), MIX25.mode_centres) == 25


def test_mode_counts_hit_the_ball_probability():
    x = MIX25.exact_draws(np.random.default_rng(2), 500_000)
    counts = D.mode_counts(x, MIX25.mode_centres)
    frac = counts.sum() / x.shape[0]
    se = math.sqrt(P_BALL * (1 - P_BALL) / x.shape[0])  # binomial proportion
    assert_within_se(frac, P_BALL, se, what="fraction within r of a centre")
    with pytest.raises(AssertionError):  # the 1-D probability P(|z| < r / sd) = 0.85 is wrong in 2-D
        assert_within_se(frac, D.ball_probability(0.25, math.sqrt(0.03), dim=1), se)


def test_mode_counts_pool_chains_and_drop_non_finite_draws():
    draws = np.array([[[0.0, 0.0], [2.1, 0.0], [np.nan, 0.0]], [[0.24, 0.0], [0.0, 0.25], [9.0, 9.0]]])
    counts = D.mode_counts(draws, [[0.0, 0.0], [2.0, 0.0]])
    np.testing.assert_array_equal(counts, [2, 1])  # strict inequality: (0, 0.25) is outside
    assert D.mode_coverage(draws, [[0.0, 0.0], [2.0, 0.0]], threshold=1) == 1
    with pytest.raises(ValueError, match="centres"):
        D.mode_counts(draws, [0.0, 0.0])


def test_moment_errors_by_hand():
    draws = np.array([[0.0, 0.0], [2.0, 2.0], [np.nan, 1.0]])
    err = D.moment_errors(draws, targets.standard_gaussian(2))
    np.testing.assert_array_equal(err["mean"], [1.0, 1.0])
    np.testing.assert_array_equal(err["second_moment"], [[2.0, 2.0], [2.0, 2.0]])
    assert err["mean_error"] == pytest.approx(math.sqrt(2), rel=1e-15)
    assert err["second_moment_error"] == 2.0  # max |[[2, 2], [2, 2]] - I|
    g = targets.standard_gaussian(1)  # its functions and params (a hand-built target's are checked)
    no_moments = targets.Target(
        "none", 1, g.grad_u, g.log_density_fn, g.params, np.zeros((1, 1)), np.zeros(1), np.ones(1)
    )
    with pytest.raises(ValueError, match="no exact moments"):
        D.moment_errors(draws[:, :1], no_moments)


def test_moment_errors_of_exact_draws():
    x = MIX25.exact_draws(np.random.default_rng(3), 100_000)
    err = D.moment_errors(x, MIX25)
    # each coordinate's mean error is N(0, 8.03 / n), so |error|^2 n / 8.03 ~ chi2_2 and
    # the bound (5 sqrt 2 SE, chi2_2 > 50) fails with probability e^-25
    bound = 5 * math.sqrt(2 * 8.03 / x.shape[0])
    se = (x**2).std(0) / math.sqrt(x.shape[0])
    assert err["mean_error"] < bound
    assert_within_se(np.diag(err["second_moment"]), 8.03, se)
    # negative controls, the same checks: draws of the inner 3x3 block of the grid only (the
    # same mean by symmetry, but E x^2 = 8/3 + 0.03 per coordinate), and draws shifted by 0.05
    inner = targets.gaussian_mixture(MIX25.mode_centres[np.abs(MIX25.mode_centres).max(1) < 4], 0.03)
    y = inner.exact_draws(np.random.default_rng(3), 100_000)
    wrong = D.moment_errors(y, MIX25)
    with pytest.raises(AssertionError, match="second"):
        assert_within_se(np.diag(wrong["second_moment"]), 8.03, se, what="second moment")
    shifted = D.moment_errors(x + 0.05, MIX25)
    assert shifted["mean_error"] > bound


def ar1_chains(rho, n_chains=4, n=1000, seed=4):
    rng = np.random.default_rng(seed)
    x = np.empty((n_chains, n, 2))
    x[:, 0] = rng.standard_normal((n_chains, 2))
    eps = rng.standard_normal((n_chains, n, 2)) * math.sqrt(1 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + eps[:, t]
    return x


def test_ess_of_iid_draws_is_near_n():
    x = ar1_chains(0.0)
    n = x.shape[0] * x.shape[1]
    # ESS = n / tau_hat, tau_hat = 1 + 2 (sum of a few lag autocorrelations, each with SE
    # 1/sqrt(n) for iid draws): sd(ESS)/n ~ 2 sqrt(2 / n) = 0.045 (measured over 100 sets:
    # 0.043, mean 0.98 n); bias allowance 0.02 n
    se, bias = 0.045 * n, 0.02 * n
    assert_within_se(D.ess(x), n, se, bias=bias, what="bulk ESS")
    assert_within_se(D.ess(x, method="tail"), n, se * 1.5, bias=bias, what="tail ESS")
    with pytest.raises(AssertionError):  # AR(1), rho = 0.5: ESS ~ n (1 - rho) / (1 + rho) = n / 3
        assert_within_se(D.ess(ar1_chains(0.5)), n, se, bias=bias)


def test_rhat_of_iid_draws_is_near_one():
    x = ar1_chains(0.0, seed=5)
    # 8 split chains of 500: R-hat - 1 ~ (chi2_7 / 7 - 1) / (2 * 500), sd = sqrt(2/7) / 1000;
    # ArviZ returns the max of bulk and folded R-hat: bias allowance of one sd
    se = math.sqrt(2 / 7) / 1000
    assert_within_se(D.rhat(x), 1.0, se, bias=se, what="R-hat")
    with pytest.raises(AssertionError):  # negative control: AR(1) chains with rho = 0.95 mix too slowly
        assert_within_se(D.rhat(ar1_chains(0.95, seed=5)), 1.0, se, bias=se)


def test_rhat_of_chains_stuck_in_different_modes_is_large():
    rng = np.random.default_rng(6)
    centres = MIX25.mode_centres[[0, 6, 18, 24]]  # (-4,-4), (-2,-2), (2,2), (4,4)
    x = centres[:, None, :] + math.sqrt(0.03) * rng.standard_normal((4, 1000, 2))
    assert np.all(D.rhat(x) > 2.0)
    with pytest.raises(AssertionError):
        assert_within_se(D.rhat(x), 1.0, math.sqrt(2 / 7) / 1000, bias=math.sqrt(2 / 7) / 1000)
    assert np.all(D.ess(x) < 100)


def test_ess_and_rhat_accept_inference_data():
    import xarray as xr

    from sgsim.results import make_result

    x = ar1_chains(0.0, seed=7)
    # an InferenceData under ArviZ 0.x, a DataTree under 1.x
    idata = make_result({"posterior": xr.Dataset({"theta": (("chain", "draw", "dim"), x)})})
    np.testing.assert_array_equal(D.ess(idata), D.ess(x))
    np.testing.assert_array_equal(D.rhat(idata), D.rhat(x))
    np.testing.assert_array_equal(D.draws_array(idata), x)


def test_equal_cycle_weights():
    np.testing.assert_array_equal(D.cycle_weights(np.zeros(7), [0, 0, 1, 1, 1, 4, 4], "equal"), np.full(3, 1 / 3))


def test_harmonic_weights_of_identical_cycles_are_equal():
    ll = np.random.default_rng(8).normal(-50.0, 3.0, 40)
    w = D.cycle_weights(np.tile(ll, 4), np.repeat(np.arange(4), 40))
    np.testing.assert_allclose(w, 0.25, rtol=1e-13)


def test_harmonic_weights_by_hand():
    # cycle 3: p = (1, 1), mean 1/p = 1 -> w ∝ 1; cycle 7: p = (2, 4), mean 1/p = 3/8 -> w ∝ 8/3
    w = D.cycle_weights(np.log([1.0, 2.0, 1.0, 4.0]), [3, 7, 3, 7])
    np.testing.assert_allclose(w, [3 / 11, 8 / 11], rtol=1e-14)


def test_harmonic_weights_do_not_overflow():
    # exp(1e4) overflows: the computation must stay in log space
    ll = np.array([-1e4, -1e4, -1e4 + math.log(2), -1e4 + math.log(2)])
    np.testing.assert_allclose(D.cycle_weights(ll, [0, 0, 1, 1]), [1 / 3, 2 / 3], rtol=1e-12)


@pytest.mark.parametrize(
    "ll, cycle, method, match",
    [
        ([0.0, 1.0], [0], "harmonic", "same number"),
        ([0.0, np.inf], [0, 1], "harmonic", "finite"),
        ([0.0, 1.0], [0, 1], "geometric", "method"),
    ],
)
def test_cycle_weight_errors(ll, cycle, method, match):
    with pytest.raises(ValueError, match=match):
        D.cycle_weights(ll, cycle, method)


def _likelihood(theta):
    return 0.05 * stats.norm.pdf(theta, -1.5, 0.8) + 0.95 * stats.norm.pdf(theta, 1.5, 0.8)


def _region_draws(rng, lo, hi, n):
    """Exact draws of the flat-prior posterior restricted to [lo, hi], by inverse CDF on a grid."""
    grid = np.linspace(lo, hi, 20_001)
    p = _likelihood(grid)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(grid))])
    return np.interp(rng.uniform(size=n), cdf / cdf[-1], grid)


def _hm_log_ratio(ll0, ll1):
    w = D.cycle_weights(np.concatenate([ll0, ll1]), np.repeat([0, 1], [ll0.size, ll1.size]))
    return math.log(w[1] / w[0])


@pytest.mark.parametrize("lo, hi, seed", [(-3.0, 3.0, 9), (-1.0, 3.0, 10)])
def test_harmonic_weights_estimate_w_over_prior_mass(lo, hi, seed):
    # docs: theory-cycle-weights: uniform prior on [lo, hi], regions split at 0; with exact draws per region the
    # normalised harmonic-mean weights estimate w_m / Pi(Theta_m), which is w_m only when the
    # prior is symmetric about the split
    rng, n = np.random.default_rng(seed), 2000
    ll0 = np.log(_likelihood(_region_draws(rng, lo, 0.0, n)))
    ll1 = np.log(_likelihood(_region_draws(rng, 0.0, hi, n)))
    mass = np.array([integrate.quad(_likelihood, lo, 0)[0], integrate.quad(_likelihood, 0, hi)[0]])
    prior = np.array([-lo, hi]) / (hi - lo)
    est = _hm_log_ratio(ll0, ll1)
    # heavy-tailed estimator: SE of the log weight ratio from 200 bootstrap resamples per region
    boot = [_hm_log_ratio(rng.choice(ll0, n), rng.choice(ll1, n)) for _ in range(200)]
    se = float(np.std(boot, ddof=1))
    assert_within_se(est, math.log(mass[1] / mass[0] * prior[0] / prior[1]), se, what="log(w1/w0) vs w/Pi")
    if lo == -hi:
        assert_within_se(est, math.log(mass[1] / mass[0]), se, what="log(w1/w0) vs w")
    else:  # negative control: with unequal prior masses the weights are not w_m
        with pytest.raises(AssertionError):
            assert_within_se(est, math.log(mass[1] / mass[0]), se)
