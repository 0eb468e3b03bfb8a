"""sgsim._vmath: the branch-free exp, log and sincos, against the C library, and their vector code.

Accuracy is the distance in ulps (the number of doubles between two values) to ``math.exp``,
``math.log``, ``math.sin`` and ``math.cos`` over 2 x 10^6 points per function, uniform and
log-uniform; the bound is the one each docstring states (1 ulp). A NumPy transcription of
``exp`` gives the compiled bits exactly, and with its polynomial cut to degree 10 the same
check rejects it (the negative control). The loops' LLVM IR holds vector instructions.
"""

from __future__ import annotations

import math

import llvmlite.binding as llvm
import numpy as np
import pytest

from sgsim import _vmath as V
from sgsim._jit import jit
from sgsim._vmath import exp, exp_nonpositive, log, sincos

N = 10**6
BOUND = 1  # ulps, as the docstrings state
TINY = np.finfo(np.float64).tiny


@jit
def _exp_loop(x, out):
    for i in range(x.shape[0]):
        out[i] = exp(x[i])


@jit
def _exp_nonpositive_loop(x, out):
    for i in range(x.shape[0]):
        out[i] = exp_nonpositive(x[i])


@jit
def _log_loop(x, out):
    for i in range(x.shape[0]):
        out[i] = log(x[i])


@jit
def _sincos_loop(x, s, c):
    for i in range(x.shape[0]):
        s[i], c[i] = sincos(x[i])


def _apply(loop, x, outputs=1):
    outs = [np.empty_like(x) for _ in range(outputs)]
    loop(x, *outs)
    return outs[0] if outputs == 1 else outs


def _ulps(a, b):
    """Doubles between ``a`` and ``b``, elementwise (0 where equal, infinities included)."""
    ia = np.asarray(a, np.float64).view(np.int64)
    ib = np.asarray(b, np.float64).view(np.int64)
    # the bits of a negative double, reflected, so that the integers order as the doubles do
    ia = np.where(ia < 0, np.int64(-(2**63)) - ia, ia)
    ib = np.where(ib < 0, np.int64(-(2**63)) - ib, ib)
    return np.abs(ia - ib)


def _assert_within_ulps(got, ref, bound, what):
    d = _ulps(got, ref)
    worst = int(np.argmax(d))
    assert d[worst] <= bound, f"{what}: {d[worst]} ulps > {bound} (got {got[worst]!r}, libm {ref[worst]!r})"
    return int(d.max())


def _libm(f, x):
    return np.fromiter(map(f, x.tolist()), np.float64, x.size)


def _log_uniform(rng, lo, hi, n, signed=True):
    x = np.exp(rng.uniform(math.log(lo), math.log(hi), n))
    return x * rng.choice([-1.0, 1.0], n) if signed else x


# ----------------------------------------------------------------------------- accuracy


def test_exp_is_within_one_ulp_of_libm():
    rng = np.random.default_rng(1)
    points = {
        "uniform": rng.uniform(-745.0, 709.7, N),
        "log-uniform": _log_uniform(rng, 1e-300, 700.0, N),
    }
    for what, x in points.items():
        _assert_within_ulps(_apply(_exp_loop, x), _libm(math.exp, x), BOUND, f"exp, {what}")
    # subnormal results: an ulp there is the smallest subnormal, still within one
    x = rng.uniform(-745.1, -708.4, 10**5)
    _assert_within_ulps(_apply(_exp_loop, x), _libm(math.exp, x), BOUND, "exp, subnormal results")


def test_exp_nonpositive_has_exps_bits_on_its_range_and_not_beyond():
    # one factor 2^n where exp applies two: exact while the result is normal, i.e. for x >= -708
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-708.0, 0.0, N), -_log_uniform(rng, 1e-300, 708.0, N, signed=False), [0.0, -708.0]])
    assert np.array_equal(_apply(_exp_nonpositive_loop, x), _apply(_exp_loop, x))
    # negative control: below the range (subnormal results) the one factor is no longer a normal double
    low = np.linspace(-744.0, -709.0, 200)
    assert not np.array_equal(_apply(_exp_nonpositive_loop, low), _apply(_exp_loop, low))
    # exactly 1 at 0 (of either sign): the mixtures' one-point gradient takes the largest component's
    # weight as 1 without computing it, with the block form's bits; the smallest step off 0 is not 1
    assert np.array_equal(_apply(_exp_nonpositive_loop, np.array([0.0, -0.0])), [1.0, 1.0])
    assert _apply(_exp_nonpositive_loop, np.array([-(2.0**-52)]))[0] < 1.0


def test_exp_overflows_and_underflows_as_libm():
    x = np.array([709.78, 709.79, 710.0, 1e308, np.inf, -745.13, -745.14, -746.0, -1e308, -np.inf, 0.0, -0.0])
    got = _apply(_exp_loop, x)
    assert np.array_equal(got, [math.exp(709.78), np.inf, np.inf, np.inf, np.inf, 5e-324, 0, 0, 0, 0, 1, 1])
    assert np.isnan(_apply(_exp_loop, np.array([np.nan])))[0]


def test_log_is_within_one_ulp_of_libm():
    rng = np.random.default_rng(2)
    # the Box-Muller radius takes log of u in [2^-54, 1]: that range, uniform, then every normal double
    points = {
        "uniform on (0, 1]": rng.uniform(0.0, 1.0, N) + 2.0**-54,
        "log-uniform on the normal doubles": _log_uniform(rng, TINY, 1.7e308, N, signed=False),
        "near 1": 1.0 + rng.uniform(-1e-6, 1e-6, 10**5),
    }
    for what, x in points.items():
        _assert_within_ulps(_apply(_log_loop, x), _libm(math.log, x), BOUND, f"log, {what}")
    x = np.array([1.0, 2.0**-54, TINY, 2.0**1023, 0.5])
    got = _apply(_log_loop, x)
    assert got[0] == 0.0  # exactly: a radius of exactly 0 where u = 1
    _assert_within_ulps(got, _libm(math.log, x), BOUND, "log at the ends")


def test_sincos_is_within_one_ulp_of_libm():
    rng = np.random.default_rng(3)
    # points within 50 ulps of the multiples of pi/2 in [-pi, pi], where the reduction cancels
    edges = np.array([m * math.pi / 2 for m in (-2, -1, 1, 2)])
    near = (edges[:, None] + np.arange(-50, 51)[None, :] * np.spacing(edges)[:, None]).ravel()
    points = {
        "uniform on [-pi, pi]": rng.uniform(-math.pi, math.pi, N),
        "log-uniform magnitudes in [1e-300, pi]": _log_uniform(rng, 1e-300, math.pi, N),
        "near multiples of pi/2": near,
        "uniform on [-1e4, 1e4]": rng.uniform(-1e4, 1e4, 10**5),
    }
    for what, x in points.items():
        s, c = _apply(_sincos_loop, x, 2)
        _assert_within_ulps(s, _libm(math.sin, x), BOUND, f"sin, {what}")
        _assert_within_ulps(c, _libm(math.cos, x), BOUND, f"cos, {what}")
    s, c = _apply(_sincos_loop, np.array([0.0, math.pi / 2, -math.pi]), 2)
    assert s[0] == 0.0 and c[0] == 1.0 and c[1] == math.cos(math.pi / 2) and s[2] == math.sin(-math.pi)


_fma = np.frompyfunc(V._fma_exact, 3, 1)  # a * b + c rounded once, exactly (Python's rationals)


def _fused(a, b, c):
    return _fma(a, b, c).astype(np.float64)


def _numpy_exp(x, degree=13):
    """The steps of _vmath.exp in NumPy, each fused multiply-add rounded once by exact rational
    arithmetic; the Taylor polynomial of exp(r) cut at ``degree``.
    """
    x = np.minimum(np.maximum(x, V._EXP_LO), V._EXP_HI)
    k = _fused(x, V._LOG2E, V._SHIFT)
    nf = k - V._SHIFT
    n = k.view(np.int64) - V._SHIFT_BITS
    r = _fused(-nf, V._LN2_LO, _fused(-nf, V._LN2_HI, x))
    p = np.full_like(r, 1.0 / math.factorial(degree))
    for j in range(degree - 1, 1, -1):
        p = _fused(r, p, 1.0 / math.factorial(j))
    y = 1.0 + _fused(r * r, p, r)
    h = n >> 1
    return (y * ((h + V._EXP_BIAS) << 52).view(np.float64)) * ((n - h + V._EXP_BIAS) << 52).view(np.float64)


def test_exp_is_its_numpy_transcription_and_a_shorter_polynomial_is_rejected():
    # 20,000 points: the transcription's exact rounding costs microseconds a value
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-745.0, 709.7, 10_000), rng.uniform(-1.0, 1.0, 10_000)])
    ref = _libm(math.exp, x)
    assert np.array_equal(_apply(_exp_loop, x), _numpy_exp(x))
    # negative control: degree 10 leaves r^11 / 11! ~ 2e-13 relative at |r| = ln(2) / 2, hundreds of ulps
    with pytest.raises(AssertionError, match="ulps >"):
        _assert_within_ulps(_numpy_exp(x, degree=10), ref, BOUND, "exp of degree 10")
    assert _ulps(_numpy_exp(x, degree=10), ref).max() > 100


@pytest.mark.parametrize(
    ("a", "b", "c"),
    [
        (1.0 + 2.0**-52, 1.0 - 2.0**-52, -1.0),  # the product's low bits, which an unfused sum loses
        (0.1, 10.0, -1.0),
        (3.0, 5.0, 7.0),
        (-0.0, 1.0, -0.0),
        (1e308, 10.0, -1e308),
        (2.0**-1074, 0.5, 0.0),
    ],
)
def test_fma_is_rounded_once(a, b, c):
    from fractions import Fraction

    @jit
    def fused(a, b, c):
        return V.fma(a, b, c)

    exact = Fraction(a) * Fraction(b) + Fraction(c)
    want = V._fma_exact(a, b, c)
    got = fused(a, b, c)
    assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)
    if math.isfinite(want) and exact != 0:
        # correctly rounded: within half an ulp of the exact value
        ulp = abs(Fraction(math.nextafter(want, math.inf)) - Fraction(want))
        assert 2 * abs(Fraction(want) - exact) <= ulp
    if a == 1.0 + 2.0**-52:
        # the control: the unfused form rounds the product first and gives 0, not -2^-104
        assert got == -(2.0**-104) and a * b + c == 0.0


# ----------------------------------------------------------------------------- vector code

avx2 = pytest.mark.skipif(
    not llvm.get_host_cpu_features().get("avx2", False), reason="this CPU lacks AVX2: LLVM keeps the loops scalar"
)


def _all_three(x, out):
    for i in range(x.shape[0]):
        s, c = sincos(x[i])
        out[i] = exp(x[i]) + log(x[i]) + s * c


@avx2
def test_a_loop_over_the_functions_vectorises():
    # compiled afresh (numba shows no IR of code loaded from its cache); one loop calling all
    # three: it vectorises as a whole or not at all
    loop = jit(cache=False)(_all_three)
    _apply(loop, np.linspace(0.1, 3.0, 64))
    ir = loop.inspect_llvm(loop.signatures[0])
    assert "<4 x double>" in ir or "<8 x double>" in ir, "no vector instructions"
    # and no call to a scalar libm routine is left
    assert not any(f"@{name}(" in ir for name in ("exp", "log", "sin", "cos", "llvm.exp.f64", "llvm.log.f64"))
    # control: the same loop over libm's functions stays scalar (numba has no vector libm here)
    libm = jit(cache=False)(_libm_three)
    _apply(libm, np.linspace(0.1, 3.0, 64))
    ir = libm.inspect_llvm(libm.signatures[0])
    assert "<4 x double>" not in ir and "<8 x double>" not in ir


def _libm_three(x, out):
    for i in range(x.shape[0]):
        out[i] = math.exp(x[i]) + math.log(x[i]) + math.sin(x[i]) * math.cos(x[i])
