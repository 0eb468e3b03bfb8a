"""Block gradients (``Target.grad_u_block``): W points at once, the points as the inner SIMD loop.

Each shipped block gradient is checked against the per-point ``grad_u`` on 10^4 points (in and
around the initial box, far out to |theta| = 1e3, between modes, at exact midpoints and at the
mode centres) and against an extended-precision (``np.longdouble``, 64-bit mantissa)
reference on a few hundred of them; a block gradient with one component dropped, or with one
weight off by a relative 1e-13, fails the same checks.

A mixture's gradient is a weighted sum of terms ``r_j (x - mu_j) / s_j^2``, so errors are
measured against ``S(x) = C(x) + F(x)``: ``C(x) = sum_j r_j |x - mu_j| / s_j^2``, the size of the
terms (rounding the sum costs a few ``eps C``; ``C >= |grad U|``, about equal where one
component dominates), and ``F(x) = eps (1 + |x|_inf) / min_j s_j^2``, the change of the
gradient over one rounding unit of ``x`` (the Hessian is ``I / s_j^2`` near a mode), which no
double-precision gradient can beat and which is the only scale left at a mode centre, where
``C`` and ``grad U`` vanish.
"""

from __future__ import annotations

import dataclasses
import re

import numba
import numpy as np
import pytest

from sgsim import targets
from sgsim._jit import JIT_DISABLED
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.targets import Batched, Target, _base, exponential, gaussian, mixtures

EPS = np.finfo(np.float64).eps
LD = np.longdouble
# block against per-point, per point: rounding only, once the terms that the per-point form skips
# (weights below exp(-40)) are accounted for. The exp is within 1 ulp of math.exp, and the sums are
# the same in the same order (AGREE); the exponents' terms are fused multiply-adds in the block form
# and not in the per-point one, so each exponent e_j, whose terms are at most
# T_j = |const_j| + h_j |x|^2 + |lin_j . x| in size, is rounded differently by up to about eps T_j,
# which moves the gradient by up to that times S (EXPONENT_ROUNDING eps max_j T_j S over the
# components of weight above exp(-40); measured: at most 0.7 eps T S, on unequal_3d).
AGREE = 1e-14
EXPONENT_ROUNDING = 2.0
# the per-point form skips a component whose exponent is at most -40 below the largest; one at
# exactly -40 (e.g. a point midway between two modes at distance 3 from a third) may fall on
# either side of the test by rounding
SKIP_MARGIN = 1e-6


def _rng(seed):
    return np.random.default_rng(seed)


def mix(rng, k, d):
    return targets.gaussian_mixture(3 * rng.normal(size=(k, d)), rng.uniform(0.1, 2, k), rng.uniform(0.2, 1, k))


def _mixtures():
    rng = _rng(11)
    return {
        "mixture_25": targets.mixture_25(),
        "mixture_3x3": targets.mixture_3x3(),
        # unequal variances and weights: the 2-D block and the general one
        "unequal_2d": mix(rng, 5, 2),
        "unequal_3d": mix(rng, 6, 3),
        "one_d": targets.gaussian_mixture([[-3.0], [0.5], [4.0]], [0.2, 1.0, 0.05], [0.2, 0.5, 0.3]),
    }


MIXTURES = _mixtures()


def block(target, x, params=None, lanes=None):
    """``grad_u_block`` at the rows of ``x``, in blocks of ``lanes`` columns (all at once by default)."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    lanes = n if lanes is None else lanes
    out = np.empty((n, d))
    for lo in range(0, n, lanes):
        theta = np.ascontiguousarray(x[lo : lo + lanes].T)
        keep = theta.copy()
        g = np.full(theta.shape, np.nan)
        target.grad_u_block(theta, target.params if params is None else params, g, np.full((8, theta.shape[1]), np.nan))
        assert np.array_equal(theta, keep), "grad_u_block wrote into theta"
        out[lo : lo + lanes] = g.T
    return out


def point(target, x):
    """``grad_u`` at each row of ``x``, called row by row from Python (``Target.gradient``'s loop
    takes the function as an argument, which numba compiles anew in every process)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    for row, g in zip(x, out, strict=True):
        target.grad_u(row, target.params, g)
    return out


def trusted(target, **changes):
    """``dataclasses.replace`` without the construction-time check of a hand-built target."""
    token = _base._TRUSTED.set(True)
    try:
        return dataclasses.replace(target, **changes)
    finally:
        _base._TRUSTED.reset(token)


def mixture_points(target, n, seed):
    """``5 n`` points: in a box twice the initial one, far out (radius log-uniform on [1, 1e3]),
    on segments between two random modes (jittered), at exact midpoints, and the mode centres."""
    rng = _rng(seed)
    mu = target.mode_centres
    k, d = mu.shape
    centre, half = (target.init_low + target.init_high) / 2, (target.init_high - target.init_low) / 2
    box = centre + 2 * half * rng.uniform(-1, 1, (n, d))
    u = rng.normal(size=(n, d))
    far = u / np.linalg.norm(u, axis=1, keepdims=True) * 10 ** rng.uniform(0, 3, (n, 1))
    i, j = rng.integers(0, k, (2, n))
    between = mu[i] + rng.uniform(0, 1, (n, 1)) * (mu[j] - mu[i]) + 0.01 * rng.normal(size=(n, d))
    return np.concatenate([box, far, between, 0.5 * (mu[i] + mu[j]), mu[rng.integers(0, k, n)]])


def mixture_reference(target, x):
    """grad U in long double from the mixture's definition (direct squared distances); S(x); and
    a bound on what the per-point form skips: the sum of r_j |x - mu_j| / s_j^2 over r_j <= e^-40."""
    mu = target.mode_centres.astype(LD)
    var = np.asarray(target.extras["variance"]).astype(LD)
    w = np.asarray(target.extras["weights"]).astype(LD)
    xl = np.asarray(x).astype(LD)
    diff = xl[:, None, :] - mu[None]
    d2 = (diff**2).sum(-1)
    e = np.log(w) - LD(0.5) * x.shape[1] * np.log(2 * LD(np.pi) * var) - d2 / (2 * var)
    e = e - e.max(1, keepdims=True)
    r = np.exp(e)
    r = r / r.sum(1, keepdims=True)
    g = (r[..., None] * diff / var[None, :, None]).sum(1)
    terms = r * np.sqrt(d2) / var
    skipped = np.where(e <= -40 + SKIP_MARGIN, terms, 0).sum(1)
    floor = EPS * (1 + np.abs(x).max(1)) / np.min(target.extras["variance"])
    return g.astype(np.float64), terms.sum(1).astype(np.float64) + floor, skipped.astype(np.float64)


def rounding_allowance(target, x):
    """Per point, the relative difference rounding allows between the block and per-point forms:
    AGREE plus EXPONENT_ROUNDING eps T, T the largest exponent term size among the components of
    weight above exp(-40)."""
    means, lin, const, half_prec = target.params
    sq = (x**2).sum(1)[:, None]
    size = np.abs(const)[None] + half_prec[None] * sq + np.abs(x @ lin.T)
    e = const[None] - half_prec[None] * sq + x @ lin.T
    weighty = e - e.max(1, keepdims=True) > -40 - SKIP_MARGIN
    return AGREE + EXPONENT_ROUNDING * EPS * np.where(weighty, size, 0).max(1)


def assert_mixture_block_agrees(target, x, params=None):
    """|block - per-point| <= rounding_allowance S(x) + what the per-point form skips; returns the
    largest measured difference as a fraction of its allowance."""
    gb, gp = block(target, x, params), point(target, x)
    _, s, skipped = mixture_reference(target, x)
    excess = np.maximum(np.linalg.norm(gb - gp, axis=1) - skipped, 0) / s / rounding_allowance(target, x)
    worst = int(np.argmax(excess))
    assert excess[worst] <= 1.0, f"block and grad_u differ by {excess[worst]:.3g} allowances at {x[worst]}"
    return float(excess.max())


@pytest.mark.parametrize("name", sorted(MIXTURES))
def test_mixture_block_agrees_with_grad_u(name):
    target = MIXTURES[name]
    expected = mixtures.mixture_grad_u_block_2d if target.dim == 2 else mixtures.mixture_grad_u_block
    assert target.grad_u_block is expected
    x = mixture_points(target, 2000, seed=len(name))
    assert x.shape[0] == 10_000
    assert assert_mixture_block_agrees(target, x) <= 1.0


@pytest.mark.parametrize("name", ["mixture_25", "unequal_3d"])
def test_mixture_block_negative_controls(name):
    target = MIXTURES[name]
    x = mixture_points(target, 2000, seed=len(name))
    means, lin, const, half_prec = target.params
    dropped = (means[:-1], lin[:-1], const[:-1], half_prec[:-1])
    with pytest.raises(AssertionError, match="differ by"):
        assert_mixture_block_agrees(target, x, dropped)
    # one weight off by a relative 1e-12 (an exp that far from exact would be) is seen too: that of
    # the component nearest the origin, whose exponent's terms are small, so that its rounding is
    # (measured: 6 allowances on mixture_25, 38 on unequal_3d)
    near = np.zeros(const.size)
    near[np.argmin(np.abs(means).sum(1))] = 1e-12
    nudged = (means, lin, const + near, half_prec)
    with pytest.raises(AssertionError, match="differ by"):
        assert_mixture_block_agrees(target, x, nudged)


@pytest.mark.skipif(np.finfo(LD).eps >= EPS, reason="long double is double here")
@pytest.mark.parametrize("name", ["mixture_25", "mixture_3x3", "unequal_2d", "unequal_3d"])
def test_mixture_block_as_accurate_as_grad_u_against_long_double(name):
    # 300 points of every kind; the long-double reference's own error is ~1e-19 S. Both forms skip
    # the components more than 40 below the largest (exp(-40) = 4.2e-18 of the largest weight), so
    # beyond rounding the block form is as far from the reference as the per-point one, and both are
    # within 1e-13 S of it once what they skip is allowed for (the skipped terms show only where the
    # larger ones cancel: 1.5e-9 S on the 3x3 mixture, midway between two modes at distance 3 from a
    # third, whose weight is exactly exp(-40)). Measured: the block form within 3e-14 S of the
    # reference beyond the skipped terms, and 1.5e-9 S in all on the 3x3 mixture.
    target = MIXTURES[name]
    x = mixture_points(target, 60, seed=7)
    ref, s, skipped = mixture_reference(target, x)
    allowed = rounding_allowance(target, x)
    err_block = np.linalg.norm(block(target, x) - ref, axis=1) / s
    err_point = np.linalg.norm(point(target, x) - ref, axis=1) / s
    assert np.all(err_block <= err_point + allowed), np.max(err_block - err_point - allowed)
    assert np.all(err_block <= 1e-13 + skipped / s), np.max(err_block - skipped / s)
    # the control: with a component dropped, the same comparison fails
    means, lin, const, half_prec = target.params
    dropped = block(target, x, (means[:-1], lin[:-1], const[:-1], half_prec[:-1]))
    assert not np.all(np.linalg.norm(dropped - ref, axis=1) / s <= err_point + allowed)


def test_block_lanes_are_independent_of_the_block_width():
    # a lane's bits depend on its own point only: the same whatever W and whatever the other
    # lanes hold (unused lanes hold 0), so a chain's draws do not depend on the chain count
    for target in (MIXTURES["mixture_25"], MIXTURES["unequal_3d"], targets.exponential_mixture()):
        d = target.dim
        rng = _rng(3)
        x = rng.uniform(-6, 6, (64, d))
        x[[5, 17, 63]] = 0.0
        full = block(target, x)
        for lanes in (1, 3, 64):
            assert np.array_equal(block(target, x, lanes=lanes), full)
        padded = np.concatenate([x[:3], np.zeros((61, d))])
        assert np.array_equal(block(target, padded)[:3], full[:3])
        zeros = block(target, np.zeros((3, d)))
        assert np.all(np.isfinite(zeros)) and np.array_equal(zeros, np.repeat(full[[5]], 3, axis=0))


def test_linear_gaussian_block_is_grad_u_bit_for_bit():
    rng = _rng(5)
    a = rng.normal(size=(4, 4))
    shipped = [
        targets.linear_gaussian(a @ a.T + 0.5 * np.eye(4), rng.normal(size=4)),
        targets.standard_gaussian(3),
        targets.ou_quadratic(np.diag([1.0, 3.0]), np.eye(2), batch_size=4, n_data=100),
    ]
    for target in shipped:
        assert target.grad_u_block is gaussian.linear_gaussian_grad_u_block
        x = np.concatenate([rng.uniform(-5, 5, (5000, target.dim)), rng.uniform(-1e3, 1e3, (5000, target.dim))])
        x[:3] = 0.0
        assert np.array_equal(block(target, x), point(target, x))
        for lanes in (1, 3, 64):
            assert np.array_equal(block(target, x[:200], lanes=lanes), point(target, x[:200]))
    # the control: a shift left out is seen
    prec, shift, mean, log_norm = shipped[0].params
    x = rng.uniform(-5, 5, (100, 4))
    wrong = block(shipped[0], x, (prec, np.zeros_like(shift), mean, log_norm))
    assert not np.array_equal(wrong, point(shipped[0], x))


def _exp_points(n, seed):
    rng = _rng(seed)
    return np.concatenate([rng.uniform(-8, 6, 4 * n), rng.uniform(-1e3, 700, n)])[:, None]


def _exp_reference(target, y):
    lam, pi = target.extras["rates"].astype(LD), target.extras["weights"].astype(LD)
    ey = np.exp(y.astype(LD))
    e = np.log(pi) + np.log(lam) - lam * ey
    r = np.exp(e - e.max(1, keepdims=True))
    pull = ey[:, 0] * (r * lam).sum(1) / r.sum(1)
    # S: the size of the two terms of grad U = pull - 1, and the rounding floor of y, e^y and the
    # product, eps (1 + |y|) e^y max(lambda)
    floor = EPS * (1 + np.abs(y[:, 0])) * ey[:, 0] * lam.max()
    return (pull - 1).astype(np.float64)[:, None], (pull + 1 + floor).astype(np.float64)


@pytest.mark.parametrize("rates, weights", [((1.5, 0.5), (1 / 3, 2 / 3)), ((4.0, 1.0, 0.05), (0.2, 0.3, 0.5))])
def test_exponential_mixture_block(rates, weights):
    target = targets.exponential_mixture(rates, weights)
    assert target.grad_u_block is exponential.exp_mixture_grad_u_block
    y = _exp_points(2000, seed=len(rates))
    lam = np.asarray(rates)
    pi = np.asarray(weights) / np.sum(weights)
    # where two components weigh the same: log(pi_i lambda_i) - lambda_i e^y equal
    cross = np.log(np.log(pi[0] * lam[0] / (pi[1] * lam[1])) / (lam[0] - lam[1]))
    y = np.concatenate([y, cross + 1e-3 * _rng(1).normal(size=(100, 1)), np.zeros((2, 1))])
    ref, s = _exp_reference(target, y)
    gb, gp = block(target, y), point(target, y)
    assert np.max(np.abs(gb - gp)[:, 0] / s) <= AGREE
    sub = slice(None, None, 25)  # a few hundred points against the reference
    err_block, err_point = np.abs(gb - ref)[sub, 0] / s[sub], np.abs(gp - ref)[sub, 0] / s[sub]
    assert np.max(err_block) <= AGREE and np.all(err_block <= err_point + AGREE)
    dropped = block(target, y, (target.params[0][:-1], target.params[1][:-1]))
    assert np.max(np.abs(dropped - gp)[:, 0] / s) > 1e-3


def test_which_targets_carry_a_block_gradient():
    x = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -1.0]] * 10)
    lr = targets.logistic_regression(x, np.arange(20) % 2, batch_size=5)
    assert lr.grad_u_block is None
    t = MIXTURES["mixture_25"]
    noisy = t.with_gradient_noise(0.5)  # noise is added to the exact gradient: the block stays
    assert noisy.grad_u_block is t.grad_u_block
    assert t.with_init_box(-3, 3).grad_u_block is t.grad_u_block
    assert targets.build(noisy.spec).grad_u_block is t.grad_u_block
    assert trusted(t, params=t.params).grad_u_block is t.grad_u_block


def test_fingerprint_of_shipped_targets_is_unchanged():
    # results written before block gradients existed still replay: a shipped pairing hashes as
    # none; standard_gaussian(2)'s fingerprint as recorded then
    gauss = targets.standard_gaussian(2)
    assert gauss.fingerprint() == "c1d5998bc1f72eec2d0819dba87ce58a"
    for t in (gauss, MIXTURES["mixture_25"], targets.exponential_mixture()):
        assert t.fingerprint() == trusted(t, grad_u_block=None).fingerprint()


@numba.njit
def _std_block(theta, params, out, scratch):
    for i in range(theta.shape[0]):
        for lane in range(theta.shape[1]):
            out[i, lane] = theta[i, lane]


@numba.njit
def _std_block_wrong(theta, params, out, scratch):
    for i in range(theta.shape[0]):
        for lane in range(theta.shape[1]):
            out[i, lane] = 2.0 * theta[i, lane]


@numba.njit
def _std_block_three(theta, params, out):
    out[:] = theta


def test_hand_built_block_gradients_are_checked():
    base = targets.standard_gaussian(2)
    own = dataclasses.replace(base, grad_u_block=_std_block)
    assert own.fingerprint() != base.fingerprint()
    with pytest.raises(ParameterError, match="grad_u_block disagrees with grad_u"):
        dataclasses.replace(base, grad_u_block=_std_block_wrong)
    with pytest.raises(ParameterTypeError, match="grad_u_block must accept"):
        dataclasses.replace(base, grad_u_block=_std_block_three)
    if not JIT_DISABLED:
        with pytest.raises(ParameterTypeError, match="grad_u_block must be a compiled function"):
            dataclasses.replace(base, grad_u_block=_std_block.py_func)
    # a shipped block stays with its own gradient: a new grad_u must bring its own block or none
    mix = MIXTURES["mixture_25"]
    with pytest.raises(ParameterError, match="block form of mixture_grad_u_2d"):
        dataclasses.replace(mix, grad_u=mixtures.mixture_grad_u)
    general = trusted(mix, grad_u=mixtures.mixture_grad_u, grad_u_block=mixtures.mixture_grad_u_block)
    assert trusted(general, grad_u_block=None).grad_u_block is None
    batched = Batched(lambda theta, batch: theta, lambda theta: -0.5 * (theta**2).sum(-1))
    with pytest.raises(ParameterError, match="a target without grad_u has none"):
        Target("t", 1, None, None, (), batched=batched, grad_u_block=_std_block)


VECTOR_OP = re.compile(r"= f(add|mul) <(4|8) x double>")
VECTOR_EXP = re.compile(r"bitcast <(4|8) x i64> %[\w.]+ to <(4|8) x double>")


@pytest.mark.skipif(JIT_DISABLED, reason="nothing is compiled")
@pytest.mark.parametrize(
    "fn, target",
    [
        (mixtures.mixture_grad_u_block_2d, MIXTURES["mixture_25"]),
        (mixtures.mixture_grad_u_block, MIXTURES["unequal_3d"]),
        (exponential.exp_mixture_grad_u_block, targets.exponential_mixture()),
        (gaussian.linear_gaussian_grad_u_block, targets.standard_gaussian(3)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_block_gradients_compile_to_simd(fn, target):
    # a fresh compilation (the cached one keeps no IR): the lane loops are vector arithmetic, and
    # where there is an exponential its 2^n is built from vector integer bits (vectorised exp)
    fresh = numba.njit(fn.py_func)
    theta = np.zeros((target.dim, 16))
    fresh(theta, target.params, np.empty_like(theta), np.empty((8, 16)))
    ir = "".join(fresh.inspect_llvm().values())
    assert VECTOR_OP.search(ir)
    if fn is not gaussian.linear_gaussian_grad_u_block:
        assert VECTOR_EXP.search(ir)
