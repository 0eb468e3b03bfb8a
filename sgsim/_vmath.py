"""Branch-free ``exp``, ``log`` and ``sincos`` that LLVM vectorises inside compiled loops.

numba lowers ``math.exp``, ``math.log``, ``math.sin`` and ``math.cos`` to calls into the C
library, one value at a time, and without SVML nothing turns them into vector code: a loop
``out[i] = math.exp(x[i])`` costs a libm call per element. The functions here are written
in plain arithmetic instead: a range reduction, a polynomial, and the binary exponent read or
set through a reinterpretation of the double's bits (:func:`_as_int`, :func:`_as_float`), with
every choice a select rather than a branch. Compiled with ``inline=True``, they are inlined
into the caller's loop, which LLVM then vectorises like any arithmetic loop.

The accuracy of each function is measured against the C library's (``math.exp`` and so on)
over millions of points and stated in its docstring; the tests hold it. Nothing here uses
``fastmath``: the results are the same bits on every build. Where a product feeds a sum, the
two are one explicit fused multiply-add (:func:`fma`), rounded once, which is both fewer
instructions and the same bits everywhere (``fastmath``'s contraction would leave the choice
to the compiler).

This module is private: the compiled kernels import it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import types
from numba.extending import intrinsic

from ._jit import JIT_DISABLED, jit

__all__ = ["fma", "exp", "exp_nonpositive", "log", "sincos"]


# ----------------------------------------------------------------------------- bit casts

if JIT_DISABLED:  # plain Python: the same reinterpretation through NumPy

    def _as_int(x):
        return int(np.float64(x).view(np.int64))

    def _as_float(i):
        return float(np.int64(i).view(np.float64))

else:

    @intrinsic
    def _as_int(typingctx, x):
        # the 64 bits of a double, read as a signed integer
        if x != types.float64:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.int64))

        return types.int64(types.float64), codegen

    @intrinsic
    def _as_float(typingctx, i):
        # a signed 64-bit integer's bits, read as a double
        if i not in (types.int64, types.uint64):
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float64))

        return types.float64(i), codegen


# ----------------------------------------------------------------------------- fused multiply-add


def _fma_exact(a, b, c):
    # a * b + c rounded once, in plain Python: exact rational arithmetic, then one rounding to the
    # nearest double (ties to even, as float() of a Fraction rounds)
    a, b, c = float(a), float(b), float(c)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c  # infinities and NaN: the IEEE rules of the unfused form
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # an exact zero is +0, unless both parts are zeros of the same negative sign
        return a * b + c if (a * b == 0.0 and c == 0.0) else 0.0
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


if JIT_DISABLED:
    fma = getattr(math, "fma", _fma_exact)  # Python 3.13 has the correctly rounded one

else:

    @intrinsic
    def fma(typingctx, a, b, c):
        """``a * b + c`` with a single rounding (LLVM's ``llvm.fma``), inlined into compiled callers.

        A fused multiply-add is correctly rounded by definition, so its result is the same bits on
        every machine: one instruction where the processor has FMA (every x86-64 since 2013, every
        64-bit ARM), a call to the C library's ``fma`` elsewhere (slower, the same bits). In a loop
        it vectorises like a product or a sum.
        """
        if not (a == types.float64 and b == types.float64 and c == types.float64):
            return None

        def codegen(context, builder, signature, args):
            return builder.fma(*args)

        return types.float64(types.float64, types.float64, types.float64), codegen


# ----------------------------------------------------------------------------- exp

_LOG2E = 1.4426950408889634
# ln 2 split in two: the high part has 21 trailing zero bits, so n * _LN2_HI is exact for |n| < 2^21
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# 1.5 * 2^52: adding it rounds a double of magnitude below 2^51 to an integer, which then sits in
# the low bits of the sum
_SHIFT = 6755399441055744.0
_SHIFT_BITS = 0x4338000000000000
_EXP_BIAS = 1023
# beyond these exp(x) is inf (above 709.78...) or rounds to 0 (below -745.13...): clamping keeps
# the reduction's integer small without changing the result
_EXP_HI = 710.0
_EXP_LO = -746.0
# 1 / k! for k = 2 .. 13: the Taylor series of exp(r) - 1 - r, whose truncation error on
# |r| <= ln(2) / 2 is below r^14 / 14! < 5e-18, a fortieth of an ulp of 1
_E2 = 1.0 / 2.0
_E3 = 1.0 / 6.0
_E4 = 1.0 / 24.0
_E5 = 1.0 / 120.0
_E6 = 1.0 / 720.0
_E7 = 1.0 / 5040.0
_E8 = 1.0 / 40320.0
_E9 = 1.0 / 362880.0
_E10 = 1.0 / 3628800.0
_E11 = 1.0 / 39916800.0
_E12 = 1.0 / 479001600.0
_E13 = 1.0 / 6227020800.0


@jit(inline=True)
def _exp_reduced(x):
    # x = n ln 2 + r: (e^r, n), e^r by the degree-13 Taylor polynomial (x of magnitude below 746)
    # every step a fused multiply-add: half the operations of products and sums, one rounding each
    k = fma(x, _LOG2E, _SHIFT)
    nf = k - _SHIFT
    n = _as_int(k) - _SHIFT_BITS
    r = fma(-nf, _LN2_LO, fma(-nf, _LN2_HI, x))  # the inner one exact, as nf * _LN2_HI is
    p = fma(r, _E13, _E12)
    p = fma(r, p, _E11)
    p = fma(r, p, _E10)
    p = fma(r, p, _E9)
    p = fma(r, p, _E8)
    p = fma(r, p, _E7)
    p = fma(r, p, _E6)
    p = fma(r, p, _E5)
    p = fma(r, p, _E4)
    p = fma(r, p, _E3)
    p = fma(r, p, _E2)
    y = 1.0 + fma(r * r, p, r)
    return y, n


@jit(inline=True)
def exp(x):
    """``e ** x`` for a double ``x``, in branch-free arithmetic that vectorises.

    ``x = n ln 2 + r`` with ``n`` the nearest integer to ``x / ln 2`` (so ``|r| <= ln(2) / 2``,
    ``ln 2`` split in two parts so that ``r`` is computed almost exactly), ``e ** r`` by its
    Taylor polynomial of degree 13 in Horner's scheme, each step a fused multiply-add
    (:func:`fma`, so the same bits on every machine), and ``2 ** n`` applied as two factors
    built from their bits, so that results down to the smallest subnormal come out as in
    ``math.exp``.

    Parameters
    ----------
    x : float
        Any double. Above 709.78 the result is ``inf``, below -745.14 it is ``0.0``, as with
        ``math.exp`` (and ``exp(-inf) = 0``, ``exp(inf) = inf``, ``exp(nan)`` is NaN).

    Returns
    -------
    float
        ``e ** x``. Measured against ``math.exp`` over 4 x 10^6 points (uniform on
        [-745, 709.7], uniform on [-1, 1], log-uniform magnitudes in [1e-300, 700] of both signs),
        it differs by at most 1 ulp for normal results; subnormal results (``x < -708.4``) differ
        by at most 1 unit of the smallest subnormal.
    """
    y, n = _exp_reduced(min(max(x, _EXP_LO), _EXP_HI))
    # 2^n as 2^h 2^(n - h): each factor a normal double for every n in [-1077, 1025]
    h = n >> 1
    a = _as_float((h + _EXP_BIAS) << 52)
    b = _as_float((n - h + _EXP_BIAS) << 52)
    return (y * a) * b


@jit(inline=True)
def exp_nonpositive(x):
    """:func:`exp` for ``-708 <= x <= 0``, with the same bits and fewer operations.

    On that range ``2 ** n`` is a normal double, so it is applied as one factor (multiplying by
    a power of two is exact while the result stays normal, which is why the two forms agree bit
    for bit), and no clamp is needed. For the block gradients of mixtures, whose exponents are
    taken relative to the largest one and floored: every argument lies in ``[-600, 0]``.
    Outside the range the result is meaningless.
    """
    y, n = _exp_reduced(x)
    return y * _as_float((n + _EXP_BIAS) << 52)


# ----------------------------------------------------------------------------- log

# adding bits(1) - bits(sqrt(2) / 2) puts the mantissas of [sqrt(2) / 2, sqrt(2)) in one binade
_SQRT_HALF_HI = 0x3FE6A09E00000000
_ONE_BITS = 0x3FF0000000000000
_MANTISSA = 0x000FFFFFFFFFFFFF
# log(1 + f) = f - f^2 / 2 + s (f^2 / 2 + R(s^2)), s = f / (2 + f): R's minimax coefficients of
# fdlibm's e_log.c (error below 2^-58.45 on |s| <= 0.1716)
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01


@jit(inline=True)
def log(x):
    """The natural logarithm of a positive normal double, in branch-free arithmetic that vectorises.

    ``x = 2 ** k m`` with ``m`` in ``[sqrt(2) / 2, sqrt(2))`` read from the bits, ``f = m - 1``,
    ``log(1 + f) = 2 atanh(s)`` with ``s = f / (2 + f)`` by a minimax polynomial in ``s ** 2``,
    and ``k ln 2`` added in two parts (the scheme of fdlibm's ``e_log.c``).

    Parameters
    ----------
    x : float
        A positive normal double (``2.2250738585072014e-308 <= x < inf``). Zero, negative,
        subnormal, infinite or NaN arguments give meaningless numbers, not errors.

    Returns
    -------
    float
        ``ln x``; ``log(1.0)`` is exactly ``0.0``. Measured against ``math.log`` over
        3 x 10^6 points (uniform on (0, 1), uniform on [0.5, 2], log-uniform on the normal
        range), it differs by at most 1 ulp.
    """
    ix = _as_int(x) + (_ONE_BITS - _SQRT_HALF_HI)
    k = (ix >> 52) - _EXP_BIAS
    m = _as_float((ix & _MANTISSA) + _SQRT_HALF_HI)
    f = m - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    dk = _as_float(_SHIFT_BITS + k) - _SHIFT
    return s * (hfsq + (t2 + t1)) + dk * _LN2_LO - hfsq + f + dk * _LN2_HI


# ----------------------------------------------------------------------------- sincos

_2_OVER_PI = 6.36619772367581382433e-01
# pi / 2 in three parts (fdlibm's): the first two hold 33 bits each, so that n times either is
# exact for |n| < 2^20; the third is the remainder rounded to a double
_PIO2_1 = 1.57079632673412561417e00
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_2T = 2.02226624879595063154e-21
# minimax coefficients of fdlibm's k_sin.c and k_cos.c on |r| <= pi / 4
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11


@jit(inline=True)
def sincos(x):
    """``(sin x, cos x)`` for ``|x| <= pi`` (and somewhat beyond), in branch-free arithmetic that vectorises.

    ``x = n pi / 2 + r`` with ``n`` the nearest integer to ``2 x / pi`` and ``r`` in
    ``[-pi / 4, pi / 4]`` computed as a double and a correction (``pi / 2`` in three parts,
    the first subtraction exact, the second's rounding error recovered); ``sin r`` and
    ``cos r`` by fdlibm's minimax polynomials, and the pair rotated to ``x``'s quadrant by
    selects.

    Parameters
    ----------
    x : float
        A double with ``|x| <= 1e4``; the accuracy below is measured on that range. (The
        reduction stays exact to ``|x|`` near ``2^20 pi / 2``; it is not checked there.)

    Returns
    -------
    tuple of float
        ``(sin x, cos x)``. Measured against ``math.sin`` and ``math.cos`` over 4 x 10^6
        points (uniform on [-pi, pi], log-uniform magnitudes in [1e-300, pi] of both signs,
        points within a few ulps of multiples of pi / 2, uniform on [-1e4, 1e4]), each differs
        by at most 1 ulp.
    """
    kk = x * _2_OVER_PI + _SHIFT
    nf = kk - _SHIFT
    q = _as_int(kk) - _SHIFT_BITS
    a = x - nf * _PIO2_1  # exact
    b = nf * _PIO2_2  # exact
    t = a - b
    tb = t - a
    e = (a - (t - tb)) + (-b - tb)  # t's rounding error (two-sum)
    c = nf * _PIO2_2T
    r = t - c
    y = ((t - r) - c) + e  # r + y is the reduced argument to about 2^-100 of pi
    z = r * r
    w = z * z
    v = z * r
    sr = _S2 + z * (_S3 + z * _S4) + z * w * (_S5 + z * _S6)
    sin_r = r - ((z * (0.5 * y - v * sr) - y) - v * _S1)
    cr = z * (_C1 + z * (_C2 + z * _C3)) + w * w * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    w1 = 1.0 - hz
    cos_r = w1 + (((1.0 - w1) - hz) + (z * cr - r * y))
    odd = (q & 1) != 0
    s = cos_r if odd else sin_r
    co = sin_r if odd else cos_r
    s = -s if (q & 2) != 0 else s
    co = -co if ((q + 1) & 2) != 0 else co
    return s, co
