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
``fastmath``: the results are the same bits on every build.

This module is private: the compiled kernels import it.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import intrinsic

from ._jit import JIT_DISABLED, jit

__all__ = ["exp"]


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
        if not isinstance(x, types.Float) or x.bitwidth != 64:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.int64))

        return types.int64(types.float64), codegen

    @intrinsic
    def _as_float(typingctx, i):
        # a signed 64-bit integer's bits, read as a double
        if not isinstance(i, types.Integer) or i.bitwidth != 64:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float64))

        return types.float64(i), codegen


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
def exp(x):
    """``e ** x`` for a double ``x``, in branch-free arithmetic that vectorises.

    ``x = n ln 2 + r`` with ``n`` the nearest integer to ``x / ln 2`` (so ``|r| <= ln(2) / 2``,
    ``ln 2`` split in two parts so that ``r`` is computed almost exactly), ``e ** r`` by its
    Taylor polynomial of degree 13, and ``2 ** n`` applied as two factors built from their bits,
    so that results down to the smallest subnormal come out as in ``math.exp``.

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
    x = min(max(x, _EXP_LO), _EXP_HI)
    k = x * _LOG2E + _SHIFT
    nf = k - _SHIFT
    n = _as_int(k) - _SHIFT_BITS
    r = (x - nf * _LN2_HI) - nf * _LN2_LO
    p = _E12 + r * _E13
    p = _E11 + r * p
    p = _E10 + r * p
    p = _E9 + r * p
    p = _E8 + r * p
    p = _E7 + r * p
    p = _E6 + r * p
    p = _E5 + r * p
    p = _E4 + r * p
    p = _E3 + r * p
    p = _E2 + r * p
    y = 1.0 + (r + (r * r) * p)
    # 2^n as 2^h 2^(n - h): each factor a normal double for every n in [-1077, 1025]
    h = n >> 1
    a = _as_float((h + _EXP_BIAS) << 52)
    b = _as_float((n - h + _EXP_BIAS) << 52)
    return (y * a) * b
