r"""The many-chain kernel's source: one CUDA C++ text per run, generated from one description.

Design
------
A run of independent chains on the GPU is one fused kernel, launched once per block of steps,
with one thread per chain: the chain's state, its running moments and its normals stay in
registers for the whole block, and per step the thread reads only what every chain shares (the
step size, the noise's standard deviations, what to store), which the hardware serves from
cache to a whole warp at once. Everything fixed for the run is written into the source as
literals: the dimension, the target's parameters (in constant memory), the algorithm's
constants, the noise's eigenbasis, the storage mode, the precision. The loops then have
compile-time trip counts and unroll, and a mixture's parameters become operands of the
multiply-adds.

The description
~~~~~~~~~~~~~~~
For each supported target gradient and each algorithm step this module holds a short C
fragment, keyed by the compiled CPU function it mirrors (``GRADIENTS``, ``STEPS``). The
fragment performs the same operations in the same order as that function, so that the one
description serves both machines: :func:`render` composes the fragments with the chain loop
(which mirrors ``sgsim.integrators._loop``: move, gradient, noise, update, the divergence
check, storing), the Philox generator and the launch wrappers. The same text compiles

* with NVRTC (through CuPy) into the GPU kernel ``sg_run``, one thread per chain, and
* with the host's C++ compiler into ``sg_run_host``, a loop over chains
  (:mod:`sgsim.gpu.host`),

so the kernel's every line is exercised on a machine without a GPU, and the tests compare it,
step for step given the same normals, with the CPU kernels it mirrors.

Why not another design: numba's CUDA target would compile the CPU kernels' own Python, but it
does not import beside current NumPy releases, and where it ran, the whole-run kernel of the
same algorithm measured about ten times slower (116 ps per step per chain at 10^7 chains,
against 11.6 ps for a CUDA C kernel with the state in registers and Philox normals); a kernel
per step (CuPy ``ElementwiseKernel``) pays at least one round trip of the state through memory
and one launch per step (22-38 ps at 10^6-10^7 chains, 2.4 ns at 10^4). The fused kernel is the
only design at the hardware's floor.

Randomness
~~~~~~~~~~
Normals come from Philox4x32-10 ("Parallel random numbers: as easy as 1, 2, 3", Salmon et al.,
2011), a counter-based generator: block ``b`` of chain ``c`` is
``philox(counter = (b mod 2^32, b div 2^32, c mod 2^32, c div 2^32), key)``, with the key the
first two 32-bit words of ``SeedSequence(seed)``'s state. Normal ``t = k d + i`` of a chain (step
``k``, coordinate ``i``) comes from block ``t div n`` (``n = 4`` normals per block in single
precision, 2 in double, by the Box-Muller transform of pairs of uniforms ``u`` in (0, 1) and ``v``
in [0, 1): ``sqrt(-2 log u) (cos phi, sin phi)``, ``phi = 2 pi (v - 1/2)``; in single precision
``u`` is a 23-bit midpoint ``(k + 1/2) 2^-23``, which the format holds exactly, so that ``u < 1``
and the radius is never zero), so a chain's normals
are a fixed function of ``(seed, chain, step, coordinate)``: they do not depend on how many
chains run, how they are scheduled, or where the run is cut into blocks. A step without noise
draws nothing and moves no counter. These are not the CPU path's streams (PCG64 with NumPy's
ziggurat): the two paths agree in law, not in bits.

Precision
~~~~~~~~~
``float32`` (the default on the GPU) keeps the state, the target's parameters and the
per-step values in single precision and uses the hardware's fast exponential and logarithm (a
mixture's exponents are then kept in base 2, its parameters scaled by ``log2(e)``, which saves a
multiplication per component); running moments are always accumulated in double precision. ``float64`` performs the CPU
kernels' arithmetic: the tests check the host build against them to 1e-12. In single
precision a Gaussian mixture's gradient sums every component (a component whose relative
weight is below ``exp(-40)`` underflows to no contribution anyway); in double precision it
skips them as the CPU kernel does.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import ParameterError
from ..integrators import constant_sgd, sghmc, sgld
from ..integrators._loop import MOMENTS, NOTHING, stay
from ..targets.exponential import exp_mixture_grad_u
from ..targets.gaussian import linear_gaussian_grad_u
from ..targets.mixtures import mixture_grad_u, mixture_grad_u_2d

__all__ = ["KernelSource", "render", "supported", "GRADIENTS", "STEPS", "PRECISIONS", "normals_per_block"]

PRECISIONS = ("float32", "float64")
#: parameters up to this size live in constant memory (64 KiB on every CUDA device), larger in global memory
_CONSTANT_BYTES = 32 * 1024
_LOG2E = 1.4426950408889634
#: threads per block of the GPU launch
THREADS = 128


def normals_per_block(precision: str) -> int:
    """Normals one Philox block gives: 4 in single precision, 2 in double."""
    return 4 if precision == "float32" else 2


# ----------------------------------------------------------------------------- literals


def _literal(value: float, precision: str) -> str:
    """An exact C literal of ``value`` rounded to ``precision`` (hexadecimal: no decimal rounding)."""
    v = float(np.float32(value)) if precision == "float32" else float(value)
    if not math.isfinite(v):
        raise ParameterError("target", f"a kernel constant is not finite in {precision}: {value!r}")
    return v.hex() + ("f" if precision == "float32" else "")


def _array(name: str, values, precision: str, space: str) -> str:
    flat = np.asarray(values, np.float64).ravel()
    body = ", ".join(_literal(v, precision) for v in flat) or _literal(0.0, precision)
    return f"SG_{space} real {name}[{max(1, flat.size)}] = {{{body}}};"


# ----------------------------------------------------------------------------- target gradients


@dataclass(frozen=True)
class _Gradient:
    """A target gradient's C fragment: ``sg_grad(th, g)`` writes ``grad U(th)`` into ``g``."""

    mirrors: str
    arrays: Callable[[tuple], dict]  # params -> dict name -> array
    code: str  # the body of sg_grad, in terms of D, the arrays and the macros
    helpers: str = ""  # device functions sg_grad calls
    # arrays that, in single precision, are stored times log2(e), the exponents then being in base 2
    base2: tuple[str, ...] = ()


_LINEAR_GAUSSIAN = _Gradient(
    "sgsim.targets.gaussian.linear_gaussian_grad_u",
    lambda params: {"PREC": params[0], "SHIFT": params[1]},
    """
    // P th - b as axpy updates over the rows of the symmetric P, each g[i] summed in the order of j
    #pragma unroll
    for (int i = 0; i < D; ++i) g[i] = -SHIFT[i];
    #pragma unroll
    for (int j = 0; j < D; ++j) {
        const real tj = th[j];
        #pragma unroll
        for (int i = 0; i < D; ++i) g[i] += PREC[j * D + i] * tj;
    }
""",
)

_MIXTURE = _Gradient(
    "sgsim.targets.mixtures.mixture_grad_u (and mixture_grad_u_2d, the same arithmetic)",
    # TWO_HP = 2 half_prec = 1 / s_j^2 exactly (a doubling), so w * TWO_HP[j] is the CPU's w * 2 * half_prec[j]
    lambda params: {
        "MEANS": params[0],
        "LIN": params[1],
        "CONST": params[2],
        "HALF_PREC": params[3],
        "TWO_HP": 2.0 * params[3],
    },
    """
    // U = -logsumexp_j e_j, e_j = const_j - half_prec_j |x|^2 + lin_j . x; the gradient is
    // sum_j r_j (x - mu_j) / s_j^2 with r = softmax(e), around the largest exponent
    real sq = 0;
    #pragma unroll
    for (int i = 0; i < D; ++i) sq += th[i] * th[i];
    // each exponent is computed once and held in a register when there are few components
    // (the same value the CPU kernel recomputes), else recomputed in the second pass
#if J <= 32
    real ex[J];
#define SG_EXPONENT(j) ex[j]
#else
#define SG_EXPONENT(j) sg_exponent(j, th, sq)
#endif
    real best = -SG_INF;
    #pragma unroll
    for (int j = 0; j < J; ++j) {
        const real e = sg_exponent(j, th, sq);
#if J <= 32
        ex[j] = e;
#endif
        best = e > best ? e : best;
    }
    real acc[D];
    #pragma unroll
    for (int i = 0; i < D; ++i) acc[i] = 0;
    real total = 0;
    #pragma unroll
    for (int j = 0; j < J; ++j) {
        const real e = SG_EXPONENT(j) - best;
#if SG_SKIP
        if (e > (real)(-40.0)) {
#else
        {
#endif
            // in single precision the exponents are in base 2 (see render): one instruction less each
            const real w = SG_EXP_MIX(e);
            total += w;
            const real c = w * TWO_HP[j];
            #pragma unroll
            for (int i = 0; i < D; ++i) acc[i] += c * (th[i] - MEANS[j * D + i]);
        }
    }
#undef SG_EXPONENT
    #pragma unroll
    for (int i = 0; i < D; ++i) g[i] = SG_DIV(acc[i], total);
""",
    base2=("CONST", "LIN", "HALF_PREC"),
    helpers="""
SG_DEV real sg_exponent(int j, const real* th, real sq) {
    real e = CONST[j] - HALF_PREC[j] * sq;
    #pragma unroll
    for (int i = 0; i < D; ++i) e += LIN[j * D + i] * th[i];
    return e;
}
""",
)

_EXPONENTIAL_MIXTURE = _Gradient(
    "sgsim.targets.exponential.exp_mixture_grad_u",
    lambda params: {"LOG_COEF": params[0], "LAM": params[1]},
    """
    // in y = log z: dU/dy = e^y sum_j r_j lambda_j - 1, r = softmax(log pi_j + log lambda_j - lambda_j e^y)
    const real ey = SG_EXP(th[0]);
    real best = -SG_INF;
    #pragma unroll
    for (int j = 0; j < J; ++j) {
        const real e = LOG_COEF[j] - LAM[j] * ey;
        best = e > best ? e : best;
    }
    real total = 0, acc = 0;
    #pragma unroll
    for (int j = 0; j < J; ++j) {
        const real w = SG_EXP(LOG_COEF[j] - LAM[j] * ey - best);
        total += w;
        acc += w * LAM[j];
    }
    g[0] = SG_DIV(ey * acc, total) - (real)1;
""",
)

#: the supported target gradients, keyed by the compiled CPU gradient each one mirrors
GRADIENTS = {
    linear_gaussian_grad_u: _LINEAR_GAUSSIAN,
    mixture_grad_u: _MIXTURE,
    mixture_grad_u_2d: _MIXTURE,
    exp_mixture_grad_u: _EXPONENTIAL_MIXTURE,
}


# ----------------------------------------------------------------------------- algorithm steps


@dataclass(frozen=True)
class _Step:
    """An algorithm's C fragments around the gradient (``move``, ``update``).

    The fragments see the state ``x[NS][D]`` (``x[0]`` is theta), the gradient ``g``, the noise
    ``z``, ``nz`` (whether the step has noise), the step size ``a``, the step's index ``k``, and
    each of the algorithm's named constants under its name in capitals (:func:`constant_defines`).
    """

    mirrors: str
    update: str
    move: str = ""


def constant_defines(consts: Any) -> tuple[list[str], dict]:
    """``(#define lines, arrays)`` for an algorithm's named constants (``Algorithm.constants``).

    Each field ``name`` becomes ``NAME`` in the C text: an integer as a ``long long`` literal, a
    real number as an exact hexadecimal literal of the kernel's precision, an array as a
    parameter array of that name.
    """
    lines, arrays = [], {}
    for name, value in zip(consts._fields, consts, strict=True):
        key = name.upper()
        if isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, int | np.integer) and not isinstance(value, bool):
            lines.append(f"#define {key} {int(value)}LL")
        else:
            lines.append(f"#define {key} (real)({float(value).hex()})")
    return lines, arrays


_SGLD = _Step(
    "sgsim.integrators.sgld.update",
    """
    if (nz) {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[0][i] = x[0][i] - a * g[i] + z[i];
    } else {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[0][i] = x[0][i] - a * g[i];
    }
""",
)

_SGHMC = _Step(
    "sgsim.integrators.sghmc.move and update",
    move="""
    #pragma unroll
    for (int i = 0; i < D; ++i) x[0][i] += x[1][i];
""",
    update="""
    if (nz) {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[1][i] = KEEP * x[1][i] - a * g[i] + z[i];
    } else {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[1][i] = KEEP * x[1][i] - a * g[i];
    }
""",
)


_PRECONDITIONED_SGD = _Step(
    "sgsim.integrators.constant_sgd.update",
    """
    real s = a * SCALE;
#if KIND == 0
    s = s * H_DIAG[0];
    #pragma unroll
    for (int i = 0; i < D; ++i) x[0][i] = x[0][i] - s * g[i];
#elif KIND == 1
    #pragma unroll
    for (int i = 0; i < D; ++i) x[0][i] = x[0][i] - s * H_DIAG[i] * g[i];
#else
    // axpy updates over the rows of the symmetric H
    #pragma unroll
    for (int m = 0; m < D; ++m) {
        const real sg = s * g[m];
        #pragma unroll
        for (int i = 0; i < D; ++i) x[0][i] = x[0][i] - H_FULL[m * D + i] * sg;
    }
#endif
    if (nz) {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[0][i] = x[0][i] + z[i];
    }
""",
)

_MOMENTUM_SGD = _Step(
    "sgsim.integrators.constant_sgd.momentum_update",
    """
    const real s = a * SCALE;
    if (nz) {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[1][i] = KEEP * x[1][i] - s * g[i] + z[i];
    } else {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[1][i] = KEEP * x[1][i] - s * g[i];
    }
    #pragma unroll
    for (int i = 0; i < D; ++i) x[0][i] = x[0][i] + x[1][i];
""",
)

_IASG = _Step(
    "sgsim.integrators.constant_sgd.iasg_update",
    """
    const real s = a * SCALE;
    #pragma unroll
    for (int i = 0; i < D; ++i) x[0][i] = x[0][i] - s * g[i];
    if (nz) {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[0][i] = x[0][i] + z[i];
    }
    // the running mean of the current window (position (k - warmup) mod window)
    const sg_i64 pos = k - WARMUP;
    if (pos >= 0) {
        const real inv = (real)1 / (real)(pos % WINDOW + 1);
        #pragma unroll
        for (int i = 0; i < D; ++i) x[1][i] = x[1][i] + (x[0][i] - x[1][i]) * inv;
    }
""",
)

#: the supported steps, keyed by the compiled CPU ``update`` each one mirrors (with its ``move``)
STEPS = {
    (stay, sgld.update): _SGLD,
    (sghmc.move, sghmc.update): _SGHMC,
    (stay, constant_sgd.update): _PRECONDITIONED_SGD,
    (stay, constant_sgd.momentum_update): _MOMENTUM_SGD,
    (stay, constant_sgd.iasg_update): _IASG,
}


# ----------------------------------------------------------------------------- what runs where


def _step_key(alg) -> tuple:
    return alg.step if isinstance(alg.step, tuple) else (stay, alg.step)


def supported(run) -> str | None:
    """Why ``run`` cannot run on the GPU path, or None when it can.

    Parameters
    ----------
    run : sgsim.driver.Run
        A prepared run (``sgsim.sampling.prepare``).

    Returns
    -------
    str or None
        The reason, naming the method or the target and what the GPU path runs instead.

    Examples
    --------
    >>> from sgsim.gpu import supported
    >>> from sgsim.sampling import prepare
    >>> print(supported(prepare("mixture_25", "csgld", 100, step_size=0.05, n_cycles=2)[0]))
    None
    >>> print(supported(prepare("mixture_25", "svgd", 100, step_size=0.05, n_particles=10)[0]))  # doctest: +ELLIPSIS
    method 'svgd' moves interacting particles; the GPU path runs independent chains (csghmc, csgld, ...)
    """
    alg, target = run.method.algorithm, run.target
    if run.interacting:
        return (
            f"method {run.method.name!r} moves interacting particles; the GPU path runs independent chains "
            f"({', '.join(_gpu_methods())})"
        )
    if _step_key(alg) not in STEPS:
        return f"method {run.method.name!r} has no GPU kernel; the GPU path runs {', '.join(_gpu_methods())}"
    if target.stochastic_grad_u is not None:
        return (
            f"target {target.name!r} draws minibatches (a data target); the GPU path runs the synthetic targets "
            "(Gaussian mixtures, the exponential mixture, linear-Gaussian oracles with emulated gradient noise)"
        )
    if target.grad_u not in GRADIENTS:
        return (
            f"target {target.name!r} has a gradient without a GPU kernel; the GPU path runs the synthetic targets "
            "(Gaussian mixtures, the exponential mixture, linear-Gaussian oracles with emulated gradient noise)"
        )
    return None


def _gpu_methods() -> list[str]:
    from ..integrators import METHODS

    return sorted(name for name, m in METHODS.items() if _step_key(m.algorithm) in STEPS)


# ----------------------------------------------------------------------------- the source


@dataclass(frozen=True)
class KernelSource:
    """A generated kernel: its text and what the launch needs to know about it.

    Attributes
    ----------
    code : str
        The CUDA C++ source (also valid host C++).
    precision : str
        ``"float32"`` or ``"float64"``: the type ``real`` of the state and the per-step arrays.
    dim, n_state : int
        ``D`` and the number of state rows.
    storage : str
        The storage mode compiled in.
    """

    code: str
    precision: str
    dim: int
    n_state: int
    storage: str

    @property
    def key(self) -> str:
        """A digest of the source: names the host build's cache file."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:24]

    @property
    def dtype(self) -> np.dtype:
        """The NumPy type of ``real``."""
        return np.dtype(self.precision)


_PRELUDE = r"""
#ifdef __CUDACC__
#define SG_DEV __device__ __forceinline__
#define SG_CONSTANT __constant__ const
#define SG_GLOBAL __device__ const
typedef unsigned int sg_u32;
typedef long long sg_i64;
typedef unsigned long long sg_u64;
#define SG_MULHI(a, b) __umulhi((a), (b))
#define SG_ISFINITE(v) isfinite(v)
#else
#include <cmath>
#include <cstdint>
#define SG_DEV static inline
#define SG_CONSTANT static const
#define SG_GLOBAL static const
typedef uint32_t sg_u32;
typedef int64_t sg_i64;
typedef uint64_t sg_u64;
#define SG_MULHI(a, b) ((sg_u32)(((sg_u64)(a) * (sg_u64)(b)) >> 32))
#define SG_ISFINITE(v) std::isfinite(v)
#endif
"""

_MATH = {
    ("float32", True): r"""
typedef float real;
#define SG_INF __int_as_float(0x7f800000)
#define SG_EXP(v) __expf(v)
#define SG_EXP2(v) exp2f(v)
#define SG_DIV(a, b) __fdividef((a), (b))
#define SG_LOG(v) __logf(v)
// v > 0 wherever it is used (the Box-Muller radius): v / sqrt(v) by the hardware's reciprocal square root
#define SG_SQRT(v) ((v) * rsqrtf(v))
#define SG_ABS(v) fabsf(v)
// the hardware's sine and cosine, accurate on the angle's range [-pi, pi)
#define SG_SINCOS(v, s, c) __sincosf((v), (s), (c))
#define SG_TWO_PI 6.28318530717958647692f
""",
    ("float64", True): r"""
typedef double real;
#define SG_INF __longlong_as_double(0x7ff0000000000000LL)
#define SG_EXP(v) exp(v)
#define SG_DIV(a, b) ((a) / (b))
#define SG_LOG(v) log(v)
#define SG_SQRT(v) sqrt(v)
#define SG_ABS(v) fabs(v)
#define SG_SINCOS(v, s, c) sincos((v), (s), (c))
#define SG_TWO_PI 6.28318530717958647692
""",
    ("float32", False): r"""
typedef float real;
#define SG_INF HUGE_VALF
#define SG_EXP(v) std::exp((float)(v))
#define SG_EXP2(v) std::exp2((float)(v))
#define SG_DIV(a, b) ((a) / (b))
#define SG_LOG(v) std::log((float)(v))
#define SG_SQRT(v) std::sqrt((float)(v))
#define SG_ABS(v) std::fabs((float)(v))
#define SG_SINCOS(v, s, c) (*(s) = std::sin((float)(v)), *(c) = std::cos((float)(v)))
#define SG_TWO_PI 6.28318530717958647692f
""",
    ("float64", False): r"""
typedef double real;
#define SG_INF HUGE_VAL
#define SG_EXP(v) std::exp(v)
#define SG_DIV(a, b) ((a) / (b))
#define SG_LOG(v) std::log(v)
#define SG_SQRT(v) std::sqrt(v)
#define SG_ABS(v) std::fabs(v)
#define SG_SINCOS(v, s, c) (*(s) = std::sin(v), *(c) = std::cos(v))
#define SG_TWO_PI 6.28318530717958647692
""",
}

_PHILOX = r"""
// Philox4x32-10: ten rounds of two 32x32->64 products, the key bumped by the Weyl constants
SG_DEV void sg_philox(sg_u32 c0, sg_u32 c1, sg_u32 c2, sg_u32 c3, sg_u32 k0, sg_u32 k1, sg_u32* out) {
    #pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const sg_u32 hi0 = SG_MULHI(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const sg_u32 hi1 = SG_MULHI(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

// the NPB normals of Philox block b of chain c (Box-Muller on pairs of uniforms)
SG_DEV void sg_normal_block(sg_u64 b, sg_u64 c, sg_u32 k0, sg_u32 k1, real* n) {
    sg_u32 w[4];
    sg_philox((sg_u32)b, (sg_u32)(b >> 32), (sg_u32)c, (sg_u32)(c >> 32), k0, k1, w);
#if NPB == 4
    // u in (0, 1) for the radius: the midpoints (k + 1/2) 2^-23, exact in single precision (with 24
    // bits, k + 1/2 rounds to 2^24 at the top and u to 1: a zero radius, and NaN through the
    // reciprocal square root); v in [0, 1) for the angle, from 24 bits. The radius's square is
    // kept positive: near u = 1 the fast logarithm's absolute error (about 4e-7) exceeds -log u.
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        const real u = ((real)(w[2 * h] >> 9) + (real)0.5) * (real)0x1p-23;
        const real v = (real)(w[2 * h + 1] >> 8) * (real)0x1p-24;
        const real r2 = (real)(-2) * SG_LOG(u);
        const real r = SG_SQRT(r2 > (real)1e-30 ? r2 : (real)1e-30);
        real s, co;
        SG_SINCOS(SG_TWO_PI * (v - (real)0.5), &s, &co);
        n[2 * h] = r * co;
        n[2 * h + 1] = r * s;
    }
#else
    // 53-bit uniforms from two words each
    const sg_u64 hu = (((sg_u64)w[0] << 32) | w[1]) >> 11, hv = (((sg_u64)w[2] << 32) | w[3]) >> 11;
    const real u = ((real)hu + (real)0.5) * (real)0x1p-53;
    const real v = (real)hv * (real)0x1p-53;
    const real r = SG_SQRT((real)(-2) * SG_LOG(u));
    real s, co;
    SG_SINCOS(SG_TWO_PI * (v - (real)0.5), &s, &co);
    n[0] = r * co;
    n[1] = r * s;
#endif
}
"""

_CHAIN = r"""
@HELPERS@
SG_DEV void sg_grad(const real* th, real* g) {
@GRADIENT@
}

// one chain over a block of steps: the loop of sgsim.integrators._loop._chain_loop. Arrays
// indexed by chain put the chain last, so that a warp's 32 threads touch 32 consecutive values.
SG_DEV void sg_chain(sg_i64 c, sg_i64 R, real* state, sg_i64* failed, const real* alpha, const real* sd,
                     const unsigned char* noisy, const sg_i64* store, sg_i64 nb, sg_i64 k0, real bound,
                     sg_u32 key0, sg_u32 key1, real* out, sg_i64* count, double* mean, double* m2) {
    if (failed[c] >= 0) return;
    real x[NS][D];
    #pragma unroll
    for (int r = 0; r < NS; ++r) {
        #pragma unroll
        for (int i = 0; i < D; ++i) x[r][i] = state[(r * D + i) * R + c];
    }
#if STORAGE == STORAGE_MOMENTS
    sg_i64 cnt = count[c];
    double mu[D], mm[D][D], delta[D];
    #pragma unroll
    for (int i = 0; i < D; ++i) {
        mu[i] = mean[i * R + c];
        #pragma unroll
        for (int m = 0; m < D; ++m) mm[i][m] = m2[(i * D + m) * R + c];
    }
#endif
    real g[D], z[D];
#if ROTATE
    real e[D];
#endif
    // the Philox block whose normals are held (none yet)
    sg_u64 held = ~(sg_u64)0;
    real nrm[NPB];
    for (sg_i64 j = 0; j < nb; ++j) {
        const real a = alpha[j];
        const sg_i64 k = k0 + j;
        {
@MOVE@
        }
        sg_grad(x[0], g);
        const bool nz = noisy[j] != 0;
        if (nz) {
            // normal t = k D + i of the chain, from Philox block t / NPB; then basis @ (sd_j * xi)
            #pragma unroll
            for (int i = 0; i < D; ++i) {
                const sg_u64 t = (sg_u64)k * D + i;
                const sg_u64 b = t / NPB;
                if (b != held) {
                    sg_normal_block(b, (sg_u64)c, key0, key1, nrm);
                    held = b;
                }
                const int p = (int)(t % NPB);
                real xi = nrm[0];
                #pragma unroll
                for (int q = 1; q < NPB; ++q) xi = p == q ? nrm[q] : xi;
#if ROTATE
                e[i] = sd[j * D + i] * xi;
#else
                z[i] = sd[j * D + i] * xi;
#endif
            }
#if ROTATE
            // z = basis @ e as axpy updates over the eigenvectors, each z[i] summed in the order of m
            #pragma unroll
            for (int i = 0; i < D; ++i) z[i] = 0;
            #pragma unroll
            for (int m = 0; m < D; ++m) {
                #pragma unroll
                for (int i = 0; i < D; ++i) z[i] += BASIS_T[m * D + i] * e[m];
            }
#endif
        }
        {
@UPDATE@
        }
        // theta within the bound (which fails for NaN and inf too), the other rows finite
        bool ok = true;
        #pragma unroll
        for (int i = 0; i < D; ++i) ok = ok && SG_ABS(x[0][i]) <= bound;
        #pragma unroll
        for (int r = 1; r < NS; ++r) {
            #pragma unroll
            for (int i = 0; i < D; ++i) ok = ok && SG_ISFINITE(x[r][i]);
        }
        if (!ok) {
            failed[c] = k;
            break;
        }
#if STORAGE == STORAGE_DRAWS
        const sg_i64 s = store[j];
        if (s >= 0) {
            #pragma unroll
            for (int i = 0; i < D; ++i) out[(s * D + i) * R + c] = x[KEPT][i];
        }
#elif STORAGE == STORAGE_MOMENTS
        if (store[j] == SG_MOMENTS) {
            // Welford's update, in double precision, as sgsim.integrators._loop.welford_update
            cnt += 1;
            const double n = (double)cnt;
            #pragma unroll
            for (int i = 0; i < D; ++i) {
                delta[i] = (double)x[KEPT][i] - mu[i];
                mu[i] += delta[i] / n;
            }
            #pragma unroll
            for (int i = 0; i < D; ++i) {
                #pragma unroll
                for (int m = 0; m < D; ++m) mm[i][m] += delta[i] * ((double)x[KEPT][m] - mu[m]);
            }
        }
#endif
    }
    #pragma unroll
    for (int r = 0; r < NS; ++r) {
        #pragma unroll
        for (int i = 0; i < D; ++i) state[(r * D + i) * R + c] = x[r][i];
    }
#if STORAGE == STORAGE_MOMENTS
    count[c] = cnt;
    #pragma unroll
    for (int i = 0; i < D; ++i) {
        mean[i * R + c] = mu[i];
        #pragma unroll
        for (int m = 0; m < D; ++m) m2[(i * D + m) * R + c] = mm[i][m];
    }
#endif
}

#define SG_RUN_ARGS sg_i64 R, real* state, sg_i64* failed, const real* alpha, const real* sd, \
    const unsigned char* noisy, const sg_i64* store, sg_i64 nb, sg_i64 k0, real bound, sg_u32 key0, sg_u32 key1, \
    real* out, sg_i64* count, double* mean, double* m2
#define SG_RUN_PASS R, state, failed, alpha, sd, noisy, store, nb, k0, bound, key0, key1, out, count, mean, m2

#ifdef __CUDACC__
extern "C" __global__ void __launch_bounds__(SG_THREADS) sg_run(SG_RUN_ARGS) {
    const sg_i64 c = (sg_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c < R) sg_chain(c, SG_RUN_PASS);
}

// normals t0, t0 + 1, ... of every chain (shape (n, R), chain last): for checking the generator
extern "C" __global__ void sg_normals(sg_i64 R, sg_u64 t0, sg_i64 n, sg_u32 key0, sg_u32 key1, real* out) {
    const sg_i64 c = (sg_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= R) return;
    real nrm[NPB];
    for (sg_i64 q = 0; q < n; ++q) {
        const sg_u64 t = t0 + (sg_u64)q;
        sg_normal_block(t / NPB, (sg_u64)c, key0, key1, nrm);
        out[q * R + c] = nrm[t % NPB];
    }
}
#else
extern "C" void sg_run_host(SG_RUN_ARGS) {
    for (sg_i64 c = 0; c < R; ++c) sg_chain(c, SG_RUN_PASS);
}

extern "C" void sg_normals_host(sg_i64 R, sg_u64 t0, sg_i64 n, sg_u32 key0, sg_u32 key1, real* out) {
    real nrm[NPB];
    for (sg_i64 c = 0; c < R; ++c) {
        for (sg_i64 q = 0; q < n; ++q) {
            const sg_u64 t = t0 + (sg_u64)q;
            sg_normal_block(t / NPB, (sg_u64)c, key0, key1, nrm);
            out[q * R + c] = nrm[t % NPB];
        }
    }
}

extern "C" void sg_philox_host(const sg_u32* ctr, const sg_u32* key, sg_u32* out) {
    sg_philox(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1], out);
}
#endif
"""

_STORAGE_CODES = {"draws": 1, "final": 2, "moments": 3}


def render(run, precision: str, device: bool = True) -> KernelSource:
    """The kernel source of ``run`` (a prepared ``sgsim.driver.Run``) in ``precision``.

    Parameters
    ----------
    run : sgsim.driver.Run
        What ``sgsim.sampling.prepare`` returned: target, method, options, storage, noise basis.
    precision : {"float32", "float64"}
    device : bool
        The CUDA text (True) or the host C++ text (False); they differ only in the math
        functions' names (the GPU's fast intrinsics in single precision).

    Raises
    ------
    ParameterError
        If the run cannot run on the GPU path (see :func:`supported`), naming ``backend``.
    """
    if precision not in PRECISIONS:
        raise ParameterError("precision", f"precision must be one of {PRECISIONS}, got {precision!r}")
    why = supported(run)
    if why is not None:
        raise ParameterError("backend", f"backend='gpu': {why}")
    target, alg = run.target, run.method.algorithm
    gradient = GRADIENTS[target.grad_u]
    step = STEPS[_step_key(alg)]
    d = target.dim
    grad_arrays = gradient.arrays(target.params)
    base2 = precision == "float32"
    if base2:  # exp(e) = exp2(e log2(e)): the scaled exponents save a multiplication per component
        grad_arrays = {k: np.asarray(v) * _LOG2E if k in gradient.base2 else v for k, v in grad_arrays.items()}
    defines, step_arrays = constant_defines(alg.constants_for(run.options))
    n_components = next((np.asarray(v).shape[0] for k, v in grad_arrays.items() if k in ("CONST", "LAM")), 1)
    params = {**grad_arrays, **step_arrays}
    if run.basis.rotate:
        params["BASIS_T"] = run.basis.rows
    size = sum(np.asarray(v).size for v in params.values()) * np.dtype(precision).itemsize
    space = "CONSTANT" if size <= _CONSTANT_BYTES else "GLOBAL"
    lines = [
        f"// sgsim many-chain kernel: {run.method.name} ({step.mirrors}) on {target.name} "
        f"({gradient.mirrors}), d = {d}, {precision}, storage {run.storage!r}",
        _PRELUDE,
        _MATH[(precision, device)],
        f"#define D {d}",
        f"#define NS {len(alg.state)}",
        f"#define KEPT {alg.kept_row}",
        f"#define J {n_components}",
        f"#define NPB {normals_per_block(precision)}",
        f"#define ROTATE {int(run.basis.rotate)}",
        f"#define SG_SKIP {int(precision == 'float64')}",
        "#define SG_EXP_MIX(v) " + ("SG_EXP2(v)" if base2 else "SG_EXP(v)"),
        "#define STORAGE_DRAWS 1",
        "#define STORAGE_FINAL 2",
        "#define STORAGE_MOMENTS 3",
        f"#define STORAGE {_STORAGE_CODES[run.storage]}",
        f"#define SG_MOMENTS {MOMENTS}",
        f"#define SG_NOTHING {NOTHING}",
        f"#define SG_THREADS {THREADS}",
        *defines,
        *(_array(name, values, precision, space) for name, values in params.items()),
        _PHILOX,
        _CHAIN.replace("@HELPERS@", gradient.helpers)
        .replace("@GRADIENT@", gradient.code)
        .replace("@MOVE@", step.move)
        .replace("@UPDATE@", step.update),
    ]
    return KernelSource("\n".join(lines), precision, d, len(alg.state), run.storage)
