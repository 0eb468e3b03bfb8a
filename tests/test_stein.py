"""The IMQ kernel Stein discrepancy (sgsim.stein).

Deterministic first: the Stein kernel against finite differences of the base kernel and
against Stein's identity by quadrature, the U-statistic and its Hoeffding standard error
against a plain NumPy oracle written here (d = 1, 2, 5), the same bits with 1 and 2 threads.
Then statistical, with fixed seeds and margins in standard errors: exact draws rank below
draws 10% too wide, the linear-time statistic agrees with the U-statistic, each with a negative
control that the same check rejects. The measured power (200 repetitions) is on the theory page
(docs/theory/diagnostics.md), from the script in its comments.
"""

import numba
import numpy as np
import pytest
from scipy import integrate

from sgsim import stein, targets
from sgsim._validate import ParameterError, ParameterTypeError


def oracle(x, s, c=1.0, beta=-0.5):
    """KSD^2 U-statistic and its Hoeffding SE, by broadcasting over all pairs (independent code)."""
    n, d = x.shape
    r = x[:, None, :] - x[None, :, :]  # r_ij = x_i - x_j
    r2 = (r**2).sum(-1)
    u = c**2 + r2
    k = u**beta
    grad_x = 2 * beta * u[..., None] ** (beta - 1) * r  # d k / d x_i
    grad_y = -grad_x  # d k / d x_j
    trace = -2 * beta * d * u ** (beta - 1) - 4 * beta * (beta - 1) * r2 * u ** (beta - 2)
    h = (s @ s.T) * k + np.einsum("id,ijd->ij", s, grad_y) + np.einsum("jd,ijd->ij", s, grad_x) + trace
    np.fill_diagonal(h, 0.0)
    pairs = n * (n - 1)
    est = h.sum() / pairs
    rows = h.sum(1)
    zeta2 = max((h**2).sum() / pairs - est**2, 0.0)
    zeta1 = max((rows**2 - (h**2).sum(1)).sum() / (pairs * (n - 2)) - est**2, 0.0)
    return est, np.sqrt((4 * (n - 2) * zeta1 + 2 * zeta2) / pairs)


def gaussian_5d():
    rng = np.random.default_rng(5)
    m = rng.standard_normal((5, 5))
    return targets.linear_gaussian(m @ m.T + 5 * np.eye(5), shift=rng.standard_normal(5))


@pytest.mark.parametrize("d", [1, 2, 5])
@pytest.mark.parametrize("c, beta", [(1.0, -0.5), (0.7, -0.3)])
def test_u_statistic_and_se_equal_the_numpy_oracle(d, c, beta):
    target = {1: lambda: targets.linear_gaussian(np.eye(1) * 2.0), 2: targets.mixture_25, 5: gaussian_5d}[d]()
    x = 1.3 * np.random.default_rng(d).standard_normal((150, d))
    got = stein.imq_ksd(x, target, c=c, beta=beta)
    want, want_se = oracle(x, -target.gradient(x), c, beta)
    assert got.method == "u_statistic" and got.n == 150
    np.testing.assert_allclose(got.ksd2, want, rtol=1e-10)
    np.testing.assert_allclose(got.se, want_se, rtol=1e-10)
    assert got.ksd == np.sqrt(max(want, 0.0))
    # the same from the scores given directly, and from (chain, draw, d) draws
    by_scores = stein.imq_ksd(x.reshape(3, 50, d), scores=-target.gradient(x).reshape(3, 50, d), c=c, beta=beta)
    assert by_scores == got


def test_the_stein_kernel_is_the_finite_difference_one_and_satisfies_steins_identity():
    c, beta = 0.8, -0.4
    x, y = np.array([0.3, -0.7, 1.1]), np.array([-0.2, 0.4, 0.5])
    sx, sy = np.array([1.0, 0.5, -2.0]), np.array([-0.3, 0.8, 0.6])

    def k(a, b):
        return (c**2 + np.sum((a - b) ** 2)) ** beta

    h, eye = 1e-4, np.eye(3)
    gx = np.array([(k(x + h * e, y) - k(x - h * e, y)) / (2 * h) for e in eye])
    gy = np.array([(k(x, y + h * e) - k(x, y - h * e)) / (2 * h) for e in eye])
    tr = sum(
        (k(x + h * e, y + h * e) - k(x + h * e, y - h * e) - k(x - h * e, y + h * e) + k(x - h * e, y - h * e))
        / (4 * h * h)
        for e in eye
    )
    fd = sx @ sy * k(x, y) + sx @ gy + sy @ gx + tr
    np.testing.assert_allclose(stein.imq_stein_kernel(x, y, sx, sy, c, beta), fd, rtol=1e-7)
    # Stein's identity: E_p k_p(X, y0) = 0 under p = N(0, 1) (score -x); quadrature to 1e-10
    for y0 in (-1.5, 0.2, 2.0):
        val, _ = integrate.quad(
            lambda t, y0=y0: stein.imq_stein_kernel([t], [y0], [-t], [-y0], c, beta) * np.exp(-t * t / 2),
            -np.inf,
            np.inf,
            epsabs=1e-13,
        )
        assert abs(val / np.sqrt(2 * np.pi)) < 1e-10
    # negative control: the identity fails under the wrong score (that of N(0, 1.1^2))
    val, _ = integrate.quad(
        lambda t: stein.imq_stein_kernel([t], [0.2], [-t / 1.21], [-0.2 / 1.21], c, beta) * np.exp(-t * t / 2),
        -np.inf,
        np.inf,
    )
    assert abs(val / np.sqrt(2 * np.pi)) > 1e-3


def test_same_bits_with_one_and_two_threads():
    x = np.random.default_rng(0).standard_normal((700, 3))
    target = targets.linear_gaussian(np.eye(3))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = stein.imq_ksd(x, target)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = stein.imq_ksd(x, target)
    finally:
        numba.set_num_threads(before)
    assert one == two


def test_exact_draws_rank_below_draws_ten_percent_too_wide():
    # Fixed seeds; the margin is 3 standard errors of the difference of the two independent
    # estimates (Hoeffding SEs, hypot). Measured z: 4.6-4.9 (Gaussian, n = 4000), 16-17 (mixture).
    # Negative control: two exact samples do not pass the same check.
    gauss, mix = targets.standard_gaussian(), targets.mixture_25()
    cases = [
        (gauss, lambda rng: rng.standard_normal((4000, 2)), (1, 2)),
        (mix, lambda rng: mix.exact_draws(rng, 500), (1, 2, 3)),
    ]
    for target, draw, seeds in cases:
        for seed in seeds:
            rng = np.random.default_rng(seed)
            exact, wide, other = draw(rng), 1.1 * draw(rng), draw(rng)
            k_exact, k_wide, k_other = (stein.imq_ksd(x, target) for x in (exact, wide, other))
            assert k_wide.ksd2 - k_exact.ksd2 > 3 * np.hypot(k_wide.se, k_exact.se), (target.name, seed)
            assert not k_other.ksd2 - k_exact.ksd2 > 3 * np.hypot(k_other.se, k_exact.se), (target.name, seed)


def test_linear_time_statistic_agrees_with_the_u_statistic():
    # Both estimate KSD^2 of N(0, 1.1^2 I) under N(0, I): the U-statistic on 4000 draws, the
    # linear one on 200000 independent draws; |difference| <= 4 hypot(SEs) (measured z: 0.3, 1.0).
    # Negative control: the linear statistic of draws 30% too wide is rejected (measured z 8-10).
    target = targets.standard_gaussian()
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        u = stein.imq_ksd(1.1 * rng.standard_normal((4000, 2)), target)
        lin = stein.imq_ksd(1.1 * rng.standard_normal((200_000, 2)), target, method="linear")
        wrong = stein.imq_ksd(1.3 * rng.standard_normal((200_000, 2)), target, method="linear")
        assert lin.method == "linear" and u.method == "u_statistic"
        assert abs(lin.ksd2 - u.ksd2) <= 4 * np.hypot(lin.se, u.se)
        assert abs(wrong.ksd2 - u.ksd2) > 4 * np.hypot(wrong.se, u.se)
    # "auto" takes the linear statistic beyond EXACT_MAX_DRAWS draws
    x = np.random.default_rng(0).standard_normal((stein.EXACT_MAX_DRAWS + 2, 2))
    assert stein.imq_ksd(x, target).method == "linear"
    assert stein.imq_ksd(x[:100], target).method == "u_statistic"


def test_a_result_pools_its_healthy_chains():
    import arviz as az

    x = np.random.default_rng(4).standard_normal((3, 200, 2))
    diverged = np.zeros((3, 200), bool)
    diverged[1, 150:] = True  # chain 1 diverged: it is left out, with a warning
    x[1, 150:] = np.nan
    result = az.from_dict(posterior={"theta": x}, sample_stats={"diverged": diverged}, dims={"theta": ["dim"]})
    target = targets.standard_gaussian()
    with pytest.warns(RuntimeWarning, match=r"chains \[1\] diverged"):
        got = stein.imq_ksd(result, target)
    assert got == stein.imq_ksd(x[[0, 2]].reshape(-1, 2), target)


@pytest.mark.parametrize(
    "kwargs, parameter",
    [
        ({"c": 0.0}, "c"),
        ({"c": -1.0}, "c"),
        ({"beta": 0.0}, "beta"),
        ({"beta": -1.0}, "beta"),
        ({"beta": 0.5}, "beta"),
        ({"method": "quadratic"}, "method"),
        ({"scores": np.zeros((10, 2))}, "target"),  # both target and scores
    ],
)
def test_bad_input_names_its_parameter(kwargs, parameter):
    x = np.zeros((10, 2))
    with pytest.raises(ParameterError) as info:
        stein.imq_ksd(x, targets.standard_gaussian(), **kwargs)
    assert info.value.parameter == parameter


def test_bad_draws_and_scores():
    with pytest.raises(ParameterError, match="exactly one") as info:
        stein.imq_ksd(np.zeros((10, 2)))
    with pytest.raises(ParameterError) as info:
        stein.imq_ksd(np.zeros((10, 2)), scores=np.zeros((10, 3)))
    assert info.value.parameter == "scores"
    with pytest.raises(ParameterError) as info:
        stein.imq_ksd(np.array([[0.0, np.nan], [1.0, 1.0]]), scores=np.zeros((2, 2)))
    assert info.value.parameter == "draws"
    with pytest.raises(ParameterError) as info:
        stein.imq_ksd(np.zeros((1, 2)), scores=np.zeros((1, 2)))
    assert info.value.parameter == "draws"
    with pytest.raises(ParameterTypeError) as info:
        stein.imq_ksd(np.zeros((4, 2)), targets.linear_gaussian(np.eye(3)))
    assert info.value.parameter == "target"
